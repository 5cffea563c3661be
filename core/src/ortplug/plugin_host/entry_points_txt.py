"""The entry points the distributions on ``sys.path`` declare, read from their ``entry_points.txt``.

What a start that cannot wait for :mod:`importlib.metadata` (~15 ms) nor the cache root (attrs,
platformdirs) reads: ``ortplug exec``'s program waits on it. Imports nothing but :mod:`os` and :mod:`importlib`.
"""

from __future__ import annotations

import importlib
import os
import sys

__all__ = ["DISTRIBUTION_SUFFIXES", "QUICK_GROUP", "declared", "load", "section"]

#: Command name -> ``module:function`` running it from its raw arguments before any parsing
#: (``None`` from it: parse as usual), for a command whose start a program waits on.
QUICK_GROUP = "ortplug.quick"

#: The folders of an installed distribution's metadata.
DISTRIBUTION_SUFFIXES = (".dist-info", ".egg-info")


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


def declared(group: str, name: str) -> list[str]:
    """The value of entry point ``name`` of ``group`` in every distribution of the absolute
    ``sys.path`` folders that declares it (unreadable folders and files are passed over)."""
    values = []
    for folder in filter(os.path.isabs, sys.path):
        try:
            entries = [e for e in os.listdir(folder) if e.endswith(DISTRIBUTION_SUFFIXES)]
        except OSError:
            continue
        for entry in entries:
            try:
                with open(os.path.join(folder, entry, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read(1 << 20)
            except (OSError, UnicodeDecodeError):
                continue
            value = section(text, group).get(name)
            if value is not None:
                values.append(value)
    return values


def load(value: str) -> object:
    """What a ``module:attr.path`` value names, its module imported now (as ``EntryPoint.load``)."""
    module_name, _, attributes = value.partition(":")
    target: object = importlib.import_module(module_name.strip())
    for attribute in filter(None, attributes.strip().split(".")):
        target = getattr(target, attribute)
    return target
