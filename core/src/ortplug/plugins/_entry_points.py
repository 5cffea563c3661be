"""The ``ortplug`` entry points of the installed distributions, remembered between processes.

Scanning every distribution's metadata (and importing :mod:`importlib.metadata`)
costs tens of milliseconds at each start. The answer is kept under the cache
root, keyed by ``sys.path`` and the modification time of each of its folders:
installing, upgrading or removing a distribution rewrites its ``*.dist-info``
folder in one of them, so the key changes and the scan runs again. The folders
Python adds for a launch (the script's, the working one) see files come and go
all the time, so for them the names of the distributions they hold count instead.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence

import attrs

from ..cache import atomic_write, cache_dir, cache_key, cache_root, read_cache_file, remove_entries
from ..errors import CacheError
from .declaration import DeclarationError, read_declaration

__all__ = ["FOLDER", "PluginEntryPoint", "clear", "discover"]

#: Where the remembered scans live under the cache root.
FOLDER = "entry-points"
_SCHEMA = 2
_log = logging.getLogger("ortplug")


@attrs.frozen
class PluginEntryPoint:
    """One entry point of the group: its name, ``module:attr`` value, distribution and declaration.

    ``declaration``: the plugin's checked declaration as JSON (``None``: its package ships
    none); ``declaration_error``: why the one it ships does not check.
    """

    name: str
    value: str
    distribution: str | None
    version: str | None
    declaration: dict[str, object] | None = None
    declaration_error: str | None = None

    def load(self) -> object:
        """Import the module and resolve the attribute path, like ``EntryPoint.load``."""
        module_name, _, attributes = self.value.partition(":")
        target: object = importlib.import_module(module_name.strip())
        for attribute in filter(None, attributes.strip().split(".")):
            target = getattr(target, attribute)
        return target


_DISTRIBUTION_SUFFIXES = (".dist-info", ".egg-info")


def _launch_folders() -> set[str]:
    """The folders this launch put on ``sys.path``: the script's (``python app.py``) and the
    working directory (``python -m``)."""
    folders = set()
    with contextlib.suppress(OSError):
        folders.add(os.path.realpath(os.getcwd()))
    script = sys.argv[0] if sys.argv else ""
    if script not in ("", "-c") and os.path.isfile(script):
        folders.add(os.path.dirname(os.path.realpath(script)))  # as Python puts it on sys.path
    return folders


def _state(folder: str, launch: set[str]) -> object:
    """What changes when a distribution is installed into ``folder`` (``None``: it is missing)."""
    try:
        if os.path.realpath(folder) in launch:
            names = os.listdir(folder)
            return sorted(name for name in names if name.endswith(_DISTRIBUTION_SUFFIXES))
        return os.stat(folder).st_mtime_ns
    except OSError:
        return None


def _key(group: str) -> str:
    """``sys.path``'s absolute folders, each with its state (relative entries, such as the
    working directory of ``python -c``, do not count: plugins are installed, not dropped there)."""
    launch = _launch_folders()
    folders = [[entry, _state(entry, launch)] for entry in sys.path if os.path.isabs(entry)]
    return cache_key(_SCHEMA, group, sys.version, folders)


def _scan(group: str) -> list[PluginEntryPoint]:
    from importlib.metadata import entry_points  # the slow path, only on a cache miss

    found = []
    for entry_point in entry_points(group=group):
        dist = entry_point.dist
        declaration, error = _declaration(entry_point.name, entry_point.value)
        found.append(
            PluginEntryPoint(
                entry_point.name,
                entry_point.value,
                dist.metadata["Name"] if dist is not None else None,
                dist.version if dist is not None else None,
                declaration,
                error,
            )
        )
    return found


def _declaration(name: str, value: str) -> tuple[dict[str, object] | None, str | None]:
    """The entry point's declaration as JSON, or why it does not check (read, never imported)."""
    try:
        declared = read_declaration(name, value)
    except DeclarationError as exc:
        return None, str(exc)
    return (declared.to_json() if declared is not None else None), None


def _read(path: os.PathLike[str]) -> list[PluginEntryPoint] | None:
    try:
        rows = json.loads(read_cache_file(path))
        if not isinstance(rows, list):
            return None
        return [PluginEntryPoint(*row) for row in rows if isinstance(row, list) and len(row) == 6]
    except (OSError, ValueError, TypeError, RecursionError):
        return None


def discover(group: str, *, remember: bool = True) -> Sequence[PluginEntryPoint]:
    """The group's entry points, from the remembered scan when the installation is unchanged."""
    if not remember:
        return _scan(group)
    path = cache_root() / FOLDER / f"{_key(group)}.json"
    remembered = _read(path)
    if remembered is not None:
        return remembered
    found = _scan(group)
    try:
        rows = [attrs.astuple(entry) for entry in found]
        atomic_write(cache_dir(FOLDER) / path.name, json.dumps(rows))
    except (CacheError, TypeError, ValueError) as exc:
        _log.debug("entry points not remembered: %s", exc)
    return found


def clear() -> int:
    """Forget every entry; returns how many there were."""
    return remove_entries(FOLDER)
