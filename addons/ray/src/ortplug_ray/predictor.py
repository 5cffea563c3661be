"""The callable class Ray Data's ``map_batches`` runs: one backend per actor, batches shaped for it."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from ortplug.backend import OnnxBackend
from ortplug.providers.run_options import RunOptionsConfig
from ortplug.session.introspection import ValueInfo

from ._parallel import Parallel
from ._placement import assigned_cpus, placement
from ._rows import Rows, column_clash, dims, empty, fits, padded, reason, row_array
from .config import BackendConfig
from .errors import BatchError
from .resources import static_batch

__all__ = ["OnnxPredictor"]


def _streams(backend: OnnxBackend) -> int:
    """The streams a backend serves with: 1 under the latency hint."""
    serving = backend.serving
    return 1 if serving is None else serving.streams


def _expected(spec: ValueInfo) -> str:
    """What a column's rows must be for ``spec`` (error text, made only when one is raised)."""
    shape = spec.shape or ()
    return f"expected shape {dims(shape[1:])} per row (input {spec.name!r} is {dims(shape)})"


def _static_rows(array: np.ndarray, start: int, stop: int, static: int) -> np.ndarray:
    """Rows ``start`` to ``stop`` as one run of the static batch: a view when they fill it, else
    padded with the last row."""
    rows = array[start:stop]
    return rows if stop - start == static else padded(rows, static)


class OnnxPredictor:
    """The callable class for ``Dataset.map_batches``: one backend per actor, batches shaped for it.

    A model with a static batch dimension gets each Ray batch in runs of that
    batch (the last one padded with its last row) through one IO binding; a
    dynamic one gets the batch whole. Object columns (lists per row, as
    pandas and pyarrow write them) are stacked to the input's dtype and shape.
    Under a throughput hint with several streams, a batch is cut into one part per stream
    (runs of the static batch, each padded) queued at once, so the streams run them side by side.
    """

    def __init__(self, config: BackendConfig, run_options: RunOptionsConfig | None = None) -> None:
        self.config = config
        self.run_options = run_options  # every run's (ortplug batch: ONNX Runtime's log kept quiet)
        self.threads = assigned_cpus()
        self.backend = config.build(self.threads)
        inputs = config.input_columns or {name: name for name in self.backend.input_names}
        self.inputs = dict(inputs)
        outputs = config.output_columns or {name: name for name in self.backend.output_names}
        self.outputs = dict(outputs)
        specs = (*self.backend.inputs, *self.backend.overridable_initializers)
        self.specs = {info.name: info for info in specs if info.name in self.inputs.values()}
        self.static_batch = static_batch(info.shape for info in self.specs.values())
        #: Streams the backend serves with: a batch is cut into this many parts (1: whole).
        self.streams = _streams(self.backend)
        node, ip = placement()
        self.where = f"actor pid {os.getpid()}" + (f" on node {node[:8]}" if node else "")
        self.report = json.dumps(
            {
                "node": node,
                "ip": ip,
                "pid": os.getpid(),
                "threads": self.backend.session_options.intra_op_num_threads
                if self.backend.session_options
                else None,
                "providers": list(self.backend.providers),
                "reasons": dict(self.backend.chain_reasons),
                "performance_hint": self.backend.performance_hint,
                "streams": self.streams,
            },
            sort_keys=True,
        )
        self._batches = itertools.count()  # calls may run side by side (a throughput hint)

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Map columns to inputs, run, and return the batch (its kept columns) plus the outputs."""
        index = next(self._batches)
        return self._predict(batch, f"batch {index} ({self.where})", 0)

    def rows_from(self, batch: Mapping[str, np.ndarray], first_row: int) -> dict[str, np.ndarray]:
        """As a call, for one process running a whole input in batches (``ortplug batch``
        without Ray): errors name rows by their place in the input, from ``first_row``."""
        return self._predict(batch, "", first_row)

    def _predict(
        self, batch: Mapping[str, np.ndarray], where: str, first_row: int
    ) -> dict[str, np.ndarray]:
        prefix = f"{where}: " if where else ""
        id_column = self.config.id_column
        keep = self.config.keep_columns
        wanted = [*self.inputs, *([id_column] if id_column else []), *(keep or ())]
        missing = [column for column in wanted if column not in batch]
        if missing:
            raise BatchError(f"{prefix}column(s) {missing} missing; the batch has {sorted(batch)}")
        clash = column_clash(self.config, self.outputs, batch)
        if clash:
            raise BatchError(f"{prefix}{clash}")
        rows = Rows(where, np.asarray(batch[id_column]) if id_column else None, first_row)
        count = len(next(iter(batch.values()))) if batch else 0
        feed = {
            name: self._column(column, batch[column], name, rows)
            for column, name in self.inputs.items()
        }
        results = self._run(feed, count, rows)
        out = dict(batch) if keep is None else {column: batch[column] for column in keep}
        for name, column in self.outputs.items():
            value = results[name]
            if np.shape(value)[:1] != (count,):
                raise rows.error(
                    0,
                    count,
                    f"output {name!r} has shape {list(np.shape(value))}; expected {count} rows "
                    f"first, one per input row, to write it as column {column!r}",
                )
            out[column] = value
        if self.config.chain_column:
            out[self.config.chain_column] = np.full(count, self.report)
        return out

    def _column(self, column: str, values: np.ndarray, name: str, rows: Rows) -> np.ndarray:
        """The column as the input's array: object columns stacked; the per-row shape checked."""
        spec = self.specs.get(name)
        if spec is None or spec.shape is None:
            return np.ascontiguousarray(values)
        if values.dtype == object and spec.dtype is not None and spec.dtype != object:
            return self._stacked(column, values, spec, rows)
        if not fits(values.shape[1:], spec.shape[1:]):
            raise rows.error(
                0,
                len(values),
                f"column {column!r}: {_expected(spec)}, got {dims(values.shape[1:])}",
            )
        return np.ascontiguousarray(values)

    def _stacked(self, column: str, values: np.ndarray, spec: ValueInfo, rows: Rows) -> np.ndarray:
        """An object column (an array or list per row) stacked into one array of the input's dtype."""
        assert spec.shape is not None and spec.dtype is not None
        shape_text = _expected(spec)
        arrays: list[np.ndarray] = []
        for position, value in enumerate(values):
            try:
                array = row_array(value)
            except ValueError as exc:
                raise rows.error(
                    position, position + 1, f"column {column!r}: {shape_text}, got a value that "
                    f"is not one ({exc})"
                ) from None  # fmt: skip
            if not fits(array.shape, spec.shape[1:]) or (arrays and array.shape != arrays[0].shape):
                other = f" (row 0 has {dims(arrays[0].shape)})" if arrays else ""
                raise rows.error(
                    position,
                    position + 1,
                    f"column {column!r}: {shape_text}, got {dims(array.shape)}{other}",
                )
            arrays.append(array)
        stacked = np.stack(arrays) if arrays else empty(spec)
        try:
            return stacked.astype(spec.dtype, casting="same_kind", copy=False)
        except TypeError:
            raise rows.error(
                0,
                len(values),
                f"column {column!r}: values of dtype {stacked.dtype} do not cast to "
                f"{spec.dtype} ({spec.type}) for input {spec.name!r}",
            ) from None

    def _run(self, feed: dict[str, np.ndarray], count: int, rows: Rows) -> Mapping[str, Any]:
        """The whole batch in one run, or in runs of the model's static batch (or, with several
        streams, in parts run side by side)."""
        static = self.static_batch
        if self.streams > 1 and count > 1:
            return self._side_by_side(feed, count, rows)
        if static is None or count == static:
            return self._run_once(feed, 0, count, rows)
        if count == 0:  # nothing to pad a static run with: empty columns of the declared shapes
            infos = {info.name: info for info in self.backend.outputs}
            return {name: empty(infos[name]) for name in self.outputs}
        first_rows = min(static, count)
        head = {name: _static_rows(array, 0, first_rows, static) for name, array in feed.items()}
        # the backend checks this run's inputs (dtype, per-row shape): the later runs' rows share them
        first = self._run_once(head, 0, first_rows, rows)
        cut = [name for name, value in first.items() if np.shape(value)[:1] != (static,)]
        if cut:
            raise rows.error(
                0,
                count,
                f"output(s) {cut} do not have the model's static batch of {static} first "
                f"(shapes {[list(np.shape(first[n])) for n in cut]}); expected one row per input row",
            )
        out = {
            n: np.empty((count, *np.shape(v)[1:]), np.asarray(v).dtype) for n, v in first.items()
        }
        for name, value in first.items():
            out[name][:first_rows] = value[:first_rows]
        if count <= static:
            return out
        if all(v.dtype != object for v in (*feed.values(), *out.values())):
            self._bound_runs(feed, out, static, rows)
            return out
        for start in range(static, count, static):
            stop = min(start + static, count)
            part = {name: _static_rows(array, start, stop, static) for name, array in feed.items()}
            for name, value in self._run_once(part, start, stop, rows).items():
                out[name][start:stop] = value[: stop - start]
        return out

    def _bound_runs(
        self, feed: Mapping[str, np.ndarray], out: Mapping[str, np.ndarray], static: int, rows: Rows
    ) -> None:
        """The runs after the first through one IO binding: each reads its rows where they are in
        ``feed`` (only a last, short run is padded) and writes into one bound output buffer,
        copied into ``out`` (cheaper per run than binding each run's slice of ``out``)."""
        count = len(next(iter(out.values())))
        binding = self.backend.bind(self.run_options)
        results = {name: np.empty((static, *v.shape[1:]), v.dtype) for name, v in out.items()}
        for name, buffer in results.items():
            binding.bind_output(name, buffer)
        for start in range(static, count, static):
            stop = min(start + static, count)
            # inputs bound again each run: plugin EPs (WebGPU, OpenVINO) copy a bound CPU input
            for name, array in feed.items():
                binding.bind_input(name, _static_rows(array, start, stop, static))
            try:
                binding.run()
            except Exception as exc:
                raise rows.error(start, stop, reason(exc)) from exc
            for name, buffer in results.items():
                out[name][start:stop] = buffer[: stop - start]

    def _side_by_side(
        self, feed: dict[str, np.ndarray], count: int, rows: Rows
    ) -> Mapping[str, Any]:
        """The batch in parts queued at once on the throughput hint's streams: one part per
        stream, or runs of the static batch (each padded); the outputs joined in row order."""
        static = self.static_batch
        size = static or -(-count // self.streams)
        parts: list[tuple[int, int, dict[str, np.ndarray]]] = []
        for start in range(0, count, size):
            stop = min(start + size, count)
            part = {name: array[start:stop] for name, array in feed.items()}
            if static is not None and stop - start < static:
                part = {name: padded(array, static) for name, array in part.items()}
            parts.append((start, stop, part))
        results = Parallel(self.backend, list(self.outputs), self.run_options).run(
            [part for _, _, part in parts]
        )
        joined: dict[str, list[Any]] = {name: [] for name in self.outputs}
        for (start, stop, part), (outputs, failed) in zip(parts, results):
            if failed is not None:
                low, high, error = 0, stop - start, failed
                if static is None:
                    low, high, error = self._failing_rows(part, failed)
                raise rows.error(start + low, start + high, reason(error)) from failed
            for name, value in (outputs or {}).items():
                expected = len(next(iter(part.values())))
                if np.shape(value)[:1] != (expected,):
                    raise rows.error(
                        start,
                        stop,
                        f"output {name!r} has shape {list(np.shape(value))} for a run of "
                        f"{expected} rows; expected one row per input row",
                    )
                joined[name].append(value[: stop - start])
        return {name: np.concatenate(values) for name, values in joined.items()}

    def _run_once(
        self, feed: Mapping[str, np.ndarray], start: int, stop: int, rows: Rows
    ) -> Mapping[str, Any]:
        try:
            return self.backend.run(dict(feed), list(self.outputs), run_options=self.run_options)
        except Exception as exc:
            low, high, error = self._failing_rows(feed, exc)
            raise rows.error(start + low, start + high, reason(error)) from exc

    def _failing_rows(
        self, feed: Mapping[str, np.ndarray], error: Exception
    ) -> tuple[int, int, Exception]:
        """Which of the rows that failed together fail: where only one half of them fails
        alone, that half, down to one row; else all of them (the fault is no one row's). Only
        a dynamic batch can run a part of its rows; a static one keeps them all."""
        count = len(next(iter(feed.values()))) if feed else 0
        low, high = 0, count
        if self.static_batch is not None or any(
            np.ndim(array) == 0 or len(array) != count for array in feed.values()
        ):
            return low, high, error
        while high - low > 1:
            middle = (low + high) // 2
            failing = []
            for part in ((low, middle), (middle, high)):
                failure = self._failure({n: a[part[0] : part[1]] for n, a in feed.items()})
                if failure is not None:
                    failing.append((part, failure))
            if len(failing) != 1:
                break
            (low, high), error = failing[0]
        return low, high, error

    def _failure(self, feed: Mapping[str, np.ndarray]) -> Exception | None:
        """What running ``feed`` raises (``None``: it runs)."""
        try:
            self.backend.run(dict(feed), list(self.outputs), run_options=self.run_options)
        except Exception as exc:
            return exc
        return None

    def __del__(self) -> None:
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()
