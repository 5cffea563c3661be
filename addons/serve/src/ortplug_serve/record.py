"""Serving records: how a throughput build measured it should serve a model on this host.

One JSON file per (model fingerprint, ONNX Runtime version, host signature, hint) under
``<cache>/serving/``, beside the autotune records of the proven choice
(:mod:`ortplug.selection.autotune`, whose host signature it shares): a changed model, runtime
or host finds none and measures again. A record names the configuration it was measured with
(:class:`~.config.ServingConfig`) and the devices; a build asking for another one, or
serving on other devices, does not use it. It also holds what a later build needs so as to
serve at the cost of a latency build (:class:`Recorded`): the inputs measured on (their digest
and shapes: generated ones are made again at those shapes, not searched for by running the model;
a build given other inputs measures again) and the start's row check's verdict (whether rows may
share runs; the server still re-checks each row count on its first real requests, so a record
that lies about it cannot mix callers' rows). The server's watch (:mod:`.watch`) rewrites it
when live traffic chose another layout, or the latency path (the report's ``latency``). A corrupt or foreign file is ignored with an
:class:`~ortplug.errors.OrtplugCacheWarning` naming it, and measured again.
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

__all__ = [
    "RECORD_FOLDER",
    "RECORD_SCHEMA",
    "Recorded",
    "lookup",
    "recorded_serving",
    "save",
]

#: 2: the inputs measured on and the row check's verdict are recorded with the layout.
RECORD_SCHEMA = 2
#: The folder under the cache root that holds the records.
RECORD_FOLDER = "serving"
_MAX_RECORD_BYTES = 64 * 1024
_MAX_DEVICES = 16
_MAX_TRIALS = 32
_MAX_TEXT = 400
_MAX_RATE = 1e9
_MAX_INPUTS = 64
_MAX_RANK = 8
_MAX_DIM = 1 << 31
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


@attrs.frozen
class Recorded:
    """What a record gives a later build: the report, the digest and shapes of the inputs it
    measured on, and why rows may not share runs (``None``: the start's check passed)."""

    report: ServingReport
    digest: str
    shapes: dict[str, tuple[int, ...]]
    rows_problem: str | None


def save(
    checkpoint: ResolvedCheckpoint,
    host: HostCapabilities,
    given: ServingConfig,
    recorded: Recorded,
) -> Path:
    """Write ``recorded`` (measured with ``given`` fixed) atomically; its path."""
    record = {
        **measured_here(checkpoint, host),
        "given": given.to_dict(),
        "report": recorded.report.to_dict(),
        "inputs": {
            "digest": recorded.digest,
            "shapes": {name: list(shape) for name, shape in recorded.shapes.items()},
        },
        "rows_problem": recorded.rows_problem,
    }
    return _STORE.save(_key(checkpoint, host, recorded.report.hint, given), record)


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


def _shapes(value: object) -> dict[str, tuple[int, ...]]:
    if not isinstance(value, dict) or not 1 <= len(value) <= _MAX_INPUTS:
        raise OptionError(f"inputs.shapes is not a map of 1 to {_MAX_INPUTS} input shapes")
    shapes = {}
    for name, shape in value.items():
        if not isinstance(shape, list) or len(shape) > _MAX_RANK:
            raise OptionError(f"the shape of {_text(name, 'an input name')!r} is not a list")
        if not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= _MAX_DIM
                   for d in shape):  # fmt: skip
            raise OptionError(f"the shape of {name!r} is not a list of dimensions")
        shapes[name] = tuple(shape)
    return shapes


def _inputs(value: object) -> tuple[str, dict[str, tuple[int, ...]]]:
    if not isinstance(value, dict):
        raise OptionError("inputs is not an object")
    digest = value.get("digest")
    if not isinstance(digest, str) or len(digest) != 64:
        raise OptionError("inputs.digest is not a digest")
    return digest, _shapes(value.get("shapes"))


def _parse(
    record: dict[str, Any], checkpoint: ResolvedCheckpoint, host: HostCapabilities
) -> tuple[Any, Recorded]:
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
    inputs = report.get("inputs")
    latency = report.get("latency")
    problem = record.get("rows_problem")
    parsed = ServingReport(
        str(report["hint"]),
        tuple(_device(device) for device in devices),
        _text(report.get("batching"), "batching"),
        _text(report.get("source"), "source"),
        callers,
        None if inputs is None else _text(inputs, "inputs"),
        None if latency is None else _text(latency, "latency"),
    )
    digest, shapes = _inputs(record.get("inputs"))
    rows = None if problem is None else _text(problem, "rows_problem")
    return record.get("given"), Recorded(parsed, digest, shapes, rows)


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
    found = _load(checkpoint, host, hint, given or ServingConfig())
    if found is None:
        return None
    stored, recorded = found
    return stored, recorded.report


def _load(
    checkpoint: ResolvedCheckpoint, host: HostCapabilities, hint: str, given: ServingConfig
) -> tuple[dict[str, Any], Recorded] | None:
    key = _key(checkpoint, host, hint, given)
    found = _STORE.load(key, lambda record: _parse(record, checkpoint, host))
    if found is None:
        return None
    stored, recorded = found
    return dict(stored) if isinstance(stored, dict) else {}, recorded


def lookup(
    checkpoint: ResolvedCheckpoint,
    host: HostCapabilities,
    hint: str,
    given: ServingConfig,
    labels: tuple[tuple[str, tuple[str, ...]], ...],
) -> Recorded | None:
    """The record when it was measured with ``given`` on these devices (label, chain); its
    report's source says it is recorded."""
    found = _load(checkpoint, host, hint, given)
    if found is None:
        return None
    stored, recorded = found
    report = recorded.report
    if stored != given.to_dict():
        return None
    if tuple((d.label, d.chain) for d in report.devices) != labels:
        return None
    if any(d.serving and d.layout is None for d in report.devices):
        return None
    return attrs.evolve(recorded, report=attrs.evolve(report, source=_recorded(report.source)))


def _recorded(source: str) -> str:
    prefix = "recorded: "
    return source if source.startswith(prefix) else prefix + source
