"""Probe results kept across processes, keyed by the probe's declared identity, so a slow probe
runs once."""

from __future__ import annotations

import functools
import importlib.util
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from .. import log as _log
from ..cache.root import cache_key
from ..cache.store import RecordStore
from .capabilities import HostProbe

__all__ = ["FOLDER", "clear", "entry_key", "load", "store", "trial_key"]

#: Where probe entries live under the cache root.
FOLDER = "probes"
_SCHEMA = 2  # 2: the record names its probe
#: A broken entry only costs a probe run: logged, not warned about.
_STORE = RecordStore(FOLDER, _SCHEMA, "probe record", warn=False, constants=False)


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


@functools.cache
def _this_process() -> tuple[object, object, str]:
    """ortplug's and ONNX Runtime's installation and this boot: what every key of this process
    holds, read once (each probe's and trial's key stat-ed both packages and read the boot id)."""
    return _installation("ortplug"), _installation("onnxruntime"), _boot()


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
            *_this_process(),
            identity,
        )
        return cache_key(*parts)
    except Exception as exc:  # an identity that fails only costs the cache
        _log.debug("probe %s is not cached: identity failed: %s", probe.name, exc)
        return None


def trial_key(kind: str, identity: object) -> str:
    """The key of a native trial's outcome (a library loaded in a child): kept per installation
    of ortplug and ONNX Runtime and per boot, like a probe's facts."""
    return cache_key(_SCHEMA, kind, *_this_process(), identity)


def _typed(probe: HostProbe, name: str, value: object) -> bool:
    """Whether a stored fact has a type its probe declares (``None``: absent, always allowed)."""
    allowed = probe.types.get(name)
    if allowed is None or value is None:
        return True
    kinds = allowed if isinstance(allowed, tuple) else (allowed,)
    if tuple in kinds:
        kinds = (*kinds, list)  # what JSON makes of a tuple
    return isinstance(value, kinds) and (not isinstance(value, bool) or bool in kinds)


def _problem(record: Mapping[str, object], probe: HostProbe) -> str | None:
    """Why a stored record is not this probe's facts (it is untrusted input), or ``None``."""
    if set(record) != {"schema", "probe", "facts"}:
        return "not a probe record"
    if record["probe"] != probe.name:
        return f"not a record of probe {probe.name!r} (schema {_SCHEMA})"
    facts = record["facts"]
    if not isinstance(facts, dict):
        return "facts is not an object"
    undeclared = sorted(set(facts) - set(probe.facts))
    if undeclared:
        return f"facts {undeclared[:5]} are not declared by the probe"
    mistyped = sorted(name for name, value in facts.items() if not _typed(probe, name, value))
    return f"facts {mistyped[:5]} have a type the probe does not declare" if mistyped else None


def load(key: str, probe: HostProbe) -> Mapping[str, object] | None:
    """The facts of ``probe`` stored under ``key``, or ``None``: absent, unreadable, or not
    exactly its declared facts of their declared types (the probe runs then)."""
    return _STORE.load(key, lambda record: _facts(record, probe))


def _facts(record: Mapping[str, object], probe: HostProbe) -> Mapping[str, object]:
    """The record's facts, or ``ValueError`` naming why they are not this probe's."""
    problem = _problem(record, probe)
    if problem is not None:
        raise ValueError(problem)
    return cast("Mapping[str, object]", record["facts"])  # _problem checked it is an object


def store(key: str, probe: HostProbe, facts: Mapping[str, object]) -> None:
    """Keep ``facts`` under ``key``; facts that are not JSON, or an unusable cache, are skipped."""
    _STORE.keep(key, {"probe": probe.name, "facts": dict(facts)})


def clear() -> int:
    """Forget every entry; returns how many there were."""
    return _STORE.clear()
