"""The ``ortplug`` entry points of the installed distributions, remembered between processes and
keyed by what can change them (docs/internals.md, "The plugin host")."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ..cache.root import cache_key, read_cache_file
from ..cache.store import RecordStore
from .entry_points_txt import DISTRIBUTION_SUFFIXES, installation_state, load, section

__all__ = ["FOLDER", "PluginEntryPoint", "clear", "discover"]

#: Where the remembered scans live under the cache root.
FOLDER = "entry-points"
# 2: each row names the entry_points.txt that declares it; 3: and the declaration; 4: and the
# state of the declaration's file (an edited ortplug.json changes no sys.path folder); 5: the
# rows are kept in a record of the one store (``{"schema": 5, "rows": [...]}``)
_SCHEMA = 5
#: A remembered scan that does not check only costs a scan: logged, not warned about.
_STORE = RecordStore(FOLDER, _SCHEMA, "plugin scan", warn=False, constants=False)


@attrs.frozen
class PluginEntryPoint:
    """One entry point of the group: its name, ``module:attr`` value, distribution and declaration.

    ``declaration``: the plugin's declaration as JSON (``None``: its package ships none; the
    plugin host checks it again with :func:`~ortplug.plugins.declaration.from_json`, as it
    may come from a remembered row); ``declaration_error``: why the one it ships does not check.
    """

    name: str
    value: str
    distribution: str | None
    version: str | None
    declaration: dict[str, object] | None = None
    declaration_error: str | None = None

    def load(self) -> object:
        """Import the module and resolve the attribute path, like ``EntryPoint.load``."""
        return load(self.value)


def _declaration(dist: object) -> str | None:
    """The ``entry_points.txt`` a distribution found on disk declares its entry points in."""
    folder: Any = getattr(dist, "_path", None)  # PathDistribution's folder; other finders have none
    try:
        return os.path.join(os.path.realpath(os.fspath(folder)), "entry_points.txt")
    except TypeError:  # none, or inside a zip file: not a file it can be checked against
        return None


def _file_state(path: str) -> list[int] | None:
    """What changes when a file is written or removed (``None``: it is not there)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _plugin_declaration(
    name: str, value: str, path: Path | None
) -> tuple[dict[str, object] | None, str | None]:
    """The entry point's declaration as JSON, or why it does not check (read, never imported)."""
    from ..plugins.declaration import DeclarationError, read_declaration  # a scan only (~4 ms)

    try:
        declared = read_declaration(name, value, path)
    except DeclarationError as exc:
        return None, str(exc)
    return (declared.to_json() if declared is not None else None), None


def _scan(group: str) -> list[tuple[PluginEntryPoint, str | None, list[object] | None]]:
    """Every entry point of the group, with the file that declares it (``None``: none on disk)
    and its package's declaration file (or where it would be) with that file's state."""
    from importlib.metadata import entry_points  # only on a cache miss: ~15 ms (see the module)

    from ..plugins.declaration import declaration_path

    found = []
    for entry_point in entry_points(group=group):
        dist = entry_point.dist
        path = declaration_path(entry_point.value)
        state: list[object] | None = None  # before reading: an edit since is seen
        if path is not None:
            state = [str(path), _file_state(str(path))]
        point = PluginEntryPoint(
            entry_point.name,
            entry_point.value,
            dist.metadata["Name"] if dist is not None else None,
            dist.version if dist is not None else None,
            *_plugin_declaration(entry_point.name, entry_point.value, path),
        )
        found.append((point, _declaration(dist), state))
    return found


def _declared(path: str, group: str, installed: set[str]) -> dict[str, str] | None:
    """The ``group`` section of an installed distribution's ``entry_points.txt``, or ``None``
    when the file is not one (outside the distribution folders of ``installed``, the
    ``sys.path`` folders; unreadable)."""
    folder = os.path.dirname(path)
    if (
        os.path.basename(path) != "entry_points.txt"
        or not folder.endswith(DISTRIBUTION_SUFFIXES)
        or os.path.dirname(folder) not in installed
    ):
        return None
    try:
        text = read_cache_file(path, max_bytes=1 << 20).decode("utf-8", errors="replace")
    except OSError:
        return None
    return section(text, group)


def _text(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 1000


def _unchanged(state: object) -> bool:
    """Whether a row's declaration file (or its absence) is as it was when the row was written."""
    if state is None:
        return True
    if not isinstance(state, list) or len(state) != 2 or not _text(state[0]):
        return False
    return bool(_file_state(state[0]) == state[1])


def _read(record: dict[str, object], group: str) -> list[PluginEntryPoint]:
    """The remembered rows, each confirmed by the files it names; ``ValueError``: scan again."""
    rows = record.get("rows")
    if not isinstance(rows, list) or set(record) != {"schema", "rows"}:
        raise ValueError("not a plugin scan")
    found, declarations = [], {}
    installed = {os.path.realpath(entry) for entry in sys.path if os.path.isabs(entry)}
    for row in rows:
        if not isinstance(row, list) or len(row) != 8:
            raise ValueError("a row is not a remembered entry point")
        name, value, distribution, version, plugin_declaration, error, declaration, state = row
        if not all(map(_text, (name, value, declaration))) or not all(
            item is None or _text(item) for item in (distribution, version, error)
        ):
            raise ValueError(f"the row of {str(name)[:60]!r} is not text where text belongs")
        if plugin_declaration is not None and not isinstance(plugin_declaration, dict):
            raise ValueError(f"the declaration of {name!r} is not an object")
        if declaration not in declarations:
            declarations[declaration] = _declared(declaration, group, installed)
        declared = declarations[declaration]
        if declared is None or declared.get(name) != value:
            raise ValueError(f"entry point {name}={value} not declared by {declaration}: scanning")
        if not _unchanged(state):
            raise ValueError(f"the declaration of entry point {name} changed: scanning")
        found.append(
            PluginEntryPoint(name, value, distribution, version, plugin_declaration, error)
        )
    return found


def discover(group: str, *, remember: bool = True) -> Sequence[PluginEntryPoint]:
    """The group's entry points, from the remembered scan when the installation is unchanged.

    A remembered entry point is used only when its distribution's ``entry_points.txt``
    still declares it: a row alone never makes ortplug import a module.
    """
    if not remember:
        return [point for point, _, _ in _scan(group)]
    key = cache_key(_SCHEMA, group, sys.version, installation_state())
    remembered = _STORE.load(key, lambda record: _read(record, group))
    if remembered is not None:
        return remembered
    found = _scan(group)
    if any(declaration is None for _, declaration, _ in found):
        return [point for point, _, _ in found]  # one that cannot be confirmed: never remembered
    rows = [[*attrs.astuple(point), file, state] for point, file, state in found]
    _STORE.keep(key, {"rows": rows})
    return [point for point, _, _ in found]


def clear() -> int:
    """Forget every entry; returns how many there were."""
    return _STORE.clear()
