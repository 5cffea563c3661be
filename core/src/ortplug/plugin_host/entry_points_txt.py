"""The entry points the distributions on ``sys.path`` declare, read from their ``entry_points.txt``,
and the key of what installing a distribution changes.

What a start that cannot wait for :mod:`importlib.metadata` (~15 ms) nor attrs reads: ``ortplug
exec``'s program waits on it, ``ortplug --help`` picks its shipped page with it.
"""

from __future__ import annotations

import importlib
import os
import sys

__all__ = [
    "COMMANDS_GROUP",
    "DISTRIBUTION_SUFFIXES",
    "HINTS_GROUP",
    "QUICK_GROUP",
    "declared",
    "installation_state",
    "load",
    "section",
]

#: Performance hint -> ``module:function`` starting it on a built backend.
HINTS_GROUP = "ortplug.hints"
#: Command name -> ``module:COMMAND`` (an :class:`ortplug.cli.command.Command`).
COMMANDS_GROUP = "ortplug.commands"
#: Command name -> ``module:function`` running it from its raw arguments before any parsing
#: (``None`` from it: parse as usual), for a command whose start a program waits on.
QUICK_GROUP = "ortplug.quick"

#: The folders of an installed distribution's metadata.
DISTRIBUTION_SUFFIXES = (".dist-info", ".egg-info")


def _launch_folders() -> set[str]:
    """The folders this launch put on ``sys.path``: the script's (``python app.py``) and the
    working directory (``python -m``)."""
    try:
        folders = {os.path.realpath(os.getcwd())}
    except OSError:  # the working directory was removed
        folders = set()
    script = sys.argv[0] if sys.argv else ""
    if script not in ("", "-c") and os.path.isfile(script):
        folders.add(os.path.dirname(os.path.realpath(script)))  # as Python puts it on sys.path
    return folders


def _state(folder: str, launch: set[str]) -> object:
    """What changes when a distribution is installed into ``folder`` (``None``: it is missing)."""
    try:
        if os.path.realpath(folder) in launch:
            names = os.listdir(folder)
            return sorted(name for name in names if name.endswith(DISTRIBUTION_SUFFIXES))
        return os.stat(folder).st_mtime_ns
    except OSError:
        return None


def installation_state() -> list[list[object]]:
    """What installing a distribution changes: ``sys.path``'s absolute folders, each with its
    state (relative entries, such as the working directory of ``python -c``, do not count:
    plugins are installed, not dropped there)."""
    launch = _launch_folders()
    return [[entry, _state(entry, launch)] for entry in sys.path if os.path.isabs(entry)]


def section(text: str, group: str) -> dict[str, str]:
    """The ``group`` section of an ``entry_points.txt`` text: each name's ``module:attr``."""
    current, points = None, {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
        elif current == group and "=" in line and not line.startswith(("#", ";")):
            name, _, value = line.partition("=")
            points[name.strip()] = value.strip()
    return points


def declared(group: str) -> list[tuple[str, str]]:
    """Each ``(name, module:attr)`` of ``group`` in the distributions of the absolute
    ``sys.path`` folders (unreadable folders and files are passed over)."""
    named = group.encode()
    points: list[tuple[str, str]] = []
    for folder in filter(os.path.isabs, sys.path):
        try:
            entries = [e for e in os.listdir(folder) if e.endswith(DISTRIBUTION_SUFFIXES)]
        except OSError:
            continue
        for entry in entries:
            try:
                # unbuffered bytes, the group's name looked for first: half the cost of text
                with open(os.path.join(folder, entry, "entry_points.txt"), "rb", 0) as f:
                    data = f.read(1 << 20)  # at most 1 MB, as any file ortplug reads
                if named in data:
                    points.extend(section(data.decode("utf-8"), group).items())
            except (OSError, UnicodeDecodeError):
                continue
    return points


def load(value: str) -> object:
    """What a ``module:attr.path`` value names, its module imported now (as ``EntryPoint.load``)."""
    module_name, _, attributes = value.partition(":")
    target: object = importlib.import_module(module_name.strip())
    for attribute in filter(None, attributes.strip().split(".")):
        target = getattr(target, attribute)
    return target
