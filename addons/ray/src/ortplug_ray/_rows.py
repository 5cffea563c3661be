"""How a batch's rows are named in errors, checked against the model's inputs, and padded."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from ortplug.session.introspection import ValueInfo

from .config import BackendConfig
from .errors import BatchError

__all__ = [
    "Rows",
    "column_clash",
    "dims",
    "empty",
    "fits",
    "padded",
    "reason",
    "row_array",
]


def dims(shape: Sequence[int | str | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def fits(given: tuple[int, ...], expected: Sequence[int | str | None]) -> bool:
    return len(given) == len(expected) and all(
        not isinstance(e, int) or e == g for g, e in zip(given, expected)
    )


def row_array(value: Any) -> np.ndarray:
    """One row of an object column (nested arrays or lists) as one array; ``ValueError`` if ragged."""
    if value is None:
        raise ValueError("the value is null")
    array = np.asarray(value)
    if array.dtype == object:
        if array.ndim == 0:
            raise ValueError(f"{value!r} is not a number or an array")
        array = np.stack([row_array(item) for item in array])
    return array


class Rows:
    """How one batch's rows are named in errors: by the id column, else by position (counted
    from ``first``: the batch's first row in the whole input, where one process runs it all)."""

    def __init__(self, where: str, ids: np.ndarray | None, first: int = 0) -> None:
        self.where = where
        self.ids = ids
        self.first = first

    def text(self, start: int, stop: int) -> str:
        """``rows 3..7 (ids 103..107)``-like, for rows ``start`` to ``stop - 1`` of the batch."""
        low, high = self.first + start, self.first + stop - 1
        span = f"row {low}" if low == high else f"rows {low}..{high}"
        if self.ids is None:
            return span
        ids = self.ids[start:stop].tolist()
        if len(ids) == 1:
            return f"{span} (id {ids[0]!r})"
        contiguous = all(isinstance(i, int) for i in ids) and ids == list(
            range(ids[0], ids[0] + len(ids))
        )
        shown = (
            f"{ids[0]}..{ids[-1]}"
            if contiguous
            else ", ".join(map(repr, ids[:3])) + (f", … {ids[-1]!r}" if len(ids) > 3 else "")
        )
        return f"{span} (ids {shown})"

    def error(self, start: int, stop: int, reason: str) -> BatchError:
        """A ``BatchError`` for rows ``start`` to ``stop - 1``, carrying their ids."""
        ids = self.ids[start:stop].tolist() if self.ids is not None else ()
        where = f"{self.where}, " if self.where else ""
        return BatchError(f"{where}{self.text(start, stop)}: {reason}", ids)


def reason(exc: BaseException) -> str:
    """An exception as one line (every problem of an ``InputValidationError``, joined)."""
    problems = getattr(exc, "problems", None)
    text = "; ".join(problems) if problems else str(exc)
    return f"{type(exc).__name__}: " + "; ".join(
        line.strip() for line in text.splitlines() if line.strip()
    )


def empty(info: ValueInfo) -> np.ndarray:
    """No rows of a tensor, with its declared per-row shape (unknown dimensions as 0)."""
    dims = [d if isinstance(d, int) else 0 for d in (info.shape or (None, None))[1:]]
    return np.empty((0, *dims), info.dtype or object)


def padded(rows: np.ndarray, static: int) -> np.ndarray:
    """``rows`` with its last row repeated up to the static batch."""
    buffer = np.empty((static, *rows.shape[1:]), rows.dtype)
    buffer[: len(rows)] = rows
    buffer[len(rows) :] = rows[-1]
    return buffer


def column_clash(
    config: BackendConfig, output_names: Iterable[str], batch_columns: Iterable[str]
) -> str | None:
    """What would overwrite what in a batch's output (an input column, another output's, the
    chain column), naming both columns; ``None`` when every written column is distinct."""
    outputs = config.output_columns or {name: name for name in output_names}
    kept = batch_columns if config.keep_columns is None else config.keep_columns
    owners = {column: f"input column {column!r}" for column in kept}
    writers = [(f"output {name!r}", column) for name, column in outputs.items()]
    if config.chain_column:
        writers.append(("chain_column", config.chain_column))
    for writer, column in writers:
        if column in owners:
            return (
                f"{writer} would be written as column {column!r} over {owners[column]}: map it "
                "to another name (output_columns= or chain_column=), or leave the input "
                "column out with keep_columns="
            )
        owners[column] = f"the column of {writer}"
    return None
