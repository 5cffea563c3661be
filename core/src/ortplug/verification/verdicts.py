"""Verdicts: whether a provider's (or a variant's) outputs match the CPU provider on the reference
weights, and the cache of what was measured."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from ..cache.root import cache_key
from ..cache.store import RecordStore
from ..checkpoint.variants import Tolerance, default_tolerance
from .comparison import OutputCheck, compare_outputs

__all__ = [
    "RECORD_FOLDER",
    "Measurement",
    "OutputCheck",
    "Tolerance",
    "Verdict",
    "compare_outputs",
    "default_tolerance",
    "load_checks",
    "record_key",
    "save_checks",
]

#: The folder under the cache root that holds measured differences.
RECORD_FOLDER = "verify"
# 1 compared sequences by repr and gave integer outputs a tolerance; 2 judged each output by its
# largest difference against its range, on one input: never read
_SCHEMA = 3
_MAX_RECORD_BYTES = 256 * 1024
_STORE = RecordStore(
    RECORD_FOLDER,
    _SCHEMA,
    "verification record",
    "it is measured again",
    max_bytes=_MAX_RECORD_BYTES,
)


@attrs.frozen
class Verdict:
    """Whether a session's outputs are within ``tolerance`` of the CPU reference, and by how much.

    ``variant``: what ran (``None``: the reference weights); ``covered``: what the inputs covered;
    ``cost_ms``: what this verdict cost now; ``failure``: what stopped the candidate besides its
    outputs (it raised, a reused IO binding returned stale outputs, it took no node).
    """

    variant: str | None
    precision: str
    providers: tuple[str, ...]
    tolerance: Tolerance
    checks: tuple[OutputCheck, ...]
    inputs: str
    cost_ms: float
    cached: bool
    failure: str | None = None
    covered: tuple[str, ...] = ()
    #: Whether nothing beyond the first feed could be checked (every probe was over the
    #: verification budget): the candidate is not served, as a failing one is not.
    unverified: bool = False

    @property
    def problems(self) -> tuple[str, ...]:
        """The failure, then every output's reason to fail (naming output, difference, tolerance)."""
        outputs = (c.problem() for c in self.checks)
        return tuple(p for p in (self.failure, *outputs) if p is not None)

    @property
    def passed(self) -> bool:
        """Whether every output is within the tolerance."""
        return not self.problems

    def subject(self) -> str:
        """``variant int8 on CPUExecutionProvider`` or ``the reference weights on ...``."""
        weights = f"variant {self.variant}" if self.variant else "the reference weights"
        return f"{weights} ({self.precision}) on {', '.join(self.providers)}"

    def describe(self) -> str:
        """One line: the verdict, the subject, each output's difference, the tolerance."""
        how = "cached" if self.cached else f"{self.cost_ms:.0f} ms"
        if self.passed:
            outputs = "; ".join(c.describe() for c in self.checks)
            return (
                f"verified {self.subject()} against the CPU reference within "
                f"{self.tolerance.describe()}: {outputs} ({self.coverage()}, {how})"
            )
        if self.unverified:
            return f"{self.subject()} is {'; '.join(self.problems)}"
        return f"{self.subject()} failed verification: {'; '.join(self.problems)}"

    def coverage(self) -> str:
        """``generated inputs: batch 1, 2, 8; ...`` — where the inputs came from, what they covered."""
        covered = "; ".join(self.covered)
        return f"{self.inputs} inputs" + (f": {covered}" if covered else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``backend.report``, ``ortplug verify --json``)."""
        return {
            "passed": self.passed,
            "variant": self.variant,
            "precision": self.precision,
            "providers": list(self.providers),
            "tolerance": self.tolerance.to_dict(),
            "outputs": [c.to_dict() for c in self.checks],
            "problems": list(self.problems),
            "inputs": self.inputs,
            "covered": list(self.covered),
            "cost_ms": round(self.cost_ms, 3),
            "cached": self.cached,
            "failure": self.failure,
            "unverified": self.unverified,
        }


def record_key(*parts: object) -> str:
    """The cache key of one measurement (model, variant, chain, providers, inputs, runtime, host)."""
    return cache_key("verify", _SCHEMA, *parts)


def _number(item: Mapping[str, Any], field: str, *, finite: bool) -> float:
    """A difference or range of a record: a number >= 0 (``inf`` only where ``finite`` is false)."""
    value = item[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"checks: {item['name']!r}: {field} {value!r} is not a number")
    if not value >= 0 or (finite and math.isinf(value)):  # NaN fails the first test
        bound = "a finite number >= 0" if finite else "a number >= 0"
        raise ValueError(f"checks: {item['name']!r}: {field} {value!r} is not {bound}")
    return float(value)


def _is_exact(ort_type: str) -> bool:
    """Whether an output of this ONNX Runtime type must match exactly (a tensor that is not floating)."""
    return ort_type.startswith("tensor(") and not any(
        word in ort_type for word in ("float", "double")
    )


def _check(item: object, outputs: Mapping[str, str]) -> OutputCheck:
    """One record entry, every field checked against its type, its bounds and the model's outputs."""
    if not isinstance(item, dict) or set(item) != {f.name for f in attrs.fields(OutputCheck)}:
        raise ValueError(f"checks: unexpected entry {str(item)[:60]}")
    name = item["name"]
    if not isinstance(name, str) or name not in outputs:
        raise ValueError(f"checks: {str(name)[:60]!r} is not an output of the model")
    max_abs = _number(item, "max_abs", finite=False)
    scale = _number(item, "scale", finite=True)
    rows, agree, cosine = item["rows"], item["topk_agree"], item["min_cosine"]
    for field, count in (("rows", rows), ("topk_agree", agree)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"checks: {name!r}: {field} {count!r} is not a count")
    if agree > rows:
        raise ValueError(f"checks: {name!r}: topk_agree {agree} exceeds its {rows} rows")
    if cosine is not None and (
        isinstance(cosine, bool)
        or not isinstance(cosine, (int, float))
        or not -1.01 <= cosine <= 1.01
    ):
        raise ValueError(f"checks: {name!r}: min_cosine {cosine!r} is not a cosine")
    for field in ("violation", "on"):
        if item[field] is not None and not isinstance(item[field], str):
            raise ValueError(f"checks: {name!r}: {field} {str(item[field])[:60]} is not text")
    if item["on"] is None:
        raise ValueError(f"checks: {name!r}: on is not text")
    if _is_exact(outputs[name]) and item["violation"] is None and max_abs != 0:
        raise ValueError(
            f"checks: {name!r} is an exact ({outputs[name]}) output: it cannot differ by "
            f"{max_abs:g} and pass"
        )
    return OutputCheck(name, max_abs, scale, item["violation"], rows, agree, cosine, item["on"])


@attrs.frozen
class Measurement:
    """What one verification measured: a check per output, and what its inputs covered."""

    checks: tuple[OutputCheck, ...]
    covered: tuple[str, ...]


def _covered(record: Mapping[str, Any]) -> tuple[str, ...]:
    covered = record.get("covered")
    if not isinstance(covered, list) or not all(isinstance(c, str) for c in covered):
        raise ValueError("covered: expected a list of text")
    return tuple(covered)


def _parse(record: Mapping[str, Any], outputs: Mapping[str, str]) -> Measurement:
    """A record's checks, refused unless it names exactly the model's outputs, each once, with
    differences that can be true."""
    items = record.get("checks")
    if not isinstance(items, list) or not items:
        raise ValueError("checks: expected a non-empty list")
    checks = tuple(_check(item, outputs) for item in items)
    names = [check.name for check in checks]
    if len(set(names)) != len(names) or set(names) != set(outputs):
        raise ValueError(
            f"checks: expected one per output of the model ({', '.join(outputs)}), got "
            f"{', '.join(names)[:200]}"
        )
    return Measurement(checks, _covered(record))


def load_checks(key: str, outputs: Mapping[str, str]) -> Measurement | None:
    """The cached measurement for ``key``, or ``None``; the record must match ``outputs`` (the
    model's, name -> ONNX Runtime type), else it is warned about and ignored."""
    return _STORE.load(key, lambda record: _parse(record, outputs))


def save_checks(key: str, measured: Measurement, described: Mapping[str, Any]) -> None:
    """Cache a measurement, best effort; ``described`` (model, model_path, ort_version, ...) lets
    ``ortplug cache`` tell a stale record."""
    checks = [c.to_dict() for c in measured.checks]
    _STORE.keep(key, {**described, "covered": list(measured.covered), "checks": checks}, indent=2)
