"""What is in ortplug's cache, what each entry belongs to, and which can go (``ortplug cache``).

An entry is a keyed folder a plugin created (a TensorRT engine, a CoreML
model, a shader cache), described by the ``ortplug-entry.json`` it wrote with
:func:`describe`, or one of the core's record files (autotune, probes, the
plugin scan). An entry is stale when it can never be used again: its model
file is gone, or it was written for another ONNX Runtime, boot or installation.
``prune`` removes stale entries, then the least recently used ones while the
cache is larger than ``ORTPLUG_CACHE_MAX_MB``, never one used in the last minutes;
with the variable set, :func:`describe` keeps the cache under it each time a
plugin uses an entry (least recently used first).
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ._runtime import onnxruntime_or_none
from .cache import atomic_write, cache_root, read_cache_file
from .errors import CacheError, OptionError, OrtplugConfigWarning

if TYPE_CHECKING:
    from .checkpoint import ResolvedCheckpoint

__all__ = [
    "ENTRY_FILE",
    "MAX_MB_ENV",
    "CacheEntry",
    "clear",
    "configured_cap",
    "describe",
    "entries",
    "max_mb",
    "parse_size_mb",
    "prune",
]

#: The description a keyed cache folder carries.
ENTRY_FILE = "ortplug-entry.json"
#: Environment variable capping the cache's size in MB (``ortplug cache prune`` keeps under it).
MAX_MB_ENV = "ORTPLUG_CACHE_MAX_MB"
#: An entry used this recently may be in use by a running process: never removed for size.
_IN_USE_S = 600.0
#: The core's own record files: folder -> kind.
_RECORD_FOLDERS = {
    "autotune": "autotune record",
    "probes": "probe facts",
    "entry-points": "plugin scan",
    "verify": "verification verdict",
}


@attrs.frozen
class CacheEntry:
    """One entry: where, what, how big, when last used, for which model and runtime, and if stale."""

    path: Path
    kind: str
    size: int
    last_used: float
    model: str | None = None
    ort_version: str | None = None
    stale: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``ortplug cache list --json``."""
        return {**attrs.asdict(self), "path": str(self.path)}


def describe(
    folder: Path,
    *,
    kind: str,
    checkpoint: ResolvedCheckpoint | None = None,
    ort_version: str | None = None,
) -> None:
    """Say what a keyed cache folder holds; plugins call it each time they use one (marks the use).

    Then, with ``ORTPLUG_CACHE_MAX_MB`` set, older entries go until the cache fits
    (this one was just used, so it stays). Best effort: a cache that cannot be
    written is not an error here, and a bad cap is a warning.
    """
    model_path = getattr(checkpoint, "weights_path", None) if checkpoint is not None else None
    record = {
        "kind": kind,
        "model": checkpoint.label if checkpoint is not None else None,
        "model_path": str(model_path) if model_path is not None else None,
        "ort_version": ort_version,
    }
    try:
        atomic_write(folder / ENTRY_FILE, json.dumps(record))
    except CacheError:
        return
    _keep_under_cap()


def _keep_under_cap() -> None:
    """Remove the least recently used entries while the cache is over ``ORTPLUG_CACHE_MAX_MB``."""
    limit = configured_cap(stacklevel=4)
    if limit is not None:
        for entry in _over_cap(entries(), limit, time.time()):
            _remove(entry.path)


def _usage(path: Path) -> tuple[int, float]:
    """Total bytes, and the latest modification under ``path``: its last use.

    Modification, not access times (mounts without atime, and this listing's own
    reads): what uses an entry writes to it (``describe`` again, :func:`ortplug.cache.touch`).
    """
    if path.is_file():
        info = path.stat()
        return info.st_size, info.st_mtime
    size, last = 0, path.stat().st_mtime
    for folder, _, names in os.walk(path):
        for name in names:
            try:
                info = os.stat(os.path.join(folder, name), follow_symlinks=False)
            except OSError:
                continue
            size += info.st_size
            last = max(last, info.st_mtime)
    return size, last


def _record(path: Path) -> dict[str, Any] | None:
    """A record's fields (``{}`` for JSON that is not an object); ``None`` when unreadable."""
    try:
        value = json.loads(read_cache_file(path, max_bytes=1 << 20))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else {}


def _stale(record: dict[str, Any], installed_ort: str | None) -> str | None:
    model_path = record.get("model_path")
    if isinstance(model_path, str) and not Path(model_path).exists():
        return f"its model {model_path} is gone"
    written_for = record.get("ort_version")
    if isinstance(written_for, str) and installed_ort and written_for != installed_ort:
        return f"written for ONNX Runtime {written_for}, {installed_ort} is installed"
    return None


def _described(root: Path, installed_ort: str | None) -> Iterator[CacheEntry]:
    for marker in root.rglob(ENTRY_FILE):
        folder = marker.parent
        record = _record(marker)
        size, last = _usage(folder)
        if record is None:
            yield CacheEntry(folder, "unknown", size, last, stale="its description is unreadable")
            continue
        yield CacheEntry(
            folder,
            str(record.get("kind") or "unknown"),
            size,
            last,
            record.get("model"),
            record.get("ort_version"),
            _stale(record, installed_ort),
        )


def _records(root: Path, installed_ort: str | None) -> Iterator[CacheEntry]:
    for folder, kind in _RECORD_FOLDERS.items():
        for path in sorted((root / folder).glob("*.json")):
            record = _record(path)
            size, last = _usage(path)
            if record is None:
                yield CacheEntry(path, kind, size, last, stale="unreadable")
                continue
            model = record.get("model_path") or record.get("model")
            stale = _stale(record, installed_ort)
            yield CacheEntry(path, kind, size, last, model, record.get("ort_version"), stale)


def entries(root: Path | None = None) -> list[CacheEntry]:
    """Every entry under the cache root, described folders and the core's records."""
    root = cache_root() if root is None else root
    if not root.is_dir():
        return []
    ort = onnxruntime_or_none()
    installed = getattr(ort, "__version__", None)
    return [*_described(root, installed), *_records(root, installed)]


def max_mb(environ: dict[str, str] | None = None) -> float | None:
    """The cap from ``ORTPLUG_CACHE_MAX_MB`` (``None``: no cap); a bad value names the variable."""
    raw = (os.environ if environ is None else environ).get(MAX_MB_ENV, "").strip()
    if not raw:
        return None
    value = parse_size_mb(raw)
    if value is None:
        raise OptionError(
            f"{MAX_MB_ENV}: expected a size in MB (a finite number >= 0), got {raw!r}"
        )
    return value


def parse_size_mb(text: str) -> float | None:
    """A cache size in MB (``ORTPLUG_CACHE_MAX_MB``, ``--max-mb``): a finite number >= 0, -0
    read as 0; ``None`` for anything else."""
    try:
        value = float(text)
    except ValueError:
        return None
    return abs(value) if 0 <= value < math.inf else None


def configured_cap(*, stacklevel: int = 2) -> float | None:
    """The cap from ``ORTPLUG_CACHE_MAX_MB``; ``None`` when unset, or bad (with a warning)."""
    try:
        return max_mb()
    except OptionError as exc:
        warnings.warn(
            f"{exc}; the cache is not capped", OrtplugConfigWarning, stacklevel=stacklevel
        )
        return None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        import shutil  # deferred: ~3 ms (its archive codecs) that only removal needs

        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def prune(limit_mb: float | None = None, *, now: float | None = None) -> list[CacheEntry]:
    """Remove stale entries, then the least recently used while over ``limit_mb``; the removed.

    An entry used within the last ten minutes is never removed for size (a
    running process may be reading it).
    """
    current = entries()
    removed = [entry for entry in current if entry.stale]
    if limit_mb is not None:
        kept = [entry for entry in current if not entry.stale]
        removed += _over_cap(kept, limit_mb, time.time() if now is None else now)
    for entry in removed:
        _remove(entry.path)
    return removed


def _over_cap(current: list[CacheEntry], limit_mb: float, now: float) -> list[CacheEntry]:
    """The least recently used entries to remove to fit ``limit_mb``, skipping any in use."""
    total = sum(entry.size for entry in current)
    over = []
    for entry in sorted(current, key=lambda entry: entry.last_used):
        if total <= limit_mb * 1024 * 1024:
            break
        if now - entry.last_used < _IN_USE_S:
            continue
        over.append(entry)
        total -= entry.size
    return over


def clear() -> int:
    """Remove everything under the cache root; returns how many entries were listed there."""
    root = cache_root()
    count = len(entries(root))
    if root.is_dir():
        for child in root.iterdir():
            _remove(child)
    return count
