"""SHA-256 of model files (or of the byte ranges ONNX Runtime reads), kept per settled file version
in a process and, for big ones, across (why settled: docs/internals.md)."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

from ..cache.root import cache_key
from ..cache.store import RecordStore

__all__ = [
    "FOLDER",
    "REMEMBERED_BYTES",
    "Spans",
    "file_fingerprint",
    "file_version",
    "settled_version",
]

#: Where digests are kept under the cache root.
FOLDER = "fingerprints"
#: Files at least this big have their digest kept across processes: reading a record back costs
#: about 0.25 ms, hashing about 1 ms a MB (a 3 MB model: 3.5-4.8 ms); below, a record saves little.
REMEMBERED_BYTES = 1 << 20
#: A file changed this recently may change again unseen within its timestamps' granularity.
_SETTLED_S = 2.0
_SCHEMA = 1
#: A missing or broken digest only costs a hash: logged, not warned about.
_STORE = RecordStore(FOLDER, _SCHEMA, "fingerprint record", warn=False, constants=False)

#: A file's version: real path, device, inode, size, modification and change times (ns).
_Version = tuple[str, int, int, int, int, int]
#: Byte ranges of a file, ``(offset, size)`` each.
Spans = tuple[tuple[int, int], ...]

_known: dict[tuple[_Version, Spans | None], str] = {}
_lock = threading.Lock()


def file_version(path: Path) -> _Version:
    """The file's version now: real path, device, inode, size, modification and change times."""
    info = os.stat(path)
    return (
        os.path.realpath(path),
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


def _hash(path: Path, spans: Spans | None = None) -> str:
    """SHA-256 of the whole file, or of each span's place and bytes in turn."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        if spans is None:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        for offset, size in spans or ():
            digest.update(f"{offset}+{size}:".encode())
            handle.seek(offset)
            left = size
            while left > 0 and (block := handle.read(min(left, 1 << 20))):
                digest.update(block)
                left -= len(block)
    return digest.hexdigest()


def _merged(spans: Spans) -> Spans:
    """The bytes ``spans`` cover, as sorted ranges that neither overlap nor touch (each byte
    is hashed once, however many tensors share it)."""
    merged: list[tuple[int, int]] = []
    for offset, size in sorted(s for s in spans if s[1] > 0):
        if merged and offset <= merged[-1][0] + merged[-1][1]:
            start, length = merged[-1]
            merged[-1] = (start, max(length, offset + size - start))
        else:
            merged.append((offset, size))
    return tuple(merged)


def _is_digest(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def _recalled(key: str, version: _Version, spans: str | None) -> str | None:
    """The digest kept for ``version``, or ``None`` (absent, unreadable, not this version's)."""
    return _STORE.load(key, lambda record: _digest(record, version, spans))


def _digest(record: dict[str, object], version: _Version, spans: str | None) -> str:
    """The record's digest, or ``ValueError`` when it is not one digest of this version."""
    digest = record.get("sha256")
    if record.get("version") != list(version) or record.get("spans") != spans:
        raise ValueError("it is the digest of another file version or other byte ranges")
    if not isinstance(digest, str) or not _is_digest(digest):
        raise ValueError("sha256 is not a hex SHA-256 digest")
    return digest


def settled_version(path: Path) -> _Version | None:
    """The file's version when it has not changed for ``_SETTLED_S`` seconds, else ``None``
    (what is derived from a file written just now is not kept: it may change unseen)."""
    version = file_version(path)
    return version if max(version[4], version[5]) / 1e9 <= time.time() - _SETTLED_S else None


def _keep(key: str, version: _Version, spans: str | None, digest: str) -> None:
    """Keep ``digest`` in the cache; best effort (a read-only cache costs the next process a hash)."""
    record = {"model_path": version[0], "version": list(version), "spans": spans, "sha256": digest}
    _STORE.keep(key, record)


def file_fingerprint(path: Path, spans: Spans | None = None) -> str:
    """The SHA-256 hex digest of the file at ``path``, or of the bytes ``spans`` of it (a span
    past the file's end counts as far as the file goes), hashed once per settled version."""
    spans = None if spans is None else _merged(spans)
    version = settled_version(path)
    if version is None:
        return _hash(path, spans)
    with _lock:
        known = _known.get((version, spans))
    if known is not None:
        return known
    hashed = version[3] if spans is None else sum(size for _, size in spans)
    remembered = hashed >= REMEMBERED_BYTES
    ranges = None if spans is None else cache_key(spans)
    key = cache_key(_SCHEMA, *version, ranges) if remembered else ""
    digest = _recalled(key, version, ranges) if remembered else None
    if digest is None:
        digest = _hash(path, spans)
        if file_version(path) != version:  # changed while it was read
            return digest
        if remembered:
            _keep(key, version, ranges, digest)
    with _lock:
        _known[(version, spans)] = digest
    return digest
