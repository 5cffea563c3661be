"""What is in ortplug's cache, what each entry belongs to, and which can go (``ortplug cache``)."""

from __future__ import annotations

import json
import os
import stat
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from ..errors import CacheError, OptionError, OrtplugConfigWarning
from ..log import user_stacklevel
from ..settings import Settings, parse_size_mb, settings
from .root import (
    CACHE_ENV,
    MARKER,
    atomic_write,
    cache_root,
    read_marker,
    root_problem,
    write_marker,
)
from .store import RECORD_FOLDERS, read_json


class DescribedModel(Protocol):
    """What :func:`describe` reads of a checkpoint: its label and, for a file, its path."""

    @property
    def label(self) -> str: ...


__all__ = [
    "ENTRY_FILE",
    "MAX_MB_ENV",
    "CacheEntry",
    "clear",
    "configured_cap",
    "describe",
    "entries",
    "max_mb",
    "owned",
    "parse_size_mb",
    "prune",
]

#: The description a keyed cache folder carries.
ENTRY_FILE = "ortplug-entry.json"
#: Environment variable capping the cache's size in MB (``ortplug cache prune`` keeps under it).
MAX_MB_ENV = "ORTPLUG_CACHE_MAX_MB"
#: An entry used this recently may be in use by a running process: never removed for size.
_IN_USE_S = 600.0


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
    checkpoint: DescribedModel | None = None,
    ort_version: str | None = None,
) -> None:
    """Say what a keyed cache folder holds; plugins call it each time they use one (marks the use,
    then prunes to ``ORTPLUG_CACHE_MAX_MB``). Best effort: never an error here."""
    model_path = getattr(checkpoint, "weights_path", None) if checkpoint is not None else None
    record = {
        "kind": kind,
        "model": checkpoint.label if checkpoint is not None else None,
        "model_path": str(Path(model_path).resolve()) if model_path is not None else None,
        "ort_version": ort_version,
    }
    try:
        atomic_write(folder / ENTRY_FILE, json.dumps(record), mode=0o600)  # as records are
    except CacheError:
        return
    _keep_under_cap(ort_version)


def _keep_under_cap(runtime: str | None) -> None:
    """Remove the least recently used entries while the cache is over ``ORTPLUG_CACHE_MAX_MB``
    (``runtime``: the ONNX Runtime version in use); nothing from a root :func:`prune` would
    refuse."""
    limit = configured_cap()
    if limit is None:
        return
    root = cache_root()
    try:
        ours = _claimed(root)
    except OSError:  # CacheError included: the root is not ortplug's alone
        return
    for entry in _over_cap(_listing(root, ours, runtime), limit, time.time()):
        _remove(entry.path)


def _usage(path: Path) -> tuple[int, float]:
    """Total bytes, and the latest modification under ``path`` (its last use: what uses an entry
    writes to it; access times lie), never through a symbolic link."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        return info.st_size, info.st_mtime
    size, last = 0, info.st_mtime
    for folder, _, names in os.walk(path):  # links to folders are not followed
        for name in names:
            try:
                info = os.stat(os.path.join(folder, name), follow_symlinks=False)
            except OSError:
                continue
            size += info.st_size
            last = max(last, info.st_mtime)
    return size, last


def _record(path: Path) -> dict[str, Any] | None:
    """A record's fields (``{}`` for JSON that is not an object); ``None`` when unreadable or
    untrusted (the one check reading applies: a link, or a file another user could write)."""
    try:
        value = read_json(path)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else {}


def _stale(record: dict[str, Any], installed_ort: str | None) -> str | None:
    model_path = record.get("model_path")
    # A relative path (written by an earlier ortplug) says nothing without the folder it was
    # relative to: never stale because of the current directory.
    if isinstance(model_path, str) and os.path.isabs(model_path) and not os.path.exists(model_path):
        return f"its model {model_path} is gone"
    written_for = record.get("ort_version")
    if isinstance(written_for, str) and installed_ort and written_for != installed_ort:
        return f"written for ONNX Runtime {written_for}, {installed_ort} is installed"
    return None


def _walk(top: Path) -> Iterator[tuple[Path, list[str]]]:
    """Each real folder under ``top`` with its file names, never through a symbolic link."""
    for folder, _, names in os.walk(top):  # followlinks=False: links are not entered
        yield Path(folder), names


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _real_folder(path: Path) -> bool:
    """Whether ``path`` is a directory itself, not a symbolic link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _entry(folder: Path, installed_ort: str | None) -> CacheEntry:
    """The entry a folder described by its ``ortplug-entry.json`` is."""
    record = _record(folder / ENTRY_FILE)
    size, last = _usage(folder)
    if record is None:
        return CacheEntry(folder, "unknown", size, last, stale="its description is unreadable")
    return CacheEntry(
        folder,
        str(record.get("kind") or "unknown"),
        size,
        last,
        record.get("model"),
        record.get("ort_version"),
        _stale(record, installed_ort),
    )


def _described(root: Path, owned: list[str], installed_ort: str | None) -> Iterator[CacheEntry]:
    for name in owned:
        if name in RECORD_FOLDERS or not _real_folder(root / name):
            continue
        for folder, names in _walk(root / name):
            if ENTRY_FILE in names and _regular(folder / ENTRY_FILE):
                yield _entry(folder, installed_ort)


def _record_files(folder: Path) -> list[Path]:
    """The ``*.json`` regular files of a record folder (not through a link, none that is one)."""
    if not _real_folder(folder):
        return []
    return sorted(path for path in folder.glob("*.json") if _regular(path))


def _records(root: Path, owned: list[str], installed_ort: str | None) -> Iterator[CacheEntry]:
    for folder, kind in RECORD_FOLDERS.items():
        if folder not in owned:
            continue
        for path in _record_files(root / folder):
            record = _record(path)
            size, last = _usage(path)
            if record is None:
                yield CacheEntry(path, kind, size, last, stale="unreadable")
                continue
            model = record.get("model_path") or record.get("model")
            stale = _stale(record, installed_ort)
            yield CacheEntry(path, kind, size, last, model, record.get("ort_version"), stale)


def owned(root: Path) -> tuple[list[str], list[str]]:
    """The folders of the cache root that are ortplug's (its marker lists them: a folder's
    name or contents prove nothing), and the names of everything else there (left alone)."""
    listed = set(read_marker(root) or ())
    ours, others = [], []
    for path in sorted(root.iterdir()):
        name = path.name
        if name == MARKER or (name.startswith(f".{MARKER}.") and name.endswith(".tmp")):
            continue
        if name in listed and _real_folder(path):
            ours.append(name)
        else:
            others.append(name)
    return ours, others


def entries(root: Path | None = None, *, runtime: str | None = None) -> list[CacheEntry]:
    """Every entry in ortplug's folders of the cache root (never through a link below it);
    those of another ONNX Runtime than ``runtime`` (the version in use) are stale."""
    root = cache_root() if root is None else root
    if not root.is_dir():
        return []
    return _listing(root, owned(root)[0], runtime)


def _listing(root: Path, ours: list[str], runtime: str | None) -> list[CacheEntry]:
    """The entries in the folders ``ours`` of ``root`` (stale: of another ``runtime``)."""
    return [*_described(root, ours, runtime), *_records(root, ours, runtime)]


def max_mb(environ: Mapping[str, str] | None = None) -> float | None:
    """The cap from ``ORTPLUG_CACHE_MAX_MB`` (``None``: no cap); a bad value names the variable."""
    found = settings() if environ is None else Settings.from_environ(environ, strict=False)
    problem = found.problem(MAX_MB_ENV)
    if problem is not None:
        raise OptionError(problem)
    return found.cache_max_mb


def configured_cap() -> float | None:
    """The cap from ``ORTPLUG_CACHE_MAX_MB``; ``None`` when unset, or bad (with a warning)."""
    try:
        return max_mb()
    except OptionError as exc:
        warnings.warn(
            f"{exc}; the cache is not capped", OrtplugConfigWarning, stacklevel=user_stacklevel()
        )
        return None


def _remove(path: Path) -> None:
    """Remove a file or a folder; a symbolic link is removed itself, never what it points to."""
    if _real_folder(path):
        import shutil  # deferred: ~3 ms (its archive codecs) that only removal needs

        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def prune(
    limit_mb: float | None = None, *, runtime: str | None = None, now: float | None = None
) -> list[CacheEntry]:
    """Remove stale entries (of another ONNX Runtime than ``runtime``), then the least recently
    used while over ``limit_mb``, never one used in the last ten minutes; the removed."""
    root = cache_root()
    if not root.is_dir():
        return []
    current = _listing(root, _claimed(root), runtime)
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


def _claimed(root: Path) -> list[str]:
    """ortplug's folders of the existing cache root ``root``, before anything is removed; a
    :class:`~ortplug.errors.CacheError` when it has no marker or another user could write it."""
    problem = root_problem(root)
    if problem is not None:
        raise CacheError(f"nothing was removed from {root}: {problem}")
    if read_marker(root) is None:
        raise CacheError(
            f"{root} is not marked as ortplug's cache (no {MARKER}); nothing was removed: "
            f"point {CACHE_ENV} at ortplug's own folder, or if all it holds is ortplug's, "
            "delete it yourself (ortplug makes a marked one on its next use)"
        )
    return owned(root)[0]


def clear() -> int:
    """Remove the folders the cache root's marker lists; how many entries were there. A root
    without the marker, or one another user could write: :class:`~ortplug.errors.CacheError`."""
    root = cache_root()
    if not root.is_dir():
        return 0
    ours = _claimed(root)
    count = len(_listing(root, ours, None))
    for name in ours:
        _remove(root / name)
    write_marker(root, [])
    return count
