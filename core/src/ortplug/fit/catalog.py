"""The catalog of known providers: the hardware each is for, how to see it with plain file reads,
and what to pip-install for it (read only by ``info`` and ``doctor``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import attrs

from ..cache.root import read_cache_file
from ..errors import CacheError, OptionError
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
from .hardware import FactSource, Hardware, fact_reads

__all__ = [
    "CATALOG_ENV",
    "CatalogEntry",
    "Condition",
    "Install",
    "Need",
    "catalog_fact_reads",
    "condition_seen",
    "load_catalog",
    "refused_declarations",
]

#: A catalog file of one's own, in the declaration format.
CATALOG_ENV = "ORTPLUG_CATALOG"

#: The largest catalog file read (every first-party declaration together is 15 KB).
_MAX_BYTES = 1 << 20


def _hex(value: str | None) -> int | None:
    return None if value is None else int(value, 16)


@attrs.frozen(kw_only=True)
class Condition:
    """A ``detect`` condition: every key given holds (a PCI vendor or class, a GPU, a macOS, a
    probe's ``fact`` at least ``min``, one of ``cpu_vendor``, all ``cpu_flags``, a platform)."""

    platform: tuple[str, ...] = ()
    machine: tuple[str, ...] = ()
    pci_vendor: int | None = attrs.field(default=None, converter=_hex)
    pci_class: int | None = attrs.field(default=None, converter=_hex)
    gpu: bool = False
    macos_min: str | None = None
    fact: str | None = None
    min: str | None = None
    cpu_vendor: tuple[str, ...] = ()
    cpu_flags: tuple[str, ...] = ()


def _at_least(value: str, minimum: str | None) -> bool:
    """Whether version ``value`` is ``minimum`` or newer (no minimum: any value)."""
    return minimum is None or release(value) >= release(minimum)


@attrs.frozen(kw_only=True)
class Need:
    """A probe-backed fact an install needs, at least ``min`` (the declaration's ``needs``)."""

    fact: str
    min: str

    def holds(self, hw: Hardware) -> bool | None:
        """Whether ``hw``'s fact is ``min`` or newer; ``None`` when the fact was not seen."""
        value = hw.fact(self.fact)
        return None if value is None else _at_least(value, self.min)


def _need(value: Mapping[str, str] | None) -> Need | None:
    return None if value is None else Need(**value)


@attrs.frozen(kw_only=True)
class Install:
    """What the catalog proposes to install (the declaration's ``_INSTALL`` fields): the
    requirement, the runtime wheel it brings, an extra index, the fact it needs at a minimum."""

    install: str
    runtime: str | None = None
    index_url: str | None = None
    needs: Need | None = attrs.field(default=None, converter=_need)


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
        """What on ``hw`` this entry is for, or ``None`` when the host has none of it; with the
        facts its installs need, as seen (``NVIDIA H200 (NVIDIA driver 580.65.06)``)."""
        found = next((s for c in self.detect if (s := condition_seen(c, hw)) is not None), None)
        if found is None:
            return None
        needed = dict.fromkeys(i.needs.fact for i in self.installs if i.needs is not None)
        shown = [hw.said(n) for n in needed if hw.fact(n) is not None and hw.said(n) not in found]
        return f"{found} ({', '.join(shown)})" if shown else found

    def install_for(self, hw: Hardware) -> Install | None:
        """The first install whose needed fact holds here (the first one when none of the facts
        was seen: the driver needs installing anyway), ``None`` when every one needs more."""
        held = [None if i.needs is None else i.needs.holds(hw) for i in self.installs]
        if self.installs and all(h is None for h, i in zip(held, self.installs) if i.needs):
            return self.installs[0]
        return next((i for i, h in zip(self.installs, held) if h is not False), None)

    def needed(self) -> Need | None:
        """The lowest need among the installs (what the host must reach for any of them)."""
        needs = [i.needs for i in self.installs if i.needs is not None]
        return min(needs, key=lambda n: release(n.min)) if needs else None


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
    if c.macos_min is not None:
        if hw.macos_version is None or release(hw.macos_version) < release(c.macos_min):
            return None
        said.append(f"macOS {hw.macos_version} on {hw.machine}")
    if c.fact is not None:
        value = hw.fact(c.fact)
        if value is None or not _at_least(value, c.min):
            return None
        fact = hw.said(c.fact)
        said.append(fact if hw.labels.get(c.fact, ("", True))[1] else f"with a {fact}")
    if (c.cpu_vendor and hw.cpu_vendor not in c.cpu_vendor) or not set(c.cpu_flags) <= hw.cpu_flags:
        return None
    if c.cpu_vendor or c.cpu_flags:
        said.append(" ".join(filter(None, [hw.cpu_vendor, "CPU", ", ".join(c.cpu_flags)])))
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
    """The declarations of the installed plugins the plugin host lets claim what they declare,
    each with its distribution as its source, less the built-in catalog's kinds."""
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
    """The declarations of the catalog file ``path``: a regular file (a FIFO or a device is never
    opened: it could block or never end), at most :data:`_MAX_BYTES`; every error names it."""
    where = f"{CATALOG_ENV}={path}"
    try:
        data = json.loads(read_cache_file(path, max_bytes=_MAX_BYTES).decode("utf-8"))
    except CacheError as exc:  # not a regular file, or too big: said of "it", the file named once
        detail = str(exc).removeprefix(f"{path} ")
        raise OptionError(f"{where}: cannot read the catalog: it {detail}") from None
    except OSError as exc:
        raise OptionError(f"{where}: cannot read the catalog ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise OptionError(f"{where}: expected a JSON catalog, got invalid JSON ({exc})") from None
    except RecursionError:
        raise OptionError(f"{where}: expected a JSON catalog, got JSON nested too deeply") from None
    try:
        return list(parse_declarations(data, where, catalog=True).values())
    except DeclarationError as exc:
        raise OptionError(str(exc)) from None


def _layers(environ: Mapping[str, str] | None, installed: bool) -> list[list[PluginDeclaration]]:
    """The built-in declarations, the installed plugins' (with ``installed``), the file's."""
    layers = [_builtin()]
    if installed:
        layers.append(_installed_declarations(environ))
    catalog = _settings_of(environ).catalog
    if catalog is not None:
        layers.append(_file_declarations(str(catalog)))
    return layers


def catalog_fact_reads(
    environ: Mapping[str, str] | None = None, *, installed: bool = True
) -> tuple[FactSource, ...]:
    """The facts the catalog's declarations say how to read from files (a later layer's first,
    as its kinds replace earlier ones)."""
    return fact_reads(d for layer in reversed(_layers(environ, installed)) for d in layer)


def load_catalog(
    environ: Mapping[str, str] | None = None, *, installed: bool = True
) -> tuple[CatalogEntry, ...]:
    """The built-in entries, then the installed plugins' (with ``installed``), then those of
    ``$ORTPLUG_CATALOG``: a later entry replaces one of its kind in place, new kinds go first."""
    layers = _layers(environ, installed)
    entries: list[CatalogEntry] = []
    for number, layer in enumerate(layers):
        new = _entries(layer, own=number == 0)
        by_name = {e.name: e for e in new}
        kept = [by_name.pop(e.name, e) for e in entries]
        entries = list(by_name.values()) + kept
    return tuple(entries)
