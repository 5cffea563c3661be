"""``ortplug cache``: list, prune or clear what ortplug keeps in its cache folder."""

from __future__ import annotations

import argparse
import time

from ..cache.index import CacheEntry, clear, configured_cap, entries, prune
from ..cache.root import cache_root
from ..host.runtime import onnxruntime_or_none
from ._json import print_json

__all__ = ["cache"]


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    for unit, factor in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= factor:
            return f"{count / factor:.1f} {unit}"
    return f"{count} B"


def _age(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f} {unit} ago"
    return "just now"


def _rows(listed: list[CacheEntry]) -> list[str]:
    now = time.time()
    lines = []
    for entry in sorted(listed, key=lambda e: e.last_used, reverse=True):
        state = f"STALE ({entry.stale})" if entry.stale else "ok"
        owner = f"  model {entry.model}" if entry.model else ""
        runtime = f"  ORT {entry.ort_version}" if entry.ort_version else ""
        lines.append(
            f"{entry.kind:<26} {_size(entry.size):>9}  {_age(now - entry.last_used):<11} "
            f"{state}{owner}{runtime}\n  {entry.path}"
        )
    return lines


def _runtime() -> str | None:
    """The ONNX Runtime version in use: entries written for another are stale."""
    return getattr(onnxruntime_or_none(), "__version__", None)


def _entries(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def cache(args: argparse.Namespace) -> int:
    """List the entries (default), prune stale and over-cap ones, or clear everything."""
    root = cache_root()
    if args.action == "clear":
        count = clear()
        if args.json:
            print_json({"cleared": count})
        else:
            print(f"cleared {_entries(count)} from {root}")
        return 0
    if args.action == "prune":
        limit = args.max_mb if args.max_mb is not None else configured_cap()
        removed = prune(limit, runtime=_runtime())
        if args.json:
            print_json({"removed": [e.to_dict() for e in removed], "max_mb": limit})
            return 0
        print(
            f"removed {_entries(len(removed))} ({_size(sum(e.size for e in removed))}) from {root}"
        )
        for line in _rows(removed):
            print(line)
        left = sum(entry.size for entry in entries(runtime=_runtime()))
        if limit is not None and left > limit * 1024 * 1024:
            print(
                f"still {_size(left)}, over {limit:g} MB: what is left was used in the last "
                "ten minutes, and a running process may be reading it"
            )
        return 0
    listed = entries(runtime=_runtime())
    cap = configured_cap()
    if args.json:
        rows = [e.to_dict() for e in listed]
        print_json({"root": str(root), "max_mb": cap, "entries": rows})
        return 0
    total = sum(entry.size for entry in listed)
    stale = sum(1 for entry in listed if entry.stale)
    capped = f", capped at {cap:g} MB" if cap is not None else ""
    print(f"{root}: {_entries(len(listed))}, {_size(total)}, {stale} stale{capped}")
    for line in _rows(listed):
        print(line)
    return 0
