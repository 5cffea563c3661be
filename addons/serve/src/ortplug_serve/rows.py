"""Concurrent requests stacked into one run along the batch dimension, and the outputs split back.

A model batches when every input is a tensor whose first dimension is one dynamic dimension
(every input the same), or one fixed size above 1 (a static batch: requests fill it, and the
last row pads what is left, as the Ray predictor pads), and every output is a tensor. Requests
share a run only when they feed the same inputs with the same dtypes and the same dimensions past
the first, and ask for the same outputs: different sequence lengths or image sizes are different
groups. Whether the model's rows are independent is proven apart (:mod:`.independence`). A run
whose outputs do not have the batch's rows first is not split (:class:`NotRowwise`): its
requests run one by one. Each request gets arrays of its own (copies of its rows), never views
of the run's outputs that other requests' rows share.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

if TYPE_CHECKING:
    from ortplug.session.introspection import ValueInfo

__all__ = ["Batching", "NotRowwise", "batching_of", "group_of", "split_rows", "stack_rows"]


class NotRowwise(Exception):
    """A batched run's outputs do not have one row per input row: it cannot be split."""


@attrs.frozen
class Batching:
    """How this model's requests may share a run: its batched inputs, and ``static``, the
    model's fixed batch (``None``: a dynamic one)."""

    inputs: frozenset[str]
    static: int | None = None

    def rows_limit(self, max_batch: int) -> int:
        """The most rows one run takes: ``max_batch``, or the static batch."""
        return self.static if self.static is not None else max_batch


def batching_of(inputs: Sequence[ValueInfo], outputs: Sequence[ValueInfo]) -> Batching | str:
    """The model's :class:`Batching`, or why its requests cannot share a run (one line)."""
    firsts: set[int | str | None] = set()
    for info in inputs:
        if info.kind != "tensor" or not info.shape:
            return f"input {info.name!r} is not a tensor with a batch dimension ({info.type})"
        firsts.add(info.shape[0])
    for info in outputs:
        if info.kind != "tensor" or not info.shape:
            return f"output {info.name!r} is not a tensor with a batch dimension ({info.type})"
    named = {d for d in firsts if d is not None}
    if not inputs or len(named) > 1:
        return f"the inputs' first dimensions differ ({sorted(map(str, named))})"
    first = next(iter(named), None)
    if isinstance(first, int) and first <= 1:
        return f"the model's batch is fixed at {first}"
    static = first if isinstance(first, int) else None
    for info in outputs:
        size = info.shape[0] if info.shape else None
        if isinstance(size, int) and size != static:
            return f"output {info.name!r} has {size} rows whatever the batch"
    return Batching(frozenset(info.name for info in inputs), static=static)


def group_of(
    batching: Batching | None, feed: Mapping[str, Any], names: Sequence[str]
) -> tuple[Hashable, int] | None:
    """The group a request may share a run with, and its rows; ``None``: it runs alone."""
    if batching is None or not feed or not set(feed) <= batching.inputs:
        return None
    rows = -1
    parts = []
    for name in sorted(feed):
        value = feed[name]
        if type(value) is not np.ndarray or value.ndim == 0:
            return None
        if rows < 0:
            rows = value.shape[0]
        elif value.shape[0] != rows:
            return None
        parts.append((name, value.dtype.str, value.shape[1:]))
    limit = batching.static
    if rows <= 0 or (limit is not None and rows >= limit):
        return None
    return (tuple(parts), tuple(names)), rows


def stack_rows(
    feeds: Sequence[Mapping[str, np.ndarray]], static: int | None
) -> dict[str, np.ndarray]:
    """The feeds' rows one after another, the last row repeated up to a static batch."""
    stacked = {}
    for name in feeds[0]:
        parts = [feed[name] for feed in feeds]
        rows = sum(part.shape[0] for part in parts)
        if static is not None and rows < static:
            last = parts[-1][-1:]
            parts.append(np.repeat(last, static - rows, axis=0))
        stacked[name] = np.concatenate(parts)
    return stacked


def split_rows(outputs: Sequence[Any], rows: Sequence[int], ran: int) -> list[list[Any]]:
    """Each request's share of a batched run's ``outputs`` (``ran`` rows, padding included), in
    arrays of its own (a request that took every row gets the outputs themselves); raises
    :class:`NotRowwise` when an output does not have those rows first."""
    for output in outputs:
        if not isinstance(output, np.ndarray) or output.ndim == 0 or output.shape[0] != ran:
            shape = getattr(output, "shape", type(output).__name__)
            raise NotRowwise(f"an output of {shape} for a run of {ran} rows")
    if len(rows) == 1 and rows[0] == ran:
        return [list(outputs)]
    shares = []
    start = 0
    for count in rows:
        shares.append([output[start : start + count].copy() for output in outputs])
        start += count
    return shares
