"""``ortplug --help``: the page rendered last (argparse, attrs and every add-on's command: ~45 ms),
kept while its key holds: the installation (as the plugin scan's), the ``.py`` files of the command
line and of each package adding a command (an edited editable install), and the locale.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterable

from ..cache.root import cache_key, read_trusted, touch, trusted_folder
from ..plugin_host.entry_points_txt import COMMANDS_GROUP, declared, installation_state

__all__ = ["help_page"]

_FOLDER, _SCHEMA = "help", 1
_LOCALE = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


def _files(folder: str) -> list[list[object]] | None:
    """Each ``.py`` file of ``folder`` with its state (``None``: the folder cannot be read)."""
    try:
        with os.scandir(folder) as entries:
            found = [(e.name, e.stat()) for e in entries if e.name.endswith(".py")]
    except OSError:
        return None
    return sorted([name, info.st_mtime_ns, info.st_size] for name, info in found)


def _sources(values: Iterable[str]) -> list[list[object]]:
    """The folders whose code renders the page: the core's command line, each command's package."""
    folders = {os.path.dirname(os.path.abspath(__file__))}
    for value in values:
        try:
            spec = importlib.util.find_spec(value.partition(":")[0].split(".")[0].strip())
        except (ImportError, ValueError):
            spec = None
        folders.update((spec.submodule_search_locations or []) if spec is not None else [])
    return [[folder, _files(folder)] for folder in sorted(folders)]


def _remembered(key: str) -> str | None:
    """The page kept under ``key``, or ``None`` (absent, untrusted, not a page of this schema)."""
    folder = trusted_folder(_FOLDER)
    if folder is None:
        return None
    path = folder / f"{key}.json"
    try:
        record = json.loads(read_trusted(path))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or set(record) != {"schema", "page"}:
        return None
    page = record["page"]
    if record["schema"] != _SCHEMA or not isinstance(page, str):
        return None
    touch(path)  # used now: least-recently-used pruning keeps it
    return page


def help_page() -> str:
    """The top-level help page, as ``build_parser().format_help()`` renders it."""
    sources = _sources(value for _, value in declared(COMMANDS_GROUP))
    locale = [os.environ.get(name) for name in _LOCALE]
    key = cache_key(_SCHEMA, sys.version, installation_state(), sources, locale)
    page = _remembered(key)
    if page is None:
        from ..cache.store import RecordStore
        from ._parser import build_parser

        page = build_parser().format_help()
        RecordStore(_FOLDER, _SCHEMA, "help page", warn=False).keep(key, {"page": page})
    return page
