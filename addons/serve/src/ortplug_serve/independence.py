"""Whether requests may share runs: rows proven independent at the start, and re-checked on real
requests before a batch's row count is trusted.

Stacking requests into one run is right only when each request's rows come out as they would
alone. A model that trims padding to the longest real length of the batch
(``y = 2 * x[:, :max(sum(mask, 1))]``), normalises by a batch-wide maximum, or branches on the
batch size is not row by row, though one generated feed repeated (its mask all ones) says it is.
So, at the start, :func:`rows_checked` runs :func:`varied_rows` (the model's samples when it has
any, then rows varied from them: masks of several real lengths, integers drawn from the values
seen, or up to the one value seen (a length), floats at several magnitudes), more rows than the largest batch the server may run, each
alone and together (all at once, and in runs of 2 to :data:`CHUNKS` rows); an output whose shape
changes with the values (not with the rows) never stacks. Then the server re-checks
(:class:`RowChecks`): the first :data:`RECHECKS` batched runs of each row count (per device and
group of shapes) are run again request by request and compared before that count is trusted;
the requests get the outputs they got alone; and a batched run whose outputs' shapes past the
first dimension differ from the ones its group had is not split (the shape follows the values). A model that fails either check is served
request by request, said once (:class:`ServingWarning`).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from .rows import Batching, group_of, split_rows, stack_rows

__all__ = [
    "CHUNKS",
    "MAGNITUDES",
    "RECHECKS",
    "RowChecks",
    "RowsChecked",
    "ServingWarning",
    "agree",
    "rows_checked",
    "run_alone",
    "shares_problem",
    "varied_rows",
]

#: Scales of the float rows varied from the model's inputs (the first rows are as given).
MAGNITUDES = (1.0, 0.01, 10.0, 1000.0, 0.1, 100.0)
#: Float16 inputs stay within this scale (its range ends at 65504).
_HALF_MAGNITUDE = 100.0
#: Row counts of the runs checked at the start besides all of the rows: 2 to this.
CHUNKS = 8
#: Batched runs of each row count re-checked on real requests before it is trusted.
RECHECKS = 2
#: Keys :class:`RowChecks` remembers at most (many shapes x row counts): then it starts over.
_MAX_KEYS = 4096


class ServingWarning(RuntimeWarning):
    """The throughput hint serves a model's requests one by one: its batched rows were not what
    the same requests give alone."""


def _mask_like(value: np.ndarray) -> bool:
    """Booleans, or integers that are all 0 or 1 with a 1 among them (an attention mask)."""
    if value.dtype == np.bool_:
        return True
    if value.dtype.kind not in "iu" or value.size == 0:
        return False
    return bool(np.all((value == 0) | (value == 1)) and np.any(value == 1))


def _varied(row: np.ndarray, index: int, whole: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row ``index`` varied from ``row`` (one row of ``whole``): see the module docstring."""
    if row.dtype.kind in "fc":
        top = _HALF_MAGNITUDE if row.dtype == np.float16 else max(MAGNITUDES)
        scale = min(MAGNITUDES[index % len(MAGNITUDES)], top)
        noise = rng.standard_normal(row.shape)
        return np.asarray((row + noise) * scale, dtype=row.dtype)
    if row.ndim >= 2 and _mask_like(whole):
        size = row.shape[-1]
        length = 1 + (index * 5) % size if index % 3 else size  # every third row: the whole length
        mask = np.zeros(row.shape, dtype=row.dtype)
        mask[..., :length] = 1
        return mask
    if row.dtype.kind in "iu":
        seen = np.unique(whole)
        if len(seen) == 1 and seen[0] >= 0:  # one value (a length, a count): others up to it
            seen = np.arange(1 if seen[0] > 0 else 0, max(int(seen[0]), 1) + 1)
        if len(seen) > 1:
            return np.asarray(rng.choice(seen, size=row.shape), dtype=row.dtype)
    return np.array(row, copy=True)


def varied_rows(feed: Mapping[str, np.ndarray], count: int, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` one-row requests: ``feed``'s rows as they are, then rows varied from them (masks
    of other real lengths, integers drawn from the values ``feed`` holds, floats at
    :data:`MAGNITUDES`), seeded."""
    rng = np.random.default_rng(seed)
    given = min(value.shape[0] for value in feed.values())
    requests = []
    for index in range(count):
        request = {}
        for name, value in feed.items():
            row = value[index % given : index % given + 1]
            if index >= given:
                row = _varied(row, index, value, rng)
            request[name] = np.ascontiguousarray(row)
        requests.append(request)
    return requests


def agree(one: Any, other: Any) -> bool:
    """Whether two outputs are the same: shape, dtype, and values (floats within rounding)."""
    one, other = np.asarray(one), np.asarray(other)
    if one.shape != other.shape or one.dtype != other.dtype:
        return False
    if one.dtype.kind not in "fc":
        return bool(np.array_equal(one, other))
    finite = other[np.isfinite(other)]
    scale = float(np.max(np.abs(finite), initial=1.0))
    return bool(np.allclose(one, other, rtol=1e-4, atol=1e-6 * scale, equal_nan=True))


def run_alone(session: Any, names: Sequence[str], feed: Mapping[str, np.ndarray],
              static: int | None, options: Any = None) -> list[Any]:  # fmt: skip
    """``feed`` run by itself (padded to a static batch, and its rows taken back)."""
    if static is None:
        return list(session.run(list(names), dict(feed), options))
    rows = next(iter(feed.values())).shape[0]
    ran = session.run(list(names), stack_rows([feed], static), options)
    return split_rows(ran, [rows], static)[0]


def shares_problem(
    names: Sequence[str], shares: Sequence[Sequence[Any]], alone: Sequence[Sequence[Any]], rows: int
) -> str | None:
    """Why a batched run of ``rows`` rows is not to be trusted: a request's share of it (``shares``)
    differs from what it gave alone (``alone``); ``None`` when every output agrees."""
    for index, (shared, single) in enumerate(zip(shares, alone)):
        for name, one, other in zip(names, shared, single):
            if not agree(one, other):
                return (
                    f"output {name!r} of request {index} differs when it shares a run of {rows} "
                    f"rows (rows mix, or the model is not row by row)"
                )
    return None


@attrs.frozen
class RowsChecked:
    """The start's check: why requests may not share runs (``None``: they may), the group of the
    rows checked, the row counts whose runs agreed with the rows alone, and the shapes of the
    outputs past the first dimension."""

    problem: str | None
    group: Hashable | None = None
    counts: frozenset[int] = frozenset()
    shapes: tuple[tuple[int, ...], ...] = ()


def _trailing(outputs: Sequence[Any]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(np.shape(output))[1:] for output in outputs)


def _shape_problem(names: Sequence[str], alone: Sequence[Sequence[Any]]) -> str | None:
    """An output whose shape past the first dimension changes with the rows' values."""
    for index, name in enumerate(names):
        shapes = sorted({tuple(np.shape(outputs[index]))[1:] for outputs in alone})
        if len(shapes) > 1:
            return (
                f"the shape of output {name!r} depends on the input values ({shapes[0]} and "
                f"{shapes[1]} past the first dimension for rows of one shape)"
            )
    return None


def _chunks(total: int, largest: int) -> list[tuple[int, int]]:
    """(start, rows) of the runs checked besides all of the rows: 2 to ``largest`` rows each,
    taken one after another from ``total`` rows (around again where they run out)."""
    chunks, start = [], 0
    for rows in range(2, min(CHUNKS, largest) + 1):
        if start + rows > total:
            start = 0
        chunks.append((start, rows))
        start += rows
    return chunks


def rows_checked(
    session: Any,
    feed: Mapping[str, np.ndarray],
    names: Sequence[str],
    batching: Batching,
    rows: int,
) -> RowsChecked:
    """Run ``rows`` :func:`varied_rows` from ``feed`` alone and together on ``session`` (a static
    batch: at most its size) and compare (see the module docstring)."""
    count = batching.static or rows
    requests = varied_rows(feed, count)
    alone = [run_alone(session, names, request, batching.static) for request in requests]
    problem = _shape_problem(names, alone)
    if problem is not None:
        return RowsChecked(problem)
    runs = [(0, count), *_chunks(count, count if batching.static else count - 1)]
    counts = set()
    for start, size in runs:
        part = requests[start : start + size]
        stacked = stack_rows(part, batching.static)
        ran = next(iter(stacked.values())).shape[0]
        try:
            shares = split_rows(session.run(list(names), stacked), [1] * size, ran)
        except Exception as exc:
            cause = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
            return RowsChecked(f"a batch of {size} rows did not run as one ({cause})")
        problem = shares_problem(names, shares, alone[start : start + size], size)
        if problem is not None:
            return RowsChecked(problem)
        counts.add(size)
    found = group_of(batching, requests[0], names)
    group = None if found is None else found[0]
    return RowsChecked(None, group, frozenset(counts), _trailing(alone[0]))


class RowChecks:
    """What a server trusts: ``(device, group, rows)`` keys whose first :data:`RECHECKS` batched
    runs agreed with their requests run alone (or the start's check ran), and each ``(device,
    group)``'s output shapes past the first dimension (one that changes with the values is never
    stacked)."""

    def __init__(
        self,
        trusted: Sequence[Hashable] = (),
        shapes: Mapping[Hashable, tuple[tuple[int, ...], ...]] | None = None,
    ) -> None:
        self._trusted = tuple(trusted)
        self._passed: dict[Hashable, int] = dict.fromkeys(self._trusted, RECHECKS)
        self._first_shapes = dict(shapes or {})
        self._shapes = dict(self._first_shapes)
        self._lock = threading.Lock()

    def trusted(self, key: Hashable) -> bool:
        """Whether a batched run of ``key`` is served without running its requests again."""
        return self._passed.get(key, 0) >= RECHECKS

    def passed(self, key: Hashable) -> None:
        """A re-checked run of ``key`` agreed with its requests run alone."""
        with self._lock:
            self._forget_when_full()
            self._passed[key] = self._passed.get(key, 0) + 1

    def shape_problem(
        self, group: Hashable, names: Sequence[str], outputs: Sequence[Any]
    ) -> str | None:
        """Why a batched run's ``outputs`` (one request's share) are not to be stacked: their
        shapes past the first dimension differ from the ones ``group`` (device and group) had
        first; ``None``: the same (or the first seen)."""
        shapes = _trailing(outputs)
        with self._lock:
            self._forget_when_full()
            known = self._shapes.setdefault(group, shapes)
        for name, had, has in zip(names, known, shapes):
            if had != has:
                return (
                    f"the shape of output {name!r} depends on the input values ({had} and {has} "
                    "past the first dimension for requests of one shape)"
                )
        return None

    def _forget_when_full(self) -> None:
        """Start over (from the start's check) past :data:`_MAX_KEYS` keys (under the lock)."""
        if len(self._passed) + len(self._shapes) >= _MAX_KEYS:
            self._passed = dict.fromkeys(self._trusted, RECHECKS)
            self._shapes = dict(self._first_shapes)
