"""The cache: its root, keys, trusted folders and atomic writes, and the index that prunes it.

``from ortplug.cache import ...`` gives the names of :mod:`ortplug.cache.root`,
imported on first use (PEP 562): importing this folder or any module in it imports nothing else.
"""

from __future__ import annotations

#: ``typing.TYPE_CHECKING`` without importing :mod:`typing` at start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .root import (
        CACHE_ENV,
        MARKER,
        atomic_write,
        cache_dir,
        cache_key,
        cache_problem,
        cache_root,
        check_writable,
        read_cache_file,
        read_marker,
        remove_entries,
        touch,
        trusted_folder,
        write_marker,
    )

__all__ = [
    "CACHE_ENV",
    "MARKER",
    "atomic_write",
    "cache_dir",
    "cache_key",
    "cache_problem",
    "cache_root",
    "check_writable",
    "read_cache_file",
    "read_marker",
    "remove_entries",
    "touch",
    "trusted_folder",
    "write_marker",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(".root", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
