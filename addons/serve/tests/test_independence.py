"""Batching never lets one caller's input reach another's answer (issue 37: T1, T3's serving side,
T9): requests share runs only when the model's rows were proven independent on varied rows,
each row count is re-checked on its first real requests, and every caller owns its arrays.

Every model is real (``onnx.helper``) and every session is ONNX Runtime's; the wrong answers
come from models that are not row by row, the way exported models are: one that trims padding
to the longest real length in the batch, one that scales by a batch-wide maximum, one that
branches on the batch size. Nothing here asserts a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import models
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from ortplug import InMemoryCheckpoint, LocalCheckpoint, OnnxBackend, ServingConfig
from ortplug_serve import ServingWarning
from ortplug_serve.server import Server
from serve_models import callers

FORCED = ServingConfig(max_batch=8, max_delay_ms=5)
CALLERS = 16
vi = helper.make_tensor_value_info


def _constant(value: Any, name: str, dtype: Any) -> Any:
    return numpy_helper.from_array(np.array(value, dtype), name)


def _trim_model() -> bytes:
    """y = 2 * x[:, :max(sum(mask, 1))]: padding trimmed to the batch's longest real length."""
    return models.graph_model(
        [
            helper.make_node("ReduceSum", ["mask", "one"], ["len"], keepdims=0),
            helper.make_node("ReduceMax", ["len"], ["L"], keepdims=1),
            helper.make_node("Slice", ["x", "zero", "L", "one"], ["xs"]),
            helper.make_node("Mul", ["xs", "two"], ["y"]),
        ],
        [
            vi("x", TensorProto.FLOAT, ["batch", "seq", 4]),
            vi("mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [vi("y", TensorProto.FLOAT, ["batch", "len", 4])],
        [
            _constant([1], "one", np.int64),
            _constant([0], "zero", np.int64),
            _constant(2, "two", np.float32),
        ],
    )


def _long_trim_model() -> bytes:
    """The trim of :func:`_trim_model` only for sequences of 20 or more (the generated ones are 16,
    where it returns every position)."""
    return models.graph_model(
        [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
            helper.make_node("GreaterOrEqual", ["seq", "twenty"], ["long"]),
            helper.make_node("ReduceSum", ["mask", "one"], ["len"], keepdims=0),
            helper.make_node("ReduceMax", ["len"], ["longest"], keepdims=1),
            helper.make_node("Where", ["long", "longest", "seq"], ["L"]),
            helper.make_node("Slice", ["x", "zero", "L", "one"], ["xs"]),
            helper.make_node("Mul", ["xs", "two"], ["y"]),
        ],
        [
            vi("x", TensorProto.FLOAT, ["batch", "seq", 4]),
            vi("mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [vi("y", TensorProto.FLOAT, ["batch", "len", 4])],
        [
            _constant([1], "one", np.int64),
            _constant([0], "zero", np.int64),
            _constant(20, "twenty", np.int64),
            _constant(2, "two", np.float32),
        ],
    )


def _threshold_model(threshold: float) -> bytes:
    """y = x / 2 where any value of the whole batch is beyond ``threshold`` in absolute value,
    else y = x: rows interact only above the threshold."""
    return models.graph_model(
        [
            helper.make_node("Abs", ["x"], ["ax"]),
            helper.make_node("ReduceMax", ["ax"], ["top"], keepdims=0),
            helper.make_node("Greater", ["top", "threshold"], ["big"]),
            helper.make_node("Where", ["big", "half", "whole"], ["factor"]),
            helper.make_node("Mul", ["x", "factor"], ["y"]),
        ],
        [vi("x", TensorProto.FLOAT, ["batch", 8])],
        [vi("y", TensorProto.FLOAT, ["batch", 8])],
        [
            _constant(threshold, "threshold", np.float32),
            _constant(0.5, "half", np.float32),
            _constant(1.0, "whole", np.float32),
        ],
    )


def _rows_count_model(low: int, high: int) -> bytes:
    """y = 1.5 * x in runs of ``low`` to ``high`` rows, else y = x (a kernel wrong at some batch
    sizes only, as the provider of T3 was at 5 to 7 rows)."""
    return models.graph_model(
        [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "first"], ["rows"], axis=0),
            helper.make_node("GreaterOrEqual", ["rows", "low"], ["above"]),
            helper.make_node("LessOrEqual", ["rows", "high"], ["below"]),
            helper.make_node("And", ["above", "below"], ["wrong"]),
            helper.make_node("Where", ["wrong", "off", "whole"], ["factor"]),
            helper.make_node("Mul", ["x", "factor"], ["y"]),
        ],
        [vi("x", TensorProto.FLOAT, ["batch", 16])],
        [vi("y", TensorProto.FLOAT, ["batch", 16])],
        [
            _constant(0, "first", np.int64),
            _constant(low, "low", np.int64),
            _constant(high, "high", np.int64),
            _constant(1.5, "off", np.float32),
            _constant(1.0, "whole", np.float32),
        ],
    )


def _server(backend: OnnxBackend) -> Server:
    server = backend.dispatcher
    assert isinstance(server, Server)
    return server


def _served(backend: OnnxBackend) -> tuple[int, int]:
    """(requests, runs) the backend's streams served so far."""
    devices = _server(backend).devices
    return sum(d.requests for d in devices), sum(d.runs for d in devices)


def _from_callers(backend: OnnxBackend, requests: list[dict[str, np.ndarray]]) -> list[Any]:
    """``backend.run`` of every request, from :data:`CALLERS` threads at once; each one's first
    output."""
    return callers(len(requests), lambda i: next(iter(backend.run(requests[i]).values())), CALLERS)


def _wrong(model: bytes, requests: list[dict[str, np.ndarray]], got: list[Any]) -> list[int]:
    """The requests whose answer is not bit-equal to plain ONNX Runtime's run of it alone."""
    alone = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    wrong = []
    for index, (request, result) in enumerate(zip(requests, got)):
        want = alone.run(None, request)[0]
        if result.shape != want.shape or not np.array_equal(result, want):
            wrong.append(index)
    return wrong


def _build(model: bytes, **arguments: Any) -> OnnxBackend:
    return OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(model).resolve(), performance_hint="throughput", **arguments
    )


def _trim_requests(count: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    requests = []
    for _ in range(count):
        length = int(rng.integers(1, 9))
        mask = (np.arange(8) < length).astype(np.int64)[None]
        requests.append({"x": rng.standard_normal((1, 8, 4)).astype(np.float32), "mask": mask})
    return requests


@pytest.mark.parametrize("serving", [FORCED, None], ids=["forced", "measured"])
def test_a_model_that_trims_to_the_longest_length_in_the_batch_is_never_batched(serving) -> None:
    """T1 (batch_mix_repro.py): the old check ran 4 rows of one feed, masks all ones, and found
    them independent; then 256 of 320 callers got their rows cut at another caller's length."""
    model = _trim_model()
    with pytest.warns(
        ServingWarning, match="the shape of output 'y' depends on the input values"
    ) as said:
        backend = OnnxBackend.from_checkpoint(
            InMemoryCheckpoint(model).resolve(), performance_hint="throughput", serving=serving
        )
    serving = [w for w in said if issubclass(w.category, ServingWarning)]
    assert [Path(w.filename).name for w in serving] == [Path(__file__).name]  # the user's line
    with backend:
        assert backend.serving is not None
        assert backend.serving.batching.startswith("requests run one by one: the shape of output")
        requests = _trim_requests(320)
        got = _from_callers(backend, requests)
        assert _wrong(model, requests, got) == []


def test_rows_that_interact_above_a_threshold_are_found_on_values_at_several_magnitudes() -> None:
    """T1: a batch-wide maximum changes every row once one value is beyond 10; the old check's
    rows stayed under it (206 of 320 callers wrong)."""
    model = _threshold_model(10.0)
    with pytest.warns(ServingWarning, match="output 'y' of request .* differs when it shares"):
        backend = _build(model, serving=FORCED)
    with backend:
        rng = np.random.default_rng(1)
        requests = [{"x": (rng.standard_normal((1, 8)) * 4).astype(np.float32)} for _ in range(320)]
        got = _from_callers(backend, requests)
        assert _wrong(model, requests, got) == []
        assert _served(backend)[1] == 320  # one run per request


def test_the_models_samples_are_among_the_rows_checked(tmp_path: Path) -> None:
    """Values only real data holds (beyond every generated magnitude) are checked: the samples
    a checkpoint carries are the first rows of the check."""
    model = _threshold_model(1e6)
    (tmp_path / "model.onnx").write_bytes(model)
    (tmp_path / "samples").mkdir()
    np.save(tmp_path / "samples" / "x.npy", np.full((2, 8), 5e6, np.float32))
    with pytest.warns(ServingWarning, match="differs when it shares a run"):
        backend = OnnxBackend.from_checkpoint(
            LocalCheckpoint(tmp_path / "model.onnx").resolve(),
            performance_hint="throughput",
            serving=FORCED,
        )
    backend.close()


def test_a_model_wrong_at_some_batch_sizes_is_found_before_it_serves() -> None:
    """T3 (throughput_wrong6.py): right at 1, 2 and 4 rows, wrong at 5 to 7; the server stacked
    one-row requests into such runs (78 of 640 wrong). The start checks runs of 2 to 8 rows."""
    model = _rows_count_model(5, 7)
    with pytest.warns(ServingWarning, match="shares a run of [5-7] rows"):
        backend = _build(model, serving=FORCED)
    with backend:
        rng = np.random.default_rng(2)
        requests = [{"x": rng.standard_normal((1, 16)).astype(np.float32)} for _ in range(640)]
        got = _from_callers(backend, requests)
        assert _wrong(model, requests, got) == []


def _queued_at_once(backend: OnnxBackend, requests: list[dict[str, np.ndarray]]) -> list[Any]:
    """Every request queued with ``run_async`` at once (one stream gathers them), waited for."""
    done = threading.Semaphore(0)
    outcomes: list[Any] = [None] * len(requests)

    def settle(index: int) -> Callable[[Any, Any], None]:
        def callback(outputs: Any, error: Any) -> None:
            outcomes[index] = error if error is not None else outputs["y"]
            done.release()

        return callback

    for index, request in enumerate(requests):
        backend.run_async(request, settle(index))
    for _ in requests:
        assert done.acquire(timeout=60)
    return outcomes


def test_a_row_count_the_start_did_not_check_is_checked_on_its_first_requests() -> None:
    """T3, serving side: right at every count the start ran (2 to 8, and 17), wrong at 10 to 12;
    the first batch of 11 rows is run again request by request, its callers get those answers,
    and from then on requests run one by one, said once."""
    model = _rows_count_model(10, 12)
    given = ServingConfig(streams=1, threads_per_stream=1, max_batch=16, max_delay_ms=50)
    backend = _build(model, serving=given)
    with backend:
        assert backend.serving is not None
        assert "checked independent on 17 varied rows" in backend.serving.batching
        rng = np.random.default_rng(3)
        requests = [{"x": rng.standard_normal((1, 16)).astype(np.float32)} for _ in range(11)]
        with pytest.warns(ServingWarning, match="shares a run of 11 rows") as said:
            got = _queued_at_once(backend, requests)
        assert len(said) == 1
        assert _served(backend) == (11, 1)  # one batch: run as one, then request by request
        assert _wrong(model, requests, got) == []
        again = _queued_at_once(backend, requests)
        assert _wrong(model, requests, again) == []
        assert _served(backend) == (22, 12)  # one run per request from then on
        assert _server(backend).unbatched is not None


def test_a_batched_output_whose_shape_follows_the_values_is_never_split() -> None:
    """A group of requests the start did not see (sequences of 24) is trusted after two batched
    runs agreed with their requests alone (every mask of one length); a third batch whose
    output is longer than its group's was (masks of other lengths) is not split: its requests
    run alone, and from then on every request, said once."""
    model = _long_trim_model()
    given = ServingConfig(streams=1, threads_per_stream=1, max_batch=4, max_delay_ms=50)
    with _build(model, serving=given) as backend:
        assert backend.serving is not None and "share runs" in backend.serving.batching
        rng = np.random.default_rng(5)

        def requests(lengths: list[int]) -> list[dict[str, np.ndarray]]:
            return [{"x": rng.standard_normal((1, 24, 4)).astype(np.float32),
                     "mask": (np.arange(24) < n).astype(np.int64)[None]} for n in lengths]  # fmt: skip

        same = [requests([5] * 4) for _ in range(2)]
        for batch in same:
            assert _wrong(model, batch, _queued_at_once(backend, batch)) == []
        assert _served(backend) == (8, 2) and _server(backend).unbatched is None
        mixed = requests([3, 5, 7, 9])
        with pytest.warns(ServingWarning, match="the shape of output 'y' depends on the input"):
            got = _queued_at_once(backend, mixed)
        assert _served(backend) == (12, 3)
        assert _wrong(model, mixed, got) == []


def _memory(array: np.ndarray) -> np.ndarray:
    """The array whose memory ``array`` views (itself when it owns its memory)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def test_a_checked_row_count_is_trusted_and_its_callers_own_their_arrays() -> None:
    """T9: a batched run's outputs were split into views of one buffer, so a caller's array
    read (and wrote) other callers' rows; each caller now gets arrays of its own."""
    weight = numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(8, 4), "w")
    model = models.graph_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [vi("x", TensorProto.FLOAT, ["batch", 8])],
        [vi("y", TensorProto.FLOAT, ["batch", 4])],
        [weight],
    )
    given = ServingConfig(streams=1, threads_per_stream=1, max_batch=8, max_delay_ms=50)
    with _build(model, serving=given) as backend:
        rng = np.random.default_rng(4)
        requests = [{"x": rng.standard_normal((1, 8)).astype(np.float32)} for _ in range(8)]
        got = _queued_at_once(backend, requests)
        assert _served(backend) == (8, 1)  # one batched run of a row count the start checked
        assert _server(backend).unbatched is None
        assert _wrong(model, requests, got) == []
        for index, result in enumerate(got):  # nor through .base: it holds no one else's rows
            others = got[:index] + got[index + 1 :]
            assert not any(np.shares_memory(_memory(result), other) for other in others), index
        kept = [result.copy() for result in got]
        _memory(got[0])[...] = -1  # writing where a caller's array lives changes no one else's
        assert all(np.array_equal(a, b) for a, b in zip(got[1:], kept[1:]))


def test_the_check_runs_more_rows_than_the_largest_batch_served() -> None:
    given = ServingConfig(streams=1, threads_per_stream=1, max_batch=4, max_delay_ms=0)
    with _build(_threshold_model(1e9), serving=given) as backend:
        assert backend.serving is not None
        assert "checked independent on 5 varied rows" in backend.serving.batching
