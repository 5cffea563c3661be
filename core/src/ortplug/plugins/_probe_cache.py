"""Probe results kept across processes, so a slow probe (a child interpreter, a driver query) runs once.

Only probes that declare an ``identity`` (what their facts depend on: library
files, environment variables) are cached. An entry is keyed by that identity,
the probe, its plugin's version, ortplug's and ONNX Runtime's installation and
this boot of the machine, so a changed driver, a reinstalled wheel or a reboot
finds no entry and probes again. Overrides apply on top of cached facts, as on
fresh ones. A broken entry or an unusable cache is never an error: the probe runs.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path

from ..cache import (
    atomic_write,
    cache_dir,
    cache_key,
    cache_root,
    read_cache_file,
    remove_entries,
    touch,
)
from ..errors import CacheError
from ..host import HostProbe

__all__ = ["FOLDER", "clear", "entry_key", "load", "store", "trial_key"]

#: Where probe entries live under the cache root.
FOLDER = "probes"
_SCHEMA = 1
_log = logging.getLogger("ortplug")


def _boot() -> str:
    """This boot of the machine: Linux's boot id, elsewhere the boot time to the minute."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return str(round((time.time() - time.monotonic()) / 60))


def _installation(module: str) -> object:
    """Where a package is installed and when it was last written, without importing it."""
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    if origin is None:
        return None
    info = os.stat(origin)
    return [origin, info.st_mtime_ns, info.st_size]


def entry_key(probe: HostProbe, plugin: str, plugin_version: str | None) -> str | None:
    """The entry's key, or ``None`` for a probe that is not cached (no identity, or it failed)."""
    if probe.identity is None:
        return None
    try:
        identity = probe.identity()
        parts = (
            _SCHEMA,
            probe.name,
            list(probe.facts),
            plugin,
            plugin_version,
            _installation("ortplug"),
            _installation("onnxruntime"),
            _boot(),
            identity,
        )
        return cache_key(*parts)
    except Exception as exc:  # an identity that fails only costs the cache
        _log.debug("probe %s is not cached: identity failed: %s", probe.name, exc)
        return None


def trial_key(kind: str, identity: object) -> str:
    """The key of a native trial's outcome (a library loaded in a child): kept per installation
    of ortplug and ONNX Runtime and per boot, like a probe's facts."""
    return cache_key(
        _SCHEMA, kind, _installation("ortplug"), _installation("onnxruntime"), _boot(), identity
    )


def load(key: str) -> Mapping[str, object] | None:
    """The facts stored under ``key``, or ``None`` (absent, unreadable, foreign)."""
    path = cache_root() / FOLDER / f"{key}.json"
    try:
        record = json.loads(read_cache_file(path))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("schema") != _SCHEMA:
        return None
    facts = record.get("facts")
    if not isinstance(facts, dict):
        return None
    touch(path)
    return facts


def store(key: str, facts: Mapping[str, object]) -> None:
    """Keep ``facts`` under ``key``; facts that are not JSON, or an unusable cache, are skipped."""
    try:
        text = json.dumps({"schema": _SCHEMA, "facts": dict(facts)}, allow_nan=False)
        atomic_write(cache_dir(FOLDER) / f"{key}.json", text)
    except (TypeError, ValueError, CacheError) as exc:
        _log.debug("probe facts not cached: %s", exc)


def clear() -> int:
    """Forget every entry; returns how many there were."""
    return remove_entries(FOLDER)
