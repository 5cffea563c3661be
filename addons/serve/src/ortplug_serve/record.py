"""Serving records: how a throughput build measured it should serve a model on this host.

One JSON file per (model fingerprint, ONNX Runtime version, host signature, hint) under
``<cache>/serving/``, beside the autotune records of the proven choice
(:mod:`ortplug.selection.autotune`, whose host signature it shares): a changed model, runtime
or host finds none and measures again. A record names the configuration it was measured with
(:class:`~.config.ServingConfig`) and the devices; a build asking for another one, or
serving on other devices, does not use it. A corrupt or foreign file is ignored with an
:class:`~ortplug.errors.OrtplugCacheWarning` naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
from ortplug.backend.hints import HINTS
from ortplug.cache.root import cache_key
from ortplug.cache.store import RecordStore
from ortplug.checkpoint import ResolvedCheckpoint
from ortplug.errors import OptionError
from ortplug.host.capabilities import HostCapabilities
from ortplug.providers.options import check_threads
from ortplug.selection.autotune import host_signature, measured_here

from .config import (
    MAX_BATCH_ROWS,
    MAX_DELAY_MS,
    DeviceServing,
    Layout,
    ServingConfig,
    ServingReport,
    Trial,
)

__all__ = ["RECORD_FOLDER", "RECORD_SCHEMA", "lookup", "recorded_serving", "save"]

RECORD_SCHEMA = 1
#: The folder under the cache root that holds the records.
RECORD_FOLDER = "serving"
_MAX_RECORD_BYTES = 64 * 1024
_MAX_DEVICES = 16
_MAX_TRIALS = 32
_MAX_TEXT = 400
_MAX_RATE = 1e9
_STORE = RecordStore(
    RECORD_FOLDER,
    RECORD_SCHEMA,
    "serving record",
    "delete it to measure again",
    max_bytes=_MAX_RECORD_BYTES,
)


def _key(
    checkpoint: ResolvedCheckpoint, host: HostCapabilities, hint: str, given: ServingConfig
) -> str:
    """One record per model, host, hint and stated configuration (a build that fixes some of it
    measures the rest under that constraint: it must not replace the unconstrained record)."""
    fingerprint, signature = checkpoint.fingerprint(), host_signature(host)
    return cache_key("serving", fingerprint, host.ort_version, signature, hint, given.to_dict())


def save(
    checkpoint: ResolvedCheckpoint,
    host: HostCapabilities,
    given: ServingConfig,
    report: ServingReport,
) -> Path:
    """Write the record of ``report`` (measured with ``given`` fixed) atomically; its path."""
    record = {
        **measured_here(checkpoint, host),
        "given": given.to_dict(),
        "report": report.to_dict(),
    }
    return _STORE.save(_key(checkpoint, host, report.hint, given), record)


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise OptionError(f"{name} is not a line of text")
    return value


def _rate(value: object, name: str) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 <= value <= _MAX_RATE
    ):
        raise OptionError(f"{name} is not a rate from 0 to {_MAX_RATE:g}")
    return float(value)


def _whole(value: object, name: str, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise OptionError(f"{name} is not a whole number from 1 to {limit}")
    return value


def _layout(value: object) -> Layout:
    if not isinstance(value, dict):
        raise OptionError("a layout is not an object")
    threads = value.get("threads")
    delay = value.get("max_delay_ms")
    if (
        isinstance(delay, bool)
        or not isinstance(delay, (int, float))
        or not 0 <= delay <= MAX_DELAY_MS
    ):
        raise OptionError(f"max_delay_ms is not milliseconds from 0 to {MAX_DELAY_MS:g}")
    return Layout(
        _whole(value.get("streams"), "streams", 1024),
        None if threads is None else check_threads("threads", threads),
        _whole(value.get("max_batch"), "max_batch", MAX_BATCH_ROWS),
        float(delay),
    )


def _device(value: object) -> DeviceServing:
    if not isinstance(value, dict):
        raise OptionError("a device is not an object")
    chain = value.get("chain")
    if not isinstance(chain, list) or not all(isinstance(k, str) and len(k) <= 64 for k in chain):
        raise OptionError("chain is not a list of provider kinds")
    trials = value.get("trials", [])
    if not isinstance(trials, list) or len(trials) > _MAX_TRIALS:
        raise OptionError("trials is not a list of trials")
    layout = value.get("layout")
    return DeviceServing(
        _text(value.get("label"), "label"),
        tuple(chain),
        None if layout is None else _layout(layout),
        _rate(value.get("requests_per_s"), "requests_per_s"),
        _text(value.get("state"), "state"),
        tuple(
            Trial(_layout(t.get("layout")), _rate(t.get("requests_per_s"), "a trial") or 0.0)
            for t in trials
            if isinstance(t, dict)
        ),
    )


def _parse(
    record: dict[str, Any], checkpoint: ResolvedCheckpoint, host: HostCapabilities
) -> tuple[Any, ServingReport]:
    """The record's given configuration (as stored) and its report; any defect raises."""
    if (
        record.get("model") != checkpoint.fingerprint()
        or record.get("ort_version") != host.ort_version
        or record.get("host") != json.loads(json.dumps(host_signature(host)))
    ):
        raise OptionError("it belongs to another model, ONNX Runtime version or host")
    report = record.get("report")
    if not isinstance(report, dict) or report.get("hint") not in HINTS:
        raise OptionError("report is not a serving report")
    devices = report.get("devices")
    if not isinstance(devices, list) or not 1 <= len(devices) <= _MAX_DEVICES:
        raise OptionError(f"devices is not a list of 1 to {_MAX_DEVICES} devices")
    callers = report.get("callers")
    if callers is not None:
        callers = _whole(callers, "callers", 4096)
    return record.get("given"), ServingReport(
        str(report["hint"]),
        tuple(_device(device) for device in devices),
        _text(report.get("batching"), "batching"),
        _text(report.get("source"), "source"),
        callers,
    )


def recorded_serving(
    checkpoint: ResolvedCheckpoint,
    host: HostCapabilities,
    hint: str = "throughput",
    given: ServingConfig | None = None,
) -> tuple[dict[str, Any], ServingReport] | None:
    """The serving record of this model on this host for ``hint`` measured with ``given`` fixed
    (default: nothing fixed): that configuration (``ServingConfig.to_dict()``) and its report;
    ``None`` when there is none.

    For ``ortplug info --model`` and ``bench``: what a throughput build here serves with.
    """
    key = _key(checkpoint, host, hint, given or ServingConfig())
    found = _STORE.load(key, lambda record: _parse(record, checkpoint, host))
    if found is None:
        return None
    stored, report = found
    return dict(stored) if isinstance(stored, dict) else {}, report


def lookup(
    checkpoint: ResolvedCheckpoint,
    host: HostCapabilities,
    hint: str,
    given: ServingConfig,
    labels: tuple[tuple[str, tuple[str, ...]], ...],
) -> ServingReport | None:
    """The recorded report when it was measured with ``given`` on these devices (label, chain)."""
    found = recorded_serving(checkpoint, host, hint, given)
    if found is None:
        return None
    stored, report = found
    if stored != given.to_dict():
        return None
    if tuple((d.label, d.chain) for d in report.devices) != labels:
        return None
    if any(d.serving and d.layout is None for d in report.devices):
        return None
    return attrs.evolve(report, source=_recorded(report.source))


def _recorded(source: str) -> str:
    prefix = "recorded: "
    return source if source.startswith(prefix) else prefix + source
