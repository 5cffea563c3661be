"""SHA-256 of model files, kept per settled file version in a process and, for big ones, across.

Hashing a 1 GB model takes about a second, on every process's first build (the
fingerprint keys verdicts, records and the build lock). A file's version is its
path, device, inode, size and modification and change times: any write changes
the change time, which no user can set back, unless it lands within the
timestamps' granularity of the previous one (coarse clocks, 1-2 s filesystems).
So a digest is kept only for a settled version, unchanged for ``_SETTLED_S``
seconds before hashing began (as git treats "racily clean" files), that did not
change while it was hashed; a file written just now is hashed at every call. A
big file's digest is also kept in the cache (``fingerprints/``), read back only
from a folder no other user can write and only when it is one digest of this
version; anything else is hashed again.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from ..cache.root import atomic_write, cache_key, read_cache_file, touch, trusted_folder
from ..errors import CacheError

__all__ = ["FOLDER", "REMEMBERED_BYTES", "file_fingerprint", "file_version", "settled_version"]

#: Where digests are kept under the cache root.
FOLDER = "fingerprints"
#: Files at least this big have their digest kept across processes (smaller ones hash
#: faster than a record is read).
REMEMBERED_BYTES = 8 << 20
#: A file changed this recently may change again unseen within its timestamps' granularity.
_SETTLED_S = 2.0
_SCHEMA = 1

#: A file's version: real path, device, inode, size, modification and change times (ns).
_Version = tuple[str, int, int, int, int, int]

_known: dict[_Version, str] = {}
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


def _hash(path: Path) -> str:
    import hashlib  # deferred: ~3 ms of OpenSSL start-up

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _is_digest(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def _recalled(name: str, version: _Version) -> str | None:
    """The digest kept for ``version``, or ``None`` (absent, unreadable, not this version's)."""
    folder = trusted_folder(FOLDER)
    if folder is None:
        return None
    try:
        record = json.loads(read_cache_file(folder / name))
    except (OSError, ValueError, RecursionError):
        return None
    if (
        not isinstance(record, dict)
        or record.get("schema") != _SCHEMA
        or record.get("version") != list(version)
        or not _is_digest(record.get("sha256"))
    ):
        return None
    touch(folder / name)
    digest: str = record["sha256"]
    return digest


def settled_version(path: Path) -> _Version | None:
    """The file's version when it has not changed for ``_SETTLED_S`` seconds, else ``None``
    (what is derived from a file written just now is not kept: it may change unseen)."""
    version = file_version(path)
    return version if max(version[4], version[5]) / 1e9 <= time.time() - _SETTLED_S else None


def _keep(name: str, version: _Version, digest: str) -> None:
    """Keep ``digest`` in the cache; best effort."""
    folder = trusted_folder(FOLDER, create=True)
    if folder is None:
        return
    record = {
        "schema": _SCHEMA,
        "model_path": version[0],
        "version": list(version),
        "sha256": digest,
    }
    try:
        atomic_write(folder / name, json.dumps(record))
    except CacheError:
        pass  # a read-only cache only costs the next process a hash


def file_fingerprint(path: Path) -> str:
    """The SHA-256 hex digest of the file at ``path`` (hashed once per settled version)."""
    version = settled_version(path)
    if version is None:
        return _hash(path)
    with _lock:
        known = _known.get(version)
    if known is not None:
        return known
    remembered = version[3] >= REMEMBERED_BYTES
    name = f"{cache_key(_SCHEMA, *version)}.json" if remembered else ""
    digest = _recalled(name, version) if remembered else None
    if digest is None:
        digest = _hash(path)
        if file_version(path) != version:  # changed while it was read
            return digest
        if remembered:
            _keep(name, version, digest)
    with _lock:
        _known[version] = digest
    return digest
