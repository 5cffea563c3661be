"""This project's plugin declarations, as the core's wheel carries them (copied from each plugin's
``ortplug.json`` at build), read on first use."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..plugins.declaration import (
    DeclarationError,
    KindDeclaration,
    PluginDeclaration,
    from_json,
    parse_declarations,
    source_of,
)
from ..plugins.project import PROJECT
from . import entry_points as _entry_points

__all__ = [
    "example_declarations",
    "first_party_declarations",
    "first_party_kind",
    "installed_declarations",
    "io_device_providers",
    "runtime_install",
    "shipped_distributions",
]

_FOLDER = Path(__file__).with_name("manifests")


@functools.cache
def _files(folder: Path) -> tuple[tuple[str, Any], ...]:
    """Each manifest's source name and JSON (this project's own files, checked by its tests)."""
    return tuple(
        (f"{path.stem}/ortplug.json", json.loads(path.read_text(encoding="utf-8")))
        for path in sorted(folder.glob("*.json"))
    )


def _read(folder: Path) -> tuple[PluginDeclaration, ...]:
    found: list[PluginDeclaration] = []
    for source, data in _files(folder):
        found += parse_declarations(data, source).values()
    return tuple(found)


@functools.cache
def first_party_declarations() -> tuple[PluginDeclaration, ...]:
    """The declarations of this project's provider plugins (``plugins/*``), by package name."""
    return _read(_FOLDER)


@functools.cache
def example_declarations() -> tuple[PluginDeclaration, ...]:
    """The declarations of this project's example plugins (``examples/*``): catalog entries."""
    return _read(_FOLDER / "examples")


@functools.cache
def shipped_distributions() -> frozenset[str]:
    """The distributions of this project's provider plugins: their claims come before others'."""
    # read off the JSON, unchecked: every process ranks claims with it, and the checks (which
    # parse each install requirement) are the catalog's to pay
    plugins = [p for _, data in _files(_FOLDER) for p in data["plugins"].values()]
    return frozenset(str(p["distribution"]) for p in plugins if "distribution" in p)


def first_party_kind(name: str) -> tuple[str, KindDeclaration] | None:
    """The distribution and declared kind of this project's whose kind or ONNX Runtime name is
    ``name`` (any case), or ``None``."""
    wanted = name.strip().lower()
    for declaration in first_party_declarations():
        for kind in declaration.kinds:
            if wanted in (kind.kind, kind.ort_name.lower()):
                return declaration.distribution, kind
    return None


def installed_declarations() -> list[PluginDeclaration]:
    """The declarations of the installed plugins, as the entry-point scan read them (checked
    again; one that does not check is left out: the plugin host reports it)."""
    found = []
    for row in _entry_points.discover(PROJECT):
        if row.declaration is not None:
            try:
                found.append(from_json(row.name, row.declaration, source_of(row.value)))
            except DeclarationError:
                continue
    return found


def io_device_providers(device: str) -> frozenset[str]:
    """The ONNX Runtime names of the providers whose outputs can stay in IO-binding device
    ``device`` (``"cuda"``), as this project's and the installed plugins' kinds declare."""
    return _io_devices().get(device, frozenset())


@functools.cache
def _io_devices() -> Mapping[str, frozenset[str]]:
    """Each IO-binding device with the ONNX Runtime names of the providers that declare it.

    Read once per process plugin host (every device ``bind_output`` asks): the installed
    plugins are scanned again after :func:`~ortplug.plugin_host.manager.reset_plugin_host`.
    """
    found: dict[str, set[str]] = {}
    for declaration in (*first_party_declarations(), *installed_declarations()):
        for kind in declaration.kinds:
            if kind.io_device is not None:
                found.setdefault(kind.io_device, set()).add(kind.ort_name)
    return {device: frozenset(names) for device, names in found.items()}


def runtime_install(
    wheels: Iterable[str], declarations: Iterable[PluginDeclaration] | None = None
) -> str:
    """What to install so that one of the clashing runtime ``wheels`` stays, from the manifests.

    The install of the first kind (``declarations``: this project's, not optional) whose
    ``runtime`` is one of ``wheels``, a wheel the every-host kind (``detect: [{}]``, the CPU's)
    does not bring first, that kind itself first among those bringing its wheel; when none
    brings one of them, the every-host kind's install.
    """
    from ..host.requirement import Requirement, normalize_name  # deferred: only a clash

    given = first_party_declarations() if declarations is None else declarations
    installs = [
        (kind.detect is not None and {} in kind.detect, install)
        for declaration in given
        for kind in declaration.kinds
        if not kind.optional
        for install in kind.installs()
        if install.get("runtime")
    ]
    wheel = [Requirement.parse(str(install["runtime"])).name for _, install in installs]
    everywhere = {w for w, (every, _) in zip(wheel, installs) if every}
    wanted = {normalize_name(name) for name in wheels}
    ranked = sorted(
        (w in everywhere, not every, number)
        for number, (w, (every, _)) in enumerate(zip(wheel, installs))
        if w in wanted or (every and not wanted & set(wheel))
    )
    if not ranked:
        raise ValueError(f"no kind of {sorted(wanted)}'s runtimes declares an install")
    return str(installs[ranked[0][2]][1]["install"])
