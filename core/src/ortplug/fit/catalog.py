"""The catalog of known providers: for each, the hardware it is for, how to see that hardware with
plain file reads (:mod:`ortplug.fit.hardware`), and what to pip-install for it.

It is written in the plugin declaration format (:mod:`ortplug.plugins.declaration`, whose
catalog fields say what each means): the first-party plugins' own ``ortplug.json`` files, as
the core's wheel carries them (:mod:`ortplug.plugin_host.first_party`), most specific first
(``_rank``: the first kind that applies to a host and names a runtime decides the runtime),
then the declaration of every installed plugin the plugin host lets claim its kinds (a third
party joins by shipping ``detect`` and ``install`` in its ``ortplug.json``; one blocked, failed
or skipped proposes nothing, and none replaces a kind of this project's), then the file
``$ORTPLUG_CATALOG`` names (an internal index, a pinned version set); a later kind of the same
name replaces an earlier one. Every entry but the built-in ones says who declared it, and
doctor names them beside what they would install. Only ``info`` and ``doctor`` import this
module, never a build.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from ..errors import OptionError
from ..host.requirement import release
from ..plugin_host.first_party import example_declarations, first_party_declarations
from ..plugins.declaration import (
    DeclarationError,
    KindDeclaration,
    PluginDeclaration,
    from_json,
    parse_declarations,
)
from ..settings import Settings, settings
from .hardware import Hardware

__all__ = [
    "CATALOG_ENV",
    "CatalogEntry",
    "Condition",
    "Install",
    "condition_seen",
    "load_catalog",
    "refused_declarations",
]

#: A catalog file of one's own, in the declaration format.
CATALOG_ENV = "ORTPLUG_CATALOG"


def _hex(value: str | None) -> int | None:
    return None if value is None else int(value, 16)


@attrs.frozen(kw_only=True)
class Condition:
    """A ``detect`` condition (the declaration's ``_CONDITION`` fields); every key given holds.

    ``pci_vendor``/``pci_class``: a PCI function with that vendor id and base class; ``gpu``: a
    display-class PCI device or a DRM render node; ``nvidia_driver``: the driver's version file;
    ``macos_min``: at least this macOS; ``vulkan_loader``: libvulkan; ``cpu_vendor``/``cpu_flags``:
    one of these vendors, all of these flags; ``platform``/``machine``: one of these.
    """

    platform: tuple[str, ...] = ()
    machine: tuple[str, ...] = ()
    pci_vendor: int | None = attrs.field(default=None, converter=_hex)
    pci_class: int | None = attrs.field(default=None, converter=_hex)
    gpu: bool = False
    nvidia_driver: bool = False
    macos_min: str | None = None
    vulkan_loader: bool = False
    cpu_vendor: tuple[str, ...] = ()
    cpu_flags: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Install:
    """What the catalog proposes to install (the declaration's ``_INSTALL`` fields): the
    requirement, the runtime wheel it brings, an extra index, the CUDA major it needs."""

    install: str
    runtime: str | None = None
    index_url: str | None = None
    cuda_min: int | None = None


@attrs.frozen(kw_only=True)
class CatalogEntry:
    """One provider kind the catalog can propose, with the plugin and distribution it is in."""

    name: str
    plugin: str
    distribution: str
    hardware: str
    detect: tuple[Condition, ...]
    installs: tuple[Install, ...]
    unless: tuple[str, ...] = ()
    optional: bool = False
    source: str = ""
    #: The distribution (or ``ORTPLUG_CATALOG`` file) that declared it; empty: ortplug's own.
    declared_by: str = ""

    def seen(self, hw: Hardware) -> str | None:
        """What on ``hw`` this entry is for, or ``None`` when the host has none of it."""
        return next((s for c in self.detect if (s := condition_seen(c, hw)) is not None), None)

    def install_for(self, cuda_major: int | None) -> Install | None:
        """The first install the driver's CUDA major allows (the first one when no driver was
        seen: it needs installing anyway), ``None`` when the driver is too old for every one."""
        if cuda_major is None:
            return self.installs[0] if self.installs else None
        return next((i for i in self.installs if (i.cuda_min or 0) <= cuda_major), None)


def _pci_seen(c: Condition, hw: Hardware) -> str | None:
    devices = [
        d.describe()
        for d in hw.pci
        if c.pci_vendor in (None, d.vendor) and c.pci_class in (None, d.pci_class >> 16)
    ]
    return " + ".join(devices) or None


def condition_seen(c: Condition, hw: Hardware) -> str | None:
    """What of ``hw`` makes the condition hold (``"NVIDIA H200 (driver 580.65.06, CUDA 13)"``,
    ``"a CPU"`` for an empty one), or ``None`` when it does not."""
    said: list[str] = []
    if c.platform and hw.platform not in c.platform:
        return None
    if c.machine and hw.machine not in c.machine:
        return None
    if c.pci_vendor is not None or c.pci_class is not None:
        devices = _pci_seen(c, hw)
        if devices is None:
            return None
        said.append(devices)
    if c.gpu:
        gpus = [g.describe() for g in hw.gpus()] or [f"GPU ({n})" for n in hw.render_nodes]
        if not gpus:
            return None
        said += [] if said else [" + ".join(gpus)]
    if c.nvidia_driver and hw.nvidia_driver is None:
        return None
    if c.macos_min is not None:
        if hw.macos_version is None or release(hw.macos_version) < release(c.macos_min):
            return None
        said.append(f"macOS {hw.macos_version} on {hw.machine}")
    if c.vulkan_loader:
        if hw.vulkan_loader is None:
            return None
        said.append("with a Vulkan loader")
    if (c.cpu_vendor and hw.cpu_vendor not in c.cpu_vendor) or not set(c.cpu_flags) <= hw.cpu_flags:
        return None
    if c.cpu_vendor or c.cpu_flags:
        said.append(" ".join(filter(None, [hw.cpu_vendor, "CPU", ", ".join(c.cpu_flags)])))
    if hw.nvidia_driver and (c.nvidia_driver or c.pci_vendor == 0x10DE):
        said.append(f"(driver {hw.nvidia_driver}, CUDA {hw.cuda_major or 'below 11'})")
    return " ".join(said) or "a CPU"


def _distribution(declaration: PluginDeclaration) -> str:
    if not declaration.distribution:
        raise OptionError(
            f"{declaration.source}: plugins.{declaration.plugin}: declares a kind with 'detect', "
            "so expected the plugin's 'distribution' (what pip installs), got none"
        )
    return declaration.distribution


def _entries(declarations: Iterable[PluginDeclaration], own: bool) -> list[CatalogEntry]:
    """The kinds with a ``detect`` (those the catalog can propose) as entries; ``own``: the
    built-in catalog's, which no one else declared."""
    return [
        CatalogEntry(
            name=kind.kind,
            plugin=declaration.plugin,
            distribution=_distribution(declaration),
            hardware=kind.hardware or kind.kind,
            detect=tuple(Condition(**c) for c in kind.detect),
            installs=tuple(Install(**i) for i in kind.installs()),
            unless=kind.unless,
            optional=kind.optional,
            source=declaration.source,
            declared_by="" if own else declaration.source,
        )
        for declaration in declarations
        for kind in declaration.kinds
        if kind.detect is not None
    ]


def _rank(kind: KindDeclaration, example: bool) -> tuple[bool, bool, int]:
    """Most specific first: a kind that needs another's facts (TensorRT: the cuda probe's), then
    the others, then one unneeded where others apply (``unless``); the examples' after this
    project's plugins; one for every host (an empty ``detect`` condition) last."""
    for_every_host = kind.detect is not None and {} in kind.detect
    specific = 0 if set(kind.required_probes()) - {kind.kind} else 2 if kind.unless else 1
    return for_every_host, example, specific


def _builtin() -> list[PluginDeclaration]:
    """This project's plugins and examples, each kind its own entry, most specific first."""
    ranked = [
        (_rank(kind, example), attrs.evolve(declaration, kinds=(kind,)))
        for example, declarations in (
            (False, first_party_declarations()),
            (True, example_declarations()),
        )
        for declaration in declarations
        for kind in declaration.kinds
    ]
    return [declaration for _, declaration in sorted(ranked, key=lambda pair: pair[0])]


def _installed_declarations(environ: Mapping[str, str] | None) -> list[PluginDeclaration]:
    """The declarations of the installed plugins the plugin host lets claim what they declare
    (:meth:`~ortplug.plugin_host.manager.PluginHost.holding_declarations`: not blocked, failed or
    skipped for a name claimed first), each with the distribution that ships it as its source;
    a kind of the built-in catalog's is left out: the built-in entry is this project's plugin's
    own declaration already (a third party declaring ``cpu`` with its own ``install`` would
    have replaced it)."""
    from ..plugin_host.manager import PluginHost, get_plugin_host

    host = get_plugin_host() if environ is None else PluginHost(environ=environ)
    ours = {kind.kind for declaration in _builtin() for kind in declaration.kinds}
    return [
        attrs.evolve(
            declaration,
            source=declaration.distribution or f"plugin {declaration.plugin!r}",
            kinds=tuple(k for k in declaration.kinds if k.kind not in ours),
        )
        for declaration, _ in host.holding_declarations()
    ]


def refused_declarations(environ: Mapping[str, str] | None = None) -> list[str]:
    """One line for each installed plugin let in whose declaration does not check (a plain-http
    ``index_url``...): the catalog leaves all of it out, and ``doctor --fix`` says so."""
    from ..plugin_host.entry_points import discover
    from ..plugin_host.manager import blocked_by
    from ..plugins.project import PROJECT

    let_in = _settings_of(environ)
    refused = []
    for row in discover(PROJECT):
        if blocked_by(row.name, let_in) is not None:
            continue
        source = row.distribution or f"plugin {row.name!r}"
        try:
            if row.declaration_error is not None:
                raise DeclarationError(row.declaration_error)
            if row.declaration is not None:
                from_json(row.name, row.declaration, source)
        except DeclarationError as exc:
            refused.append(f"{exc}; so {source} proposes nothing")
    return refused


def _settings_of(environ: Mapping[str, str] | None) -> Settings:
    """This process's settings, or those ``environ`` makes (a test's, ``check_host``'s)."""
    return settings() if environ is None else Settings.from_environ(environ, strict=False)


def _file_declarations(path: str) -> list[PluginDeclaration]:
    where = f"{CATALOG_ENV}={path}"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise OptionError(f"{where}: cannot read the catalog ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise OptionError(f"{where}: expected a JSON catalog, got invalid JSON ({exc})") from None
    try:
        return list(parse_declarations(data, where, catalog=True).values())
    except DeclarationError as exc:
        raise OptionError(str(exc)) from None


def load_catalog(
    environ: Mapping[str, str] | None = None, *, installed: bool = True
) -> tuple[CatalogEntry, ...]:
    """The built-in entries, then the installed plugins' (with ``installed``), then those of
    ``$ORTPLUG_CATALOG``: a later entry replaces one of its kind in place, new kinds go first."""
    layers = [_builtin()]
    if installed:
        layers.append(_installed_declarations(environ))
    catalog = _settings_of(environ).catalog
    if catalog is not None:
        layers.append(_file_declarations(str(catalog)))
    entries: list[CatalogEntry] = []
    for number, layer in enumerate(layers):
        new = _entries(layer, own=number == 0)
        by_name = {e.name: e for e in new}
        kept = [by_name.pop(e.name, e) for e in entries]
        entries = list(by_name.values()) + kept
    return tuple(entries)
