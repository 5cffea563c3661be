"""Verification: a provider's (or a variant's) outputs against the CPU provider on the reference weights.

Every output is compared: its largest absolute difference against
``atol + rtol * max|reference|`` (:class:`~ortplug.checkpoint.Tolerance`), and for
classifier-shaped outputs (rows of class scores, rank 2) whether each row's
argmax agrees; a row whose reference top-1 leads its runner-up by less than the
allowed difference may flip. What was measured (not the verdict: the tolerance
may change) is cached under ``<cache>/verify/`` per model fingerprint, variant,
chain with its options, realized providers, inputs, ONNX Runtime version and
host, so a verification costs once; a corrupt record is ignored with an
:class:`~ortplug.errors.OrtplugCacheWarning`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from .cache import atomic_write, cache_dir, cache_key, read_cache_file, touch
from .checkpoint.variants import Tolerance, default_tolerance
from .errors import CacheError, OrtplugCacheWarning

__all__ = [
    "RECORD_FOLDER",
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
_SCHEMA = 1
_MAX_RECORD_BYTES = 256 * 1024


def _floats(values: Iterable[float]) -> tuple[float, ...]:
    return tuple(float(value) for value in values)


@attrs.frozen
class OutputCheck:
    """What one output's comparison measured: largest difference, the reference's range, argmax.

    ``argmax_rows`` is the number of rows compared for argmax (0: not classifier-shaped);
    ``argmax_flips`` the reference's top-1 margin of each row whose argmax differs.
    ``mismatch`` says what made the outputs incomparable (a shape or a kind), if anything.
    """

    name: str
    max_abs: float
    scale: float
    argmax_rows: int = 0
    argmax_flips: tuple[float, ...] = attrs.field(default=(), converter=_floats)
    mismatch: str | None = None

    @property
    def relative(self) -> float:
        """The largest difference as a share of the reference's range (``inf`` for a zero range)."""
        if self.max_abs == 0:
            return 0.0
        return self.max_abs / self.scale if self.scale else math.inf

    def problem(self, tolerance: Tolerance) -> str | None:
        """Why this output fails ``tolerance`` (naming output, difference and tolerance), or ``None``."""
        if self.mismatch is not None:
            return f"output {self.name!r}: {self.mismatch}"
        allowed = tolerance.bound(self.scale)
        if not self.max_abs <= allowed:  # NaN fails too
            return (
                f"output {self.name!r}: max abs diff {self.max_abs:.4g} ({_percent(self.relative)} of "
                f"its range {self.scale:.4g}) exceeds {allowed:.4g} ({tolerance.describe()})"
            )
        flips = [margin for margin in self.argmax_flips if margin > allowed]
        if flips:
            return (
                f"output {self.name!r}: argmax differs in {len(flips)} of {self.argmax_rows} rows "
                f"whose reference top-1 led by more than {allowed:.4g} ({tolerance.describe()})"
            )
        return None

    def describe(self) -> str:
        """``logits max abs diff 0.018 (1.8% of range), argmax 1/1``."""
        if self.mismatch is not None:
            return f"{self.name} {self.mismatch}"
        text = f"{self.name} max abs diff {self.max_abs:.3g} ({_percent(self.relative)} of range)"
        if self.argmax_rows:
            agree = self.argmax_rows - len(self.argmax_flips)
            text += f", argmax {agree}/{self.argmax_rows}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON form (as cached)."""
        return attrs.asdict(self)


def _percent(share: float) -> str:
    return f"{share * 100:.3g}%"


def _as_float(value: np.ndarray) -> np.ndarray:
    return value.astype(np.float64) if value.dtype != np.float64 else value


def _compare(name: str, reference: Any, output: Any) -> OutputCheck:
    if not isinstance(reference, np.ndarray) or not isinstance(output, np.ndarray):
        same = type(reference) is type(output) and repr(reference) == repr(output)
        mismatch = None if same else "differs (a non-tensor output, compared for equality)"
        return OutputCheck(name, 0.0 if same else math.inf, 0.0, mismatch=mismatch)
    if reference.shape != output.shape:
        return OutputCheck(
            name, math.inf, 0.0, mismatch=f"shape {output.shape}, reference {reference.shape}"
        )
    if reference.dtype.kind not in "biuf" or output.dtype.kind not in "biuf":
        same = bool(np.array_equal(reference, output))
        return OutputCheck(
            name, 0.0 if same else math.inf, 0.0, mismatch=None if same else "differs"
        )
    ref, out = _as_float(reference), _as_float(output)
    if ref.size == 0:
        return OutputCheck(name, 0.0, 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(ref - out)
    finite = np.isfinite(ref)
    max_abs = float(np.max(np.where(finite, diff, 0.0)))
    if not np.array_equal(np.isfinite(out), finite) or math.isnan(max_abs):
        max_abs = math.inf  # NaN or inf where the reference is finite (or the reverse)
    scale = float(np.max(np.abs(np.where(finite, ref, 0.0))))
    rows: int = 0
    flips: tuple[float, ...] = ()
    if ref.ndim == 2 and ref.shape[1] >= 2 and ref.dtype.kind == "f":
        ranked = np.sort(ref, axis=1)
        margins = ranked[:, -1] - ranked[:, -2]
        disagree = np.argmax(ref, axis=1) != np.argmax(out, axis=1)
        rows, flips = ref.shape[0], tuple(float(m) for m in margins[disagree])
    return OutputCheck(name, max_abs, scale, rows, flips)


def compare_outputs(
    reference: Mapping[str, Any], outputs: Mapping[str, Any]
) -> tuple[OutputCheck, ...]:
    """One check per reference output, in order (an output the candidate lacks is a mismatch)."""
    checks = []
    for name, value in reference.items():
        if name not in outputs:
            checks.append(OutputCheck(name, math.inf, 0.0, mismatch="missing"))
        else:
            checks.append(_compare(name, value, outputs[name]))
    return tuple(checks)


@attrs.frozen
class Verdict:
    """Whether a session's outputs are within ``tolerance`` of the CPU reference, and by how much.

    ``variant`` is the variant that ran (``None``: the reference weights),
    ``providers`` what ONNX Runtime realized, ``inputs`` where the inputs came from,
    ``cost_ms`` what this verdict cost now (a cached one: reading the record),
    ``cached`` whether the differences came from the cache.
    """

    variant: str | None
    precision: str
    providers: tuple[str, ...]
    tolerance: Tolerance
    checks: tuple[OutputCheck, ...]
    inputs: str
    cost_ms: float
    cached: bool

    @property
    def problems(self) -> tuple[str, ...]:
        """Every output's reason to fail, naming output, difference and tolerance."""
        return tuple(p for p in (c.problem(self.tolerance) for c in self.checks) if p is not None)

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
                f"{self.tolerance.describe()}: {outputs} ({self.inputs} inputs, {how})"
            )
        return f"{self.subject()} failed verification: {'; '.join(self.problems)}"

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
            "cost_ms": round(self.cost_ms, 3),
            "cached": self.cached,
        }


def _record_path(key: str) -> Path:
    return cache_dir(RECORD_FOLDER) / f"{key}.json"


def record_key(*parts: object) -> str:
    """The cache key of one measurement (model, variant, chain, providers, inputs, runtime, host)."""
    return cache_key("verify", *parts)


def _parse(data: bytes) -> tuple[OutputCheck, ...]:
    record = json.loads(data)
    if not isinstance(record, dict) or record.get("schema") != _SCHEMA:
        raise ValueError(f"not an ortplug verification record (schema {_SCHEMA})")
    checks = record.get("checks")
    if not isinstance(checks, list) or not checks:
        raise ValueError("checks: expected a non-empty list")
    parsed = []
    for item in checks:
        if not isinstance(item, dict) or set(item) != {f.name for f in attrs.fields(OutputCheck)}:
            raise ValueError(f"checks: unexpected entry {str(item)[:60]}")
        numbers = (item["max_abs"], item["scale"], *item["argmax_flips"])
        if not all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers):
            raise ValueError(f"checks: {item['name']!r} has a value that is not a number")
        parsed.append(OutputCheck(**item))
    return tuple(parsed)


def load_checks(key: str) -> tuple[OutputCheck, ...] | None:
    """The cached measurement for ``key``, or ``None`` (a corrupt record is warned about and ignored)."""
    path = _record_path(key)
    if not os.path.lexists(path):
        return None
    try:
        checks = _parse(read_cache_file(path, max_bytes=_MAX_RECORD_BYTES))
        touch(path)  # used now: least-recently-used pruning keeps it
        return checks
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        warnings.warn(
            f"ignoring verification record {path}: {exc}; it is measured again",
            OrtplugCacheWarning,
            stacklevel=3,
        )
        return None


def save_checks(key: str, checks: Sequence[OutputCheck], described: Mapping[str, Any]) -> None:
    """Cache a measurement; ``described`` (model, model_path, ort_version, variant...) is kept for
    ``ortplug cache`` (it marks a record whose model is gone or whose runtime changed as stale).

    A cache that cannot be written costs the next process another verification, nothing more.
    """
    record = {"schema": _SCHEMA, **described, "checks": [c.to_dict() for c in checks]}
    try:
        atomic_write(_record_path(key), json.dumps(record, indent=2))
    except CacheError as exc:
        warnings.warn(f"verification is not cached: {exc}", OrtplugCacheWarning, stacklevel=3)
