"""Verification: a provider's (or a variant's) outputs against the CPU provider on the reference weights.

Every output is compared: a floating one by its largest absolute difference against
``atol + rtol * max|reference|`` (:class:`~ortplug.checkpoint.Tolerance`), and for
classifier-shaped outputs (rows of class scores, rank 2) whether each row's
argmax agrees; a row whose reference top-1 leads its runner-up by less than the
allowed difference may flip. Integer, boolean and string outputs (labels, token
ids, indices) must match exactly. Sequences and maps are compared value by value.
What was measured (not the verdict: the tolerance may change) is cached under
``<cache>/verify/`` per model fingerprint, variant, chain with its options,
realized providers, inputs, ONNX Runtime version and host, so a verification
costs once. A record is untrusted input: one that is corrupt, or impossible for
the model (an output it lacks, a negative difference, an exact output that
differs), is ignored with an :class:`~ortplug.errors.OrtplugCacheWarning`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..cache.root import atomic_write, cache_key, read_cache_file, touch, trusted_folder
from ..checkpoint.variants import Tolerance, default_tolerance
from ..errors import CacheError, OrtplugCacheWarning

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
_SCHEMA = 2  # 1 compared sequences by repr and gave integer outputs a tolerance: never read
_MAX_RECORD_BYTES = 256 * 1024


def _floats(values: Iterable[float]) -> tuple[float, ...]:
    return tuple(float(value) for value in values)


@attrs.frozen
class OutputCheck:
    """What one output's comparison measured: largest difference, the reference's range, argmax.

    ``argmax_rows`` is the number of rows compared for argmax (0: not classifier-shaped);
    ``argmax_flips`` the reference's top-1 margin of each row whose argmax differs.
    ``mismatch`` says what made the outputs incomparable (a shape, a kind, a sequence's length,
    a map's keys) or differ where they must be equal (an exact output), if anything.
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


class _Differs(Exception):
    """Two outputs of different structure (kind, length or keys); the message says where."""


def _leaves(
    reference: Any, output: Any, where: str
) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """The tensors at the same place in two outputs (a tensor, or sequences and maps of them).

    Values are compared, never their text: ``repr`` abbreviates arrays over 1000 elements.
    """
    if isinstance(reference, Mapping):
        if not isinstance(output, Mapping):
            raise _Differs(f"{_at(where)}a {type(output).__name__}, reference a map")
        if set(reference) != set(output):
            raise _Differs(f"{_at(where)}keys {_keys(output)}, reference {_keys(reference)}")
        for key in sorted(reference, key=repr):
            yield from _leaves(reference[key], output[key], f"{where}[{key!r}]")
    elif isinstance(reference, (list, tuple)):
        if not isinstance(output, (list, tuple)) or len(output) != len(reference):
            sequence = isinstance(output, (list, tuple))
            given = _items(len(output)) if sequence else type(output).__name__
            raise _Differs(f"{_at(where)}{given}, reference {_items(len(reference))}")
        for index, (ref, out) in enumerate(zip(reference, output)):
            yield from _leaves(ref, out, f"{where}[{index}]")
    else:  # a tensor, or a map's value
        yield where, np.asarray(reference), np.asarray(output)


def _at(where: str) -> str:
    """Where in a sequence or map output a difference is (nothing for a plain tensor)."""
    return f"at {where}: " if where else ""


def _items(count: int) -> str:
    return f"{count} item{'' if count == 1 else 's'}"


def _keys(value: Mapping[Any, Any]) -> str:
    shown = sorted(map(repr, value))
    return f"[{', '.join(shown[:5])}{', ...' if len(shown) > 5 else ''}]"


#: What an exact output holds, by numpy kind, for the message.
_EXACT_KINDS = {
    "b": "boolean",
    "i": "integer",
    "u": "integer",
    "U": "string",
    "S": "string",
    "O": "string",  # ONNX Runtime's string tensors are object arrays of str
}


def _exact(where: str, reference: np.ndarray, output: np.ndarray) -> tuple[float, str | None]:
    """Largest difference and the mismatch of an output that must match exactly (not floating)."""
    kind = _EXACT_KINDS.get(reference.dtype.kind, "non-floating")
    numeric = reference.dtype.kind in "biu" and output.dtype.kind in "biuf"
    textual = reference.dtype.kind in "USO" and output.dtype.kind in "USO"
    if not (numeric or textual):
        return math.inf, f"{_at(where)}type {output.dtype}, reference {reference.dtype}"
    differs = np.asarray(reference != output, dtype=bool)
    count = int(np.count_nonzero(differs))
    if not count:
        return 0.0, None
    largest = math.inf
    detail = ""
    if numeric:
        with np.errstate(invalid="ignore", over="ignore"):
            largest = float(np.max(np.abs(_as_float(reference) - _as_float(output))))
        detail = f" (max abs diff {largest:.4g})"
    return largest, (
        f"{_at(where)}{count} of {reference.size} elements differ{detail}; "
        f"{kind} outputs must match exactly"
    )


def _tensor(
    where: str, reference: np.ndarray, output: np.ndarray
) -> tuple[float, float, str | None]:
    """Largest difference, the reference's range and any mismatch of two tensors.

    Only floating outputs get a tolerance: integer, boolean and string ones (labels,
    token ids, indices) must match exactly.
    """
    if reference.shape != output.shape:
        return math.inf, 0.0, f"{_at(where)}shape {output.shape}, reference {reference.shape}"
    if reference.dtype.kind != "f" or output.dtype.kind not in "biuf":
        largest, mismatch = _exact(where, reference, output)
        numeric = reference.dtype.kind in "biu" and reference.size
        scale = float(np.max(np.abs(reference))) if numeric else 0.0
        return largest, scale, mismatch
    if reference.size == 0:
        return 0.0, 0.0, None
    ref, out = _as_float(reference), _as_float(output)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(ref - out)
    finite = np.isfinite(ref)
    max_abs = float(np.max(np.where(finite, diff, 0.0)))
    if not np.array_equal(np.isfinite(out), finite) or math.isnan(max_abs):
        max_abs = math.inf  # NaN or inf where the reference is finite (or the reverse)
    return max_abs, float(np.max(np.abs(np.where(finite, ref, 0.0)))), None


def _argmax(reference: np.ndarray, output: np.ndarray) -> tuple[int, tuple[float, ...]]:
    """Rows compared and the reference's top-1 margin of each row whose argmax differs."""
    if not (reference.ndim == 2 and reference.shape[1] >= 2 and reference.dtype.kind == "f"):
        return 0, ()
    if output.shape != reference.shape or output.dtype.kind not in "biuf":
        return 0, ()
    ranked = np.sort(reference, axis=1)
    margins = ranked[:, -1] - ranked[:, -2]
    disagree = np.argmax(reference, axis=1) != np.argmax(output, axis=1)
    return reference.shape[0], tuple(float(m) for m in margins[disagree])


def _compare(name: str, reference: Any, output: Any) -> OutputCheck:
    if isinstance(reference, np.ndarray) and isinstance(output, np.ndarray):
        max_abs, scale, mismatch = _tensor("", reference, output)
        if mismatch is not None:
            return OutputCheck(name, max_abs, scale, mismatch=mismatch)
        return OutputCheck(name, max_abs, scale, *_argmax(reference, output))
    max_abs, scale, mismatch = 0.0, 0.0, None
    try:
        for where, ref, out in _leaves(reference, output, ""):
            difference, extent, problem = _tensor(where, ref, out)
            max_abs, scale = max(max_abs, difference), max(scale, extent)
            mismatch = mismatch or problem
    except _Differs as exc:
        return OutputCheck(name, math.inf, scale, mismatch=str(exc))
    return OutputCheck(name, max_abs, scale, mismatch=mismatch)


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
    ``cached`` whether the differences came from the cache, ``failure`` what stopped the
    candidate before or besides its outputs (it raised on the inputs, a reused IO binding
    returned stale outputs, it took no node of the graph).
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

    @property
    def problems(self) -> tuple[str, ...]:
        """The failure, then every output's reason to fail (naming output, difference, tolerance)."""
        outputs = (c.problem(self.tolerance) for c in self.checks)
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
            "failure": self.failure,
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
    rows, flips, mismatch = item["argmax_rows"], item["argmax_flips"], item["mismatch"]
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise ValueError(f"checks: {name!r}: argmax_rows {rows!r} is not a count")
    if not isinstance(flips, list) or len(flips) > rows:
        raise ValueError(f"checks: {name!r}: argmax_flips is not a list of at most {rows} margins")
    margins = [_number({"name": name, "margin": m}, "margin", finite=True) for m in flips]
    if mismatch is not None and not isinstance(mismatch, str):
        raise ValueError(f"checks: {name!r}: mismatch {str(mismatch)[:60]} is not text")
    if _is_exact(outputs[name]) and mismatch is None and max_abs != 0:
        raise ValueError(
            f"checks: {name!r} is an exact ({outputs[name]}) output: it cannot differ by "
            f"{max_abs:g} and pass"
        )
    return OutputCheck(name, max_abs, scale, rows, margins, mismatch)


def _parse(data: bytes, outputs: Mapping[str, str]) -> tuple[OutputCheck, ...]:
    """A record's checks, refused unless it names exactly the model's outputs, each once, with
    differences that can be true."""
    record = json.loads(data)
    if not isinstance(record, dict) or record.get("schema") != _SCHEMA:
        raise ValueError(f"not an ortplug verification record (schema {_SCHEMA})")
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
    return checks


def load_checks(key: str, outputs: Mapping[str, str]) -> tuple[OutputCheck, ...] | None:
    """The cached measurement for ``key``, or ``None``; ``outputs`` (name -> ONNX Runtime type) are
    the model's, which the record must match.

    A record is untrusted input: a corrupt or impossible one is warned about and ignored.
    """
    folder = trusted_folder(RECORD_FOLDER)
    if folder is None:
        return None
    path = folder / f"{key}.json"
    if not os.path.lexists(path):
        return None
    try:
        checks = _parse(read_cache_file(path, max_bytes=_MAX_RECORD_BYTES), outputs)
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
    folder = trusted_folder(RECORD_FOLDER, create=True)
    if folder is None:
        return  # said once, by trusted_folder
    record = {"schema": _SCHEMA, **described, "checks": [c.to_dict() for c in checks]}
    try:
        atomic_write(folder / f"{key}.json", json.dumps(record, indent=2))
    except CacheError as exc:
        warnings.warn(f"verification is not cached: {exc}", OrtplugCacheWarning, stacklevel=3)
