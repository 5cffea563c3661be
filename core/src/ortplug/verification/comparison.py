"""Outputs judged the way their consumer reads them: one candidate's outputs against the
reference's (the rules per kind of output: docs/providers.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..checkpoint.variants import Tolerance
from ..errors import OptionError

__all__ = [
    "METRICS",
    "MIN_COSINE",
    "OutputCheck",
    "OutputRule",
    "compare_outputs",
    "parse_output_rules",
]

#: How an output may be judged (``extra.output_checks`` ``metric``).
METRICS = ("allclose", "topk", "cosine", "exact")
#: The lowest per-row cosine similarity an embedding-like output may have, by precision.
MIN_COSINE = {"fp32": 0.9999, "tf32": 0.999, "fp16": 0.999, "bf16": 0.99, "int8": 0.99}
#: Rows of top-k sets reported for a score-like output (at most this many classes).
_TOP_K = 5
_SCORE_NAME = re.compile(r"score|logit|prob|class|cls|conf", re.IGNORECASE)
_EMBEDDING_NAME = re.compile(r"embed|feature|pooler|vector|encoding", re.IGNORECASE)


def _positive_int(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OptionError(f"output check {attribute.name}: expected an integer >= 1, got {value!r}")


def _cosine(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1:
        raise OptionError(
            f"output check {attribute.name}: expected a number from -1 to 1, got {value!r}"
        )


@attrs.frozen
class OutputRule:
    """How one output is judged: its metric and, where set, its own tolerance."""

    metric: str = attrs.field(default="allclose", validator=attrs.validators.in_(METRICS))
    tolerance: Tolerance | None = None
    k: int = attrs.field(default=1, validator=_positive_int)
    min_cosine: float | None = attrs.field(default=None, validator=_cosine)


_RULE_FIELDS = ("metric", "rtol", "atol", "k", "min_cosine")


def _rule(name: str, value: object) -> OutputRule:
    where = f"metadata extra.output_checks[{name!r}]"
    if not isinstance(value, Mapping):
        raise OptionError(f"{where}: expected an object such as {{'rtol': 0.01}}, got {value!r}")
    unknown = sorted(set(value) - set(_RULE_FIELDS))
    if unknown:
        raise OptionError(
            f"{where}: unknown field(s) {unknown}; allowed: {', '.join(_RULE_FIELDS)}"
        )
    if ("rtol" in value) != ("atol" in value):
        raise OptionError(f"{where}: give rtol and atol together, got {dict(value)!r}")
    try:
        tolerance = Tolerance(value["rtol"], value["atol"]) if "rtol" in value else None
        metric = value.get("metric", "allclose")
        if metric not in METRICS:
            raise OptionError(f"metric: expected one of {', '.join(METRICS)}, got {metric!r}")
        for field, owner in (("k", "topk"), ("min_cosine", "cosine")):
            if field in value and metric != owner:
                raise OptionError(f"{field}: only with metric {owner!r}, got metric {metric!r}")
        return OutputRule(metric, tolerance, value.get("k", 1), value.get("min_cosine"))
    except (OptionError, ValueError, TypeError) as exc:
        raise OptionError(f"{where}: {exc}") from None


def parse_output_rules(
    extra: Mapping[str, object], outputs: Sequence[str] | None = None
) -> dict[str, OutputRule]:
    """The per-output rules of a checkpoint's metadata ``extra.output_checks`` (none: ``{}``);
    each must name one of ``outputs`` (the model's) where they are given."""
    value = extra.get("output_checks")
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OptionError(
            f"metadata extra.output_checks: expected an object of output name -> rule, got {value!r}"
        )
    unknown = sorted(str(name) for name in value if outputs is not None and name not in outputs)
    if unknown:
        raise OptionError(
            f"metadata extra.output_checks: {unknown} not an output of the model; expected some "
            f"of {list(outputs or ())}"
        )
    return {str(name): _rule(str(name), rule) for name, rule in value.items()}


@attrs.frozen
class OutputCheck:
    """What one output's comparison found, as cached: the largest finite difference and the
    reference's scale, the worst ``violation`` (``None``: it passes), what the row judgements
    measured (``rows`` 0: none ran), and ``on`` which inputs."""

    name: str
    max_abs: float
    scale: float
    violation: str | None = None
    rows: int = 0
    topk_agree: int = 0
    min_cosine: float | None = None
    on: str = ""

    @property
    def relative(self) -> float:
        """The largest difference as a share of the reference's range (``inf`` for a zero range)."""
        if self.max_abs == 0:
            return 0.0
        return self.max_abs / self.scale if self.scale else math.inf

    def problem(self) -> str | None:
        """Why this output fails, naming it, the worst element or row and the rule, or ``None``."""
        if self.violation is None:
            return None
        on = f" (on {self.on})" if self.on else ""
        return f"output {self.name!r}: {self.violation}{on}"

    def describe(self) -> str:
        """``logits max abs diff 0.018 (1.8% of range), top-1 8/8 rows``."""
        if self.violation is not None:
            return f"{self.name} {self.violation}"
        text = f"{self.name} max abs diff {self.max_abs:.3g} ({self.relative * 100:.3g}% of range)"
        if self.rows:
            text += f", top-{_TOP_K} {self.topk_agree}/{self.rows} rows"
        if self.min_cosine is not None:
            text += f", cosine >= {self.min_cosine:.6g}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON form (as cached)."""
        return attrs.asdict(self)

    def worse_than(self, other: OutputCheck) -> bool:
        """Whether this check shows more of a problem than ``other`` (failures first)."""
        if (self.violation is None) != (other.violation is None):
            return self.violation is not None
        return self.max_abs > other.max_abs


def _at(where: str, index: tuple[int, ...] | None = None) -> str:
    """``at s[0][3, 1]: `` — where in a sequence or map, and which element."""
    place = where + (f"[{', '.join(map(str, index))}]" if index is not None else "")
    return f"at {place}: " if place else ""


def _leaves(reference: Any, output: Any, where: str) -> Iterator[tuple[str, Any, Any]]:
    """The tensors at the same place in two outputs (a tensor, or sequences and maps of them);
    a structural difference is yielded as ``(where, None, text)``."""
    if isinstance(reference, Mapping):
        if not isinstance(output, Mapping):
            yield where, None, f"a {type(output).__name__}, reference a map"
        elif set(reference) != set(output):
            yield where, None, f"keys {_keys(output)}, reference {_keys(reference)}"
        else:
            for key in sorted(reference, key=repr):
                yield from _leaves(reference[key], output[key], f"{where}[{key!r}]")
    elif isinstance(reference, (list, tuple)):
        if not isinstance(output, (list, tuple)) or len(output) != len(reference):
            given = (
                _items(len(output)) if isinstance(output, (list, tuple)) else type(output).__name__
            )
            yield where, None, f"{given}, reference {_items(len(reference))}"
        else:
            for index, (ref, out) in enumerate(zip(reference, output)):
                yield from _leaves(ref, out, f"{where}[{index}]")
    else:
        yield where, np.asarray(reference), np.asarray(output)


def _items(count: int) -> str:
    return f"{count} item{'' if count == 1 else 's'}"


def _keys(value: Mapping[Any, Any]) -> str:
    shown = sorted(map(repr, value))
    return f"[{', '.join(shown[:5])}{', ...' if len(shown) > 5 else ''}]"


_TEXT_KINDS = "USO"  # ONNX Runtime's string tensors are object arrays of str


def _dtype_problem(reference: np.ndarray, output: np.ndarray) -> str | None:
    if reference.dtype == output.dtype:
        return None
    if reference.dtype.kind in _TEXT_KINDS and output.dtype.kind in _TEXT_KINDS:
        return None
    return f"dtype {output.dtype}, reference {reference.dtype}; the dtype must match exactly"


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _value(value: Any) -> str:
    value = value.item() if isinstance(value, np.generic) else value
    return f"{value:.6g}" if isinstance(value, float) else repr(value)


def _exact(where: str, reference: np.ndarray, output: np.ndarray) -> str | None:
    differs = np.asarray(reference != output, dtype=bool).reshape(reference.shape)
    count = int(np.count_nonzero(differs))
    if not count:
        return None
    first = _index(int(np.argmax(differs.ravel())), reference.shape)
    kind = {"b": "boolean", "i": "integer", "u": "integer"}.get(reference.dtype.kind, "string")
    return (
        f"{_at(where, first)}{_value(output[first])}, reference {_value(reference[first])} "
        f"({count} of {reference.size} elements differ; {kind} outputs must match exactly)"
    )


def _largest_difference(reference: np.ndarray, output: np.ndarray) -> float:
    """How far apart two exact outputs that differ are (``inf`` for strings)."""
    if reference.dtype.kind not in "biuf":
        return math.inf
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(reference.astype(np.float64) - output.astype(np.float64))
    largest = float(np.max(diff)) if diff.size else 0.0
    return largest if largest > 0 else math.inf


def _non_finite(where: str, reference: np.ndarray, output: np.ndarray) -> str | None:
    """Where the non-finite values differ: NaN, +inf and -inf must sit where the reference's do."""
    for test in (np.isnan, np.isposinf, np.isneginf):
        differs = test(reference) != test(output)
        if differs.any():
            first = _index(int(np.argmax(differs.ravel())), reference.shape)
            count = int(np.count_nonzero(differs))
            return (
                f"{_at(where, first)}{_value(output[first])}, reference {_value(reference[first])} "
                f"({count} position(s); non-finite values must match exactly)"
            )
    return None


def _bound(reference: np.ndarray, tolerance: Tolerance) -> np.ndarray:
    """What each element may differ by: ``atol + rtol * |reference|``."""
    return np.asarray(tolerance.atol + tolerance.rtol * np.abs(reference), dtype=np.float64)


def _allclose(
    where: str, ref: np.ndarray, out: np.ndarray, finite: np.ndarray, tolerance: Tolerance
) -> str | None:
    """The worst element beyond ``atol + rtol * |reference|``, by its share of what it may differ."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.where(finite, np.abs(ref - out), 0.0)
        bound = _bound(ref, tolerance)
        beyond = diff > bound
    count = int(np.count_nonzero(beyond))
    if not count:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        excess = np.where(beyond, diff / np.maximum(bound, np.finfo(np.float64).tiny), -1.0)
    first = _index(int(np.argmax(excess.ravel())), ref.shape)
    return (
        f"{_at(where, first)}{_value(out[first])}, reference {_value(ref[first])}: diff "
        f"{_value(diff[first])} exceeds {_value(bound[first])} ({tolerance.describe()}, "
        f"|diff| <= atol + rtol*|reference|; {count} of {ref.size} elements beyond)"
    )


def _rows(value: np.ndarray) -> np.ndarray:
    """The array as rows along its last axis (leading axes flattened)."""
    return value.reshape(-1, value.shape[-1])


def _score_like(name: str, reference: np.ndarray) -> bool:
    if reference.ndim < 2 or reference.shape[-1] < 2 or reference.size == 0:
        return False
    return reference.ndim == 2 or bool(_SCORE_NAME.search(name))


def _top1(
    where: str, ref: np.ndarray, out: np.ndarray, tolerance: Tolerance
) -> tuple[int, int, str | None]:
    """Rows, rows whose top-k sets agree, and the first row whose top-1 differs beyond noise."""
    refs, outs = _rows(ref), _rows(out)
    k = min(_TOP_K, refs.shape[1])
    top_ref = np.argsort(-refs, axis=1, kind="stable")[:, :k]
    top_out = np.argsort(-outs, axis=1, kind="stable")[:, :k]
    agree = sum(set(a) == set(b) for a, b in zip(top_ref.tolist(), top_out.tolist()))
    rows = np.arange(refs.shape[0])
    first_ref, first_out = top_ref[:, 0], top_out[:, 0]
    lead = refs[rows, first_ref] - refs[rows, first_out]
    noise = _bound(refs[rows, first_ref], tolerance) + _bound(refs[rows, first_out], tolerance)
    flipped = (first_ref != first_out) & (lead > noise)
    if not flipped.any():
        return len(rows), agree, None
    row = int(np.argmax(flipped))
    count = int(np.count_nonzero(flipped))
    return (
        len(rows),
        agree,
        (
            f"{_at(where)}row {row}: top-1 is class {int(first_out[row])}, reference class "
            f"{int(first_ref[row])} (which leads by {_value(float(lead[row]))}, beyond "
            f"{tolerance.describe()}); top-1 differs in {count} of {len(rows)} rows"
        ),
    )


def _topk(where: str, ref: np.ndarray, out: np.ndarray, k: int) -> tuple[int, int, str | None]:
    refs, outs = _rows(ref), _rows(out)
    k = min(k, refs.shape[1])
    top_ref = np.argsort(-refs, axis=1, kind="stable")[:, :k].tolist()
    top_out = np.argsort(-outs, axis=1, kind="stable")[:, :k].tolist()
    differ = [i for i, (a, b) in enumerate(zip(top_ref, top_out)) if set(a) != set(b)]
    rows = len(top_ref)
    if not differ:
        return rows, rows, None
    row = differ[0]
    return (
        rows,
        rows - len(differ),
        (
            f"{_at(where)}row {row}: top-{k} {sorted(top_out[row])}, reference {sorted(top_ref[row])} "
            f"(top-{k} sets differ in {len(differ)} of {rows} rows)"
        ),
    )


def _cosines(ref: np.ndarray, out: np.ndarray) -> np.ndarray:
    refs, outs = _rows(ref), _rows(out)
    norms = np.linalg.norm(refs, axis=1) * np.linalg.norm(outs, axis=1)
    dots = np.sum(refs * outs, axis=1)
    both_zero = (np.linalg.norm(refs, axis=1) == 0) & (np.linalg.norm(outs, axis=1) == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(both_zero, 1.0, np.where(norms > 0, dots / norms, 0.0))


@attrs.define
class _Tally:
    """One output's findings over its tensors, the first violation kept."""

    max_abs: float = 0.0
    scale: float = 0.0
    violation: str | None = None
    rows: int = 0
    topk_agree: int = 0
    min_cosine: float | None = None

    def fail(self, problem: str | None) -> None:
        self.violation = self.violation or problem

    def cosine(self, value: float) -> None:
        self.min_cosine = value if self.min_cosine is None else min(self.min_cosine, value)


def _judge_float(
    name: str,
    where: str,
    ref: np.ndarray,
    out: np.ndarray,
    rule: OutputRule,
    tolerance: Tolerance,
    tally: _Tally,
    min_cosine: float,
) -> None:
    tally.fail(_non_finite(where, ref, out))
    finite = np.isfinite(ref) & np.isfinite(out)
    ref64, out64 = ref.astype(np.float64), out.astype(np.float64)
    if finite.any():
        with np.errstate(invalid="ignore", over="ignore"):
            tally.max_abs = max(tally.max_abs, float(np.max(np.abs(ref64 - out64)[finite])))
        tally.scale = max(tally.scale, float(np.max(np.abs(ref64[finite]))))
    tolerance = rule.tolerance or tolerance
    clean = np.where(finite, ref64, 0.0), np.where(finite, out64, 0.0)
    rowwise = ref.ndim >= 1 and ref.size and ref.shape[-1] >= 2
    if rule.metric == "topk" and rowwise:
        rows, agree, problem = _topk(where, *clean, rule.k)
        tally.rows, tally.topk_agree = tally.rows + rows, tally.topk_agree + agree
        tally.fail(problem)
    elif rule.metric == "allclose" and _score_like(name, ref):  # a flipped class says most
        rows, agree, problem = _top1(where, *clean, tolerance)
        tally.rows, tally.topk_agree = tally.rows + rows, tally.topk_agree + agree
        tally.fail(problem)
    if rule.metric == "allclose":
        tally.fail(_allclose(where, ref64, out64, finite, tolerance))
    judged_cosine = rule.metric == "cosine" or (
        rule.metric == "allclose" and _EMBEDDING_NAME.search(name) is not None
    )
    if judged_cosine and ref.ndim >= 1 and ref.size:
        cosines = _cosines(*clean)
        lowest = int(np.argmin(cosines))
        tally.cosine(float(cosines[lowest]))
        floor = rule.min_cosine if rule.min_cosine is not None else min_cosine
        if cosines[lowest] < floor:
            tally.fail(
                f"{_at(where)}row {lowest}: cosine similarity {float(cosines[lowest]):.6g} to the "
                f"reference, below {floor:g} ({int(np.count_nonzero(cosines < floor))} of "
                f"{len(cosines)} rows)"
            )


def _judge(
    name: str,
    reference: Any,
    output: Any,
    rule: OutputRule,
    tolerance: Tolerance,
    min_cosine: float,
) -> OutputCheck:
    tally = _Tally()
    for where, ref, out in _leaves(reference, output, ""):
        if ref is None:
            tally.fail(f"{_at(where)}{out}")
            tally.max_abs = math.inf
            continue
        problem = _dtype_problem(ref, out)
        if problem is None and ref.shape != out.shape:
            problem = f"shape {out.shape}, reference {ref.shape}; the shape must match exactly"
        if problem is not None:
            tally.fail(f"{_at(where)}{problem}")
            tally.max_abs = math.inf
        elif ref.dtype.kind == "f" and rule.metric != "exact":
            _judge_float(name, where, ref, out, rule, tolerance, tally, min_cosine)
        elif (problem := _exact(where, ref, out)) is not None:
            tally.fail(problem)
            tally.max_abs = max(tally.max_abs, _largest_difference(ref, out))
    return OutputCheck(
        name,
        tally.max_abs,
        tally.scale,
        tally.violation,
        tally.rows,
        tally.topk_agree,
        tally.min_cosine,
    )


def compare_outputs(
    reference: Mapping[str, Any],
    outputs: Mapping[str, Any],
    tolerance: Tolerance,
    rules: Mapping[str, OutputRule] | None = None,
    *,
    precision: str = "fp32",
) -> tuple[OutputCheck, ...]:
    """One check per reference output, in order (an output the candidate lacks fails)."""
    checks = []
    min_cosine = MIN_COSINE.get(precision, MIN_COSINE["fp32"])
    for name, value in reference.items():
        if name not in outputs:
            checks.append(OutputCheck(name, math.inf, 0.0, "missing from the candidate's outputs"))
            continue
        rule = (rules or {}).get(name, OutputRule())
        checks.append(_judge(name, value, outputs[name], rule, tolerance, min_cosine))
    return tuple(checks)
