"""The one persistent record store: every record ortplug keeps across processes is written
atomically and read back through one trust check; a bad record is ignored with one warning."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs

from .. import log as _log
from ..errors import CacheError, OrtplugCacheWarning
from .root import (
    atomic_write,
    cache_dir,
    check_writable,
    read_trusted,
    remove_entries,
    touch,
    trusted_folder,
)

__all__ = ["RECORD_FOLDERS", "RecordStore", "read_json"]

T = TypeVar("T")

#: Every record folder under the cache root, with the kind ``ortplug cache list`` shows.
RECORD_FOLDERS = {
    "autotune": "autotune record",
    "serving": "serving record",
    "probes": "probe facts",
    "entry-points": "plugin scan",
    "verify": "verification verdict",
    "fingerprints": "model fingerprint",
    "help": "help page",  # an earlier ortplug's --help kept its page: listed, pruned, cleared
}

#: A record's permissions: this user's alone whatever the umask or a folder's default ACL (one
#: giving another user write would make every record written there one the trust check refuses).
_PRIVATE = 0o600

#: What a record's parser may raise on a record that is not what it claims.
_DEFECTS = (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a finite number")


def read_json(path: Path, *, max_bytes: int = 1 << 20, constants: bool = True) -> object:
    """The JSON a trusted record file holds, at most ``max_bytes``; ``OSError`` (a
    :class:`~ortplug.errors.CacheError`) or ``ValueError`` (not JSON, constants, too deep)."""
    data = read_trusted(path, max_bytes=max_bytes)
    try:
        if constants:
            return json.loads(data)
        return json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("its JSON is nested too deeply (expected a flat record)") from None


@attrs.frozen
class RecordStore:
    """One kind of record: its folder under the cache root, schema, name in messages and bounds
    (``warn``: a bad one is a warning, not a debug line; ``constants``: ``NaN`` may be read)."""

    folder: str = attrs.field()
    schema: int
    kind: str
    remedy: str = "it is made again"
    max_bytes: int = 1 << 20
    warn: bool = True
    constants: bool = True

    @folder.validator
    def _listed(self, _: attrs.Attribute[str], folder: str) -> None:
        if folder not in RECORD_FOLDERS:  # `ortplug cache` lists and prunes only those
            raise ValueError(
                f"record folder: expected one of {sorted(RECORD_FOLDERS)}, got {folder!r}"
            )

    def _name(self, key: str) -> str:
        if not key or not all(c.isalnum() or c in "-_" for c in key):
            raise ValueError(f"{self.kind} key: expected letters, digits, - or _, got {key!r}")
        return f"{key}.json"

    def path(self, key: str) -> Path | None:
        """Where the record ``key`` would be, in a trusted folder; ``None`` without one."""
        folder = trusted_folder(self.folder)
        return None if folder is None else folder / self._name(key)

    def check_writable(self) -> Path:
        """The folder, or :class:`~ortplug.errors.CacheError` now (with the fix) if it is unusable."""
        return check_writable(self.folder)

    def decode(self, path: Path) -> dict[str, Any]:
        """A record file's object, refused unless trusted, bounded, JSON and of this schema."""
        record = read_json(path, max_bytes=self.max_bytes, constants=self.constants)
        if (
            not isinstance(record, dict)
            or type(record.get("schema")) is not int
            or record["schema"] != self.schema
        ):
            raise ValueError(f"not an ortplug {self.kind} (schema {self.schema})")
        return record

    def load(self, key: str, parse: Callable[[dict[str, Any]], T]) -> T | None:
        """The record ``key`` as ``parse`` makes it (raising ``ValueError``, ``KeyError`` or
        ``TypeError`` naming a defect), or ``None``: absent, or bad (said by :meth:`ignore`)."""
        path = self.path(key)
        if path is None or not os.path.lexists(path):
            return None
        try:
            value = parse(self.decode(path))
        except FileNotFoundError:  # removed since (an `ortplug cache clear` meanwhile): a miss
            return None
        except _DEFECTS as exc:
            self.ignore(path, exc)
            return None
        touch(path)  # used now: least-recently-used pruning keeps it
        return value

    def ignore(self, path: Path, problem: object) -> None:
        """The one way a bad record is passed over: one warning per read of it (Python's filters
        show it once per place), or a debug line."""
        if not self.warn:
            _log.debug("%s %s ignored: %s", self.kind, path, problem)
            return
        message = f"ignoring {self.kind} {path}: {problem}; {self.remedy}"
        warnings.warn(message, OrtplugCacheWarning, stacklevel=_log.user_stacklevel())

    def _encoded(self, record: Mapping[str, Any] | object, indent: int | None) -> str:
        fields = record if isinstance(record, Mapping) else attrs.asdict(record)  # type: ignore[arg-type]
        return json.dumps(
            {"schema": self.schema, **fields}, indent=indent, allow_nan=self.constants
        )

    def save(self, key: str, record: Mapping[str, Any] | object, *, indent: int | None = 2) -> Path:
        """Write ``record`` (a mapping or an attrs instance) atomically; its path.

        Raises :class:`~ortplug.errors.CacheError` naming the fix when the cache is unusable.
        """
        path = cache_dir(self.folder) / self._name(key)
        return atomic_write(path, self._encoded(record, indent), mode=_PRIVATE)

    def keep(
        self, key: str, record: Mapping[str, Any] | object, *, indent: int | None = None
    ) -> None:
        """Write ``record`` when the cache can hold it; best effort (a failed write is said as a
        bad record is)."""
        folder = trusted_folder(self.folder, create=True)
        if folder is None:
            return
        path = folder / self._name(key)
        try:
            atomic_write(path, self._encoded(record, indent), mode=_PRIVATE)
        except (CacheError, TypeError, ValueError) as exc:
            if not self.warn:
                _log.debug("%s %s not kept: %s", self.kind, path, exc)
                return
            warnings.warn(
                f"{self.kind} is not cached: {exc}",
                OrtplugCacheWarning,
                stacklevel=_log.user_stacklevel(),
            )

    def records(self) -> list[Path]:
        """The record files of the folder (none through a link, nor from an untrusted folder)."""
        folder = trusted_folder(self.folder)
        try:
            return [] if folder is None else sorted(folder.glob("*.json"))
        except OSError:  # gone since it was checked (an `ortplug cache clear`), or unreadable
            return []

    def clear(self) -> int:
        """Forget every record; returns how many there were."""
        return remove_entries(self.folder)
