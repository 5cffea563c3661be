"""The throughput hints: many concurrent callers served by execution streams and a request queue
that batches their requests, on one device or several (``cumulative_throughput``).

Every model is real (``onnx.helper``) and every session is ONNX Runtime's; the second "device"
of the cumulative tests is a misbehaving test provider (``ortplug_misbehaving``), a real
session on ONNX Runtime's Azure provider. Nothing here asserts a time.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import models
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from ortplug import (
    BackendClosedError,
    InMemoryCheckpoint,
    LocalCheckpoint,
    OnnxBackend,
    OptionError,
    ProviderFallbackWarning,
    RunOptionsConfig,
    RunTerminatedError,
    ServingConfig,
    SessionOptionsConfig,
    get_plugin_host,
)
from ortplug.backend import HINT_ENTRY, recorded_serving
from ortplug.testing import demo_model, make_plugin_host
from ortplug_misbehaving import MisbehavingPlugin
from ortplug_serve import ServingWarning
from ortplug_serve.measure import WIN_MARGIN, candidate_layouts
from ortplug_serve.server import Server, _Request
from serve_models import callers, mixing_model

#: Given in full, so nothing is measured (the measured tests say so).
BATCHING = ServingConfig(streams=2, threads_per_stream=1, max_batch=8, max_delay_ms=20)
ONE_STREAM = ServingConfig(streams=1, threads_per_stream=1, max_batch=64, max_delay_ms=50)
WEIGHT = np.arange(12, dtype=np.float32).reshape(4, 3)


def _serving_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("ortplug-serving")]


def _rows_model() -> bytes:
    """y = relu(x @ w + 1), x [batch, 4]: a model whose rows are computed one by one."""
    weight = numpy_helper.from_array(WEIGHT, "w")
    one = numpy_helper.from_array(np.ones(3, np.float32), "one")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["xw"]),
            helper.make_node("Add", ["xw", "one"], ["sum"]),
            helper.make_node("Relu", ["sum"], ["y"]),
        ],
        "rows",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        initializer=[weight, one],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _checkpoint(model: bytes) -> Any:
    return InMemoryCheckpoint(model).resolve()


def _server(backend: OnnxBackend) -> Server:
    """The serving add-on's server that runs ``backend``'s calls."""
    server = backend.dispatcher
    assert isinstance(server, Server)
    return server


def _served(backend: OnnxBackend) -> tuple[int, int]:
    """(requests, runs) the backend's streams served so far."""
    server = _server(backend)
    return sum(d.requests for d in server.devices), sum(d.runs for d in server.devices)


def _host() -> Any:
    """The host the process-wide plugin host probed (what a default build plans for)."""
    return get_plugin_host().host_capabilities()


def _inference_session() -> Any:
    """The drop-in's ``InferenceSession`` (the test skips without the drop-in)."""
    try:
        from ortplug import InferenceSession
    except ImportError:  # the drop-in add-on is not installed here
        pytest.skip("the drop-in (ortplug.InferenceSession) is not installed")
    return InferenceSession


# -- one device ---------------------------------------------------------------------------------


def test_concurrent_callers_each_get_their_own_rows_bit_equal_to_single_runs() -> None:
    checkpoint = _checkpoint(_rows_model())
    single = OnnxBackend.from_checkpoint(checkpoint)
    rng = np.random.default_rng(0)
    requests = [rng.standard_normal((1 + i % 3, 4)).astype(np.float32) for i in range(48)]
    expected = [single.run({"x": x})["y"] for x in requests]
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", serving=BATCHING
    ) as backend:
        assert backend.performance_hint == "throughput"
        got = callers(len(requests), lambda i: backend.run({"x": requests[i]})["y"])
        for index, (want, result) in enumerate(zip(expected, got)):
            assert not isinstance(result, Exception), result
            assert result.shape == want.shape and np.array_equal(result, want), index
        served, runs = _served(backend)
        assert served == len(requests) and runs < served  # some requests shared a run
    single.close()


def test_a_lone_caller_takes_an_idle_stream_and_idle_streams_share_the_queue() -> None:
    """A caller that finds nothing queued runs on an idle stream itself (no hand-over to its
    worker thread); a stream takes only its share of what is queued while the others are idle
    (one that took it all left them idle: batching served fewer requests than not batching)."""
    given = ServingConfig(streams=2, threads_per_stream=1, max_batch=8, max_delay_ms=0)
    x = np.ones((1, 4), np.float32)
    want = np.maximum(x @ WEIGHT + 1, 0)
    with OnnxBackend.from_checkpoint(
        _checkpoint(_rows_model()), performance_hint="throughput", serving=given
    ) as backend:
        server = _server(backend)
        (device,) = server.devices
        first, second = device.streams
        with server._cond:  # the workers wait for the lock: they take nothing meanwhile
            lone = _Request({"x": x}, ["y"], None, server._batching)
            assert server._idle(lone) == (device, first) and first.busy
            first.busy = False
            queued = [_Request({"x": x}, ["y"], None, server._batching) for _ in range(6)]
            server._queue.extend(queued)
            oldest = server._first(device)
            assert oldest is queued[0]
            assert server._share(device, oldest, 8) == 3  # 6 rows, 2 idle streams
            second.busy = True
            assert server._share(device, oldest, 8) == 8  # no other stream idle: up to the limit
            second.busy = False
            server._queue.appendleft(oldest)
            server._cond.notify_all()  # as submit() does
        for request in queued:  # the workers serve them once the lock is free
            assert np.array_equal(request.future.result(timeout=60)[0], want)
        assert np.array_equal(backend.run({"x": x})["y"], want)


def test_on_the_cpu_single_thread_streams_are_the_layout_to_beat() -> None:
    """Measured first and kept unless another layout clearly serves more (one stream with the
    session's own threads was first, and won on noise: 0.5x raw ONNX Runtime on PaddleOCR rec)."""
    layouts = candidate_layouts(ServingConfig(), cpu=True, cpus=4, batch_limit=32)
    assert [(layout.streams, layout.threads) for layout in layouts] == [(4, 1), (1, None), (2, 2)]
    bounded = candidate_layouts(
        ServingConfig(), cpu=True, cpus=2, batch_limit=32, own_threads=False
    )
    assert [(layout.streams, layout.threads) for layout in bounded] == [(2, 1), (1, 2)]


def test_requests_of_other_shapes_never_share_a_run() -> None:
    checkpoint = _checkpoint(models.add_model(["batch", "seq"]))
    lengths = [3, 5, 7, 5, 3, 7, 1, 5] * 3
    rng = np.random.default_rng(1)
    feeds = [
        {n: rng.standard_normal((1, length)).astype(np.float32) for n in "ab"} for length in lengths
    ]
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", serving=BATCHING
    ) as backend:
        got = callers(len(feeds), lambda i: backend.run(feeds[i])["c"])
    for feed, result in zip(feeds, got):
        assert not isinstance(result, Exception), result
        assert np.array_equal(result, feed["a"] + feed["b"])


def test_a_bad_request_fails_alone_and_the_requests_batched_with_it_succeed() -> None:
    checkpoint = _checkpoint(models.gather_model())
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    ids = [np.array([[i % 10, (i + 1) % 10, (i + 2) % 10]]) for i in range(8)]
    ids.insert(4, np.array([[1, 99, 2]]))  # out of the table: ONNX Runtime refuses the run
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", serving=ONE_STREAM
    ) as backend:
        done = threading.Semaphore(0)
        outcomes: list[Any] = [None] * len(ids)

        def settle(index: int) -> Callable[[Any, Any], None]:
            def callback(outputs: Any, error: Any) -> None:
                outcomes[index] = error if error is not None else outputs["y"]
                done.release()

            return callback

        for index, request in enumerate(ids):  # queued at once: one stream batches them
            backend.run_async({"ids": request}, settle(index))
        for _ in ids:
            assert done.acquire(timeout=60)
        served, runs = _served(backend)
    bad = outcomes.pop(4)
    ids.pop(4)
    assert isinstance(bad, RuntimeError) and "out of" in str(bad).lower(), bad
    for request, outcome in zip(ids, outcomes):
        assert not isinstance(outcome, Exception), outcome
        assert np.array_equal(outcome, table[request])
    assert (served, runs) == (9, 1)  # taken as one batch: it failed, then each ran alone


def test_requests_whose_rows_would_mix_run_one_by_one() -> None:
    with pytest.warns(ServingWarning, match="runs requests one by one: .*rows mix"):
        backend = OnnxBackend.from_checkpoint(
            _checkpoint(mixing_model()), performance_hint="throughput", serving=BATCHING
        )
    with backend:
        serving = backend.serving
        assert serving is not None and serving.batching.startswith("requests run one by one")
        assert "rows mix" in serving.batching
        rng = np.random.default_rng(2)
        xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(16)]
        got = callers(len(xs), lambda i: backend.run({"x": xs[i]})["y"])
        for x, y in zip(xs, got):
            assert np.allclose(y, x - x.mean(axis=0, keepdims=True))
        served, runs = _served(backend)
        assert served == runs == len(xs)


def test_a_static_batch_is_filled_by_requests_and_padded() -> None:
    checkpoint = _checkpoint(models.matmul_model(static=True))  # x is [2, 4]
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", serving=BATCHING
    ) as backend:
        assert "static batch of 2" in (backend.serving.batching if backend.serving else "")
        rows = [np.full((1, 4), i, np.float32) for i in range(9)]
        got = callers(len(rows), lambda i: backend.run({"x": rows[i]})["y"])
        whole = backend.run({"x": np.ones((2, 4), np.float32)})["y"]
    for row, result in zip(rows, got):
        assert not isinstance(result, Exception), result
        assert result.shape == (1, 3) and np.array_equal(result, row @ WEIGHT)
    assert whole.shape == (2, 3)


def test_run_into_run_async_and_arun_go_through_the_queue_and_bindings_keep_the_session() -> None:
    checkpoint = _checkpoint(_rows_model())
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    want = np.maximum(x @ WEIGHT + 1, 0)
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", serving=BATCHING
    ) as backend:
        out = {"y": np.empty((2, 3), np.float32)}
        assert backend.run_into({"x": x}, out) is out and np.array_equal(out["y"], want)
        with pytest.raises(OptionError, match=r"output 'y': expected shape \(2, 3\)"):
            backend.run_into({"x": x}, {"y": np.empty((3, 3), np.float32)})
        event, got = threading.Event(), []
        backend.run_async([x], lambda outputs, error: (got.append((outputs, error)), event.set()))
        assert event.wait(60)
        assert got[0][1] is None and np.array_equal(got[0][0]["y"], want)
        assert np.array_equal(asyncio.run(backend.arun({"x": x}))["y"], want)
        before = _served(backend)
        binding = backend.bind().bind_input("x", x).bind_output("y")
        binding.run()
        assert np.array_equal(binding.outputs()["y"], want)
        assert _served(backend) == before  # the binding ran on its own session


def test_run_with_its_own_run_options_goes_through_the_queue_too() -> None:
    """Like run_async and arun with run options: the request runs alone on a stream (it went
    around the server to the first session, which a device dropped at run time may be)."""
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    with OnnxBackend.from_checkpoint(
        _checkpoint(_rows_model()), performance_hint="throughput", serving=BATCHING
    ) as backend:
        got = backend.run({"x": x}, run_options=RunOptionsConfig(tag="mine"))
        assert np.array_equal(got["y"], np.maximum(x @ WEIGHT + 1, 0))
        assert _served(backend) == (1, 1)


def test_callers_that_time_out_or_are_cancelled_leave_the_others_served() -> None:
    checkpoint = _checkpoint(models.slow_loop_model())
    x = np.eye(64, dtype=np.float32)
    given = ServingConfig(streams=1, threads_per_stream=1, max_batch=1, max_delay_ms=0)
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", serving=given
    ) as backend:
        blocked = threading.Event()
        backend.run_async({"trips": np.array(10_000), "x": x}, lambda *_: blocked.set())

        async def callers() -> tuple[Any, Any, Any]:
            feed = {"trips": np.array(3), "x": x}
            cancelled = asyncio.ensure_future(backend.arun(feed))
            timed_out = asyncio.wait_for(backend.arun(feed), timeout=0.001)
            served = asyncio.ensure_future(backend.arun(feed))
            await asyncio.sleep(0)
            cancelled.cancel()
            outcomes = await asyncio.gather(cancelled, timed_out, served, return_exceptions=True)
            return outcomes[0], outcomes[1], outcomes[2]

        cancelled, timed_out, served = asyncio.run(callers())
        assert blocked.wait(60)
        assert isinstance(cancelled, asyncio.CancelledError)
        assert isinstance(timed_out, asyncio.TimeoutError)
        assert np.array_equal(served["y"], x)
        assert _served(backend) == (2, 2)  # the blocker and the served one: the others never ran
        assert np.array_equal(backend.run({"trips": np.array(1), "x": x})["y"], x)


def _queued_behind_a_run_that_never_ends(backend: OnnxBackend) -> list[threading.Event]:
    """One endless run on the only stream, then five requests queued behind it; their events are
    set when each one's callback has come (its error in ``event.error``)."""
    x = np.eye(64, dtype=np.float32)
    events = []
    for trips in (10**9, 1, 1, 1, 1, 1):
        event = threading.Event()

        def callback(outputs: Any, error: Any, event: Any = event) -> None:
            event.error = error
            event.set()

        backend.run_async({"trips": np.array(trips), "x": x}, callback)
        events.append(event)
    return events


def test_close_while_requests_queue_fails_them_clearly_and_ends_every_thread() -> None:
    checkpoint = _checkpoint(models.slow_loop_model())
    given = ServingConfig(streams=1, threads_per_stream=1, max_batch=1, max_delay_ms=0)
    backend = OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput", serving=given)
    server = _server(backend)
    assert _serving_threads()
    events = _queued_behind_a_run_that_never_ends(backend)
    serving = backend.serving
    backend.close()
    assert not _serving_threads()
    assert backend.dispatcher is None  # what it served is still told
    assert backend.serving is serving and backend.performance_hint == "throughput"
    assert all(not device.streams for device in server.devices)  # no session kept by the queue
    for event in events:
        assert event.wait(60)
        assert isinstance(event.error, BackendClosedError), event.error  # type: ignore[attr-defined]
        assert "closed" in str(event.error)  # type: ignore[attr-defined]
    with pytest.raises(BackendClosedError):
        backend.run({"trips": np.array(1), "x": np.eye(64, dtype=np.float32)})


def test_terminate_while_requests_queue_fails_them_until_reset() -> None:
    checkpoint = _checkpoint(models.slow_loop_model())
    given = ServingConfig(streams=1, threads_per_stream=1, max_batch=1, max_delay_ms=0)
    x = np.eye(64, dtype=np.float32)
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", serving=given
    ) as backend:
        events = _queued_behind_a_run_that_never_ends(backend)
        backend.terminate()
        for event in events:
            assert event.wait(60)
            assert isinstance(event.error, RunTerminatedError), event.error  # type: ignore[attr-defined]
        with pytest.raises(RunTerminatedError, match="reset_terminate"):
            backend.run({"trips": np.array(1), "x": x})
        backend.reset_terminate()
        assert np.array_equal(backend.run({"trips": np.array(2), "x": x})["y"], x)


def _resident_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads /proc/self/statm")
def test_nothing_leaks_after_close() -> None:
    checkpoint = _checkpoint(_rows_model())
    x = np.ones((1, 4), np.float32)
    before = {t.ident for t in threading.enumerate()}

    def cycle() -> None:
        backend = OnnxBackend.from_checkpoint(
            checkpoint, performance_hint="throughput", serving=BATCHING
        )
        callers(8, lambda _: backend.run({"x": x}))
        backend.close()

    for _ in range(3):  # ONNX Runtime's and numpy's one-time allocations
        cycle()
    gc.collect()
    start = _resident_mib()
    for _ in range(20):
        cycle()
    gc.collect()
    assert {t.ident for t in threading.enumerate()} <= before
    assert _resident_mib() - start < 40  # 20 backends of 2 streams each, all released


def test_a_backend_dropped_without_close_stops_its_threads() -> None:
    backend = OnnxBackend.from_checkpoint(
        _checkpoint(_rows_model()), performance_hint="throughput", serving=BATCHING
    )
    assert _serving_threads()
    del backend
    gc.collect()
    assert not _serving_threads()


# -- measured, recorded -------------------------------------------------------------------------


def test_the_first_throughput_build_measures_and_later_builds_read_the_record() -> None:
    checkpoint = _checkpoint(_rows_model())
    first = OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")
    serving = first.serving
    assert serving is not None and serving.source.startswith("measured on this model's first")
    (device,) = serving.devices
    assert device.label == "cpu" and device.serving and device.layout is not None
    assert len(device.trials) >= 2 and device.requests_per_s is not None
    (chosen,) = [t for t in device.trials if t.layout == device.layout]
    assert device.requests_per_s == chosen.requests_per_s
    assert all(t.requests_per_s <= WIN_MARGIN * chosen.requests_per_s for t in device.trials)
    assert any(line.startswith("hint       throughput: measured") for line in first.report.lines())
    assert first.report.to_dict()["serving"]["devices"][0]["label"] == "cpu"
    first.close()
    second = OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")
    assert second.serving is not None and second.serving.source.startswith("recorded: measured")
    assert second.serving.devices[0].layout == device.layout
    second.close()
    recorded = recorded_serving(checkpoint, _host())  # for ortplug info and bench
    assert recorded is not None and recorded[1].devices[0].layout == device.layout


def test_a_build_with_a_stated_configuration_keeps_its_own_record() -> None:
    """A build fixing some of the configuration measured the rest under it and replaced the
    unconstrained record: the next plain build measured again, and ``ortplug info`` showed the
    constrained layout as what a throughput build here serves with."""
    checkpoint = _checkpoint(_rows_model())
    with OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput") as first:
        layout = first.serving.devices[0].layout if first.serving else None
        host = _host()
    stated = ServingConfig(max_batch=2, max_delay_ms=1)
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", serving=stated
    ) as constrained:
        assert constrained.serving is not None
        assert constrained.serving.devices[0].layout.max_batch <= 2
    recorded = recorded_serving(checkpoint, host)
    assert recorded is not None and recorded[1].devices[0].layout == layout
    with OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput") as again:
        assert again.serving is not None and again.serving.source.startswith("recorded")
    own = recorded_serving(checkpoint, host, "throughput", stated)
    assert own is not None and own[1].devices[0].layout.max_batch <= 2


def test_measuring_off_serves_with_the_stated_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORTPLUG_MEASURE", "0")
    with OnnxBackend.from_checkpoint(
        _checkpoint(_rows_model()), performance_hint="throughput"
    ) as backend:
        assert backend.serving is not None
        assert backend.serving.source.startswith("defaults, not measured")
        layout = backend.serving.devices[0].layout
        assert layout is not None and layout.max_batch == 8 and layout.max_delay_ms == 0
        assert layout.streams * (layout.threads or 1) <= (_host().fact("cpu", "usable_cpus") or 1)


def test_the_latency_hint_is_todays_path() -> None:
    with OnnxBackend.from_checkpoint(_checkpoint(_rows_model())) as backend:
        assert backend.performance_hint == "latency" and backend.serving is None
        assert backend.dispatcher is None and backend.report.serving is None
        assert (
            getattr(backend._served.run, "func", None) == backend._live().run
        )  # ONNX Runtime's own


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"performance_hint": "fast"}, "performance_hint: expected one of latency, throughput, "
                                       "cumulative_throughput, got 'fast'"),
        ({"serving": BATCHING}, "serving: used only with performance_hint='throughput'"),
        ({"performance_hint": "throughput", "startup_fallback": True},
         "expected startup_fallback=False"),
    ],
)  # fmt: skip
def test_a_bad_hint_is_one_clear_line(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        OnnxBackend.from_checkpoint(_checkpoint(_rows_model()), **arguments)


def test_a_bad_serving_config_names_the_field() -> None:
    with pytest.raises(OptionError, match=r"max_batch: expected a whole number from 1 to 4096"):
        ServingConfig(max_batch=0)
    with pytest.raises(OptionError, match=r"max_delay_ms: expected milliseconds from 0 to 1000"):
        ServingConfig(max_delay_ms=-1)
    too_many = ServingConfig(streams=64, threads_per_stream=64)
    with pytest.raises(
        OptionError, match=r"within the \d+ CPUs? this process may use, got 64 x 64"
    ):
        OnnxBackend.from_checkpoint(
            _checkpoint(_rows_model()), performance_hint="throughput", serving=too_many
        )


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a budget under the process's CPUs")
def test_a_cpu_budget_bounds_every_layout_measured_and_given() -> None:
    """ServingConfig(cpus=1), as a Ray actor given one CPU passes: no layout uses more."""
    with OnnxBackend.from_checkpoint(
        _checkpoint(_rows_model()), performance_hint="throughput", serving=ServingConfig(cpus=1)
    ) as backend:
        serving = backend.serving
        assert serving is not None and serving.source.startswith("measured")
        layouts = [trial.layout for device in serving.devices for trial in device.trials]
        assert layouts and all(layout.streams * (layout.threads or 0) == 1 for layout in layouts)
    too_many = ServingConfig(streams=2, threads_per_stream=1, cpus=1)
    with pytest.raises(
        OptionError, match=r"within the 1 CPU given \(ServingConfig.cpus\), got 2 x 1"
    ):
        OnnxBackend.from_checkpoint(
            _checkpoint(_rows_model()), performance_hint="throughput", serving=too_many
        )


# -- the drop-in ----------------------------------------------------------------------------------


def test_the_dropin_serves_through_the_queue_when_its_session_options_ask(tmp_path: Path) -> None:
    path = tmp_path / "rows.onnx"
    path.write_bytes(_rows_model())
    options = ort.SessionOptions()
    options.add_session_config_entry(HINT_ENTRY, "throughput")
    InferenceSession = _inference_session()
    session = InferenceSession(str(path), options)
    backend = session.backend
    assert backend is not None and backend.performance_hint == "throughput"
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    got = callers(16, lambda _: session.run(None, {"x": x})[0])
    for result in got:
        assert np.array_equal(result, np.maximum(x @ WEIGHT + 1, 0))
    assert _served(backend)[0] >= 16
    binding = session.io_binding()  # ONNX Runtime's own, on the session
    binding.bind_cpu_input("x", x)
    binding.bind_output("y")
    session.run_with_iobinding(binding)
    assert np.array_equal(binding.copy_outputs_to_cpu()[0], got[0])
    plain = InferenceSession(str(path))
    assert "run" not in vars(plain)  # the latency path: ONNX Runtime's run, nothing in between
    backend.close()


def _unrecorded_layout_warnings(caught: list[warnings.WarningMessage]) -> set[str]:
    return {
        Path(w.filename).name
        for w in caught
        if "the measured serving layout is not recorded" in str(w.message)
    }


def test_an_unrecorded_serving_layouts_warning_points_at_the_users_line(
    ortplug_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The throughput build's warning that its measured layout cannot be recorded names this
    file, from ``from_checkpoint`` and from the drop-in (a fixed stacklevel pointed inside
    ortplug on both)."""
    monkeypatch.setenv("ORTPLUG_PLUGINS", "cpu")
    ortplug_cache.mkdir(parents=True, exist_ok=True)
    (ortplug_cache / "serving").write_text("a file where the serving records' folder goes")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend = OnnxBackend.from_checkpoint(
            LocalCheckpoint(demo_model()).resolve(), performance_hint="throughput"
        )
    backend.close()
    assert _unrecorded_layout_warnings(caught) == {Path(__file__).name}
    options = ort.SessionOptions()
    options.add_session_config_entry("ortplug.performance_hint", "throughput")
    InferenceSession = _inference_session()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = InferenceSession(str(demo_model()), sess_options=options)
    assert session.backend is not None and session.backend.performance_hint == "throughput"
    session.backend.close()
    assert _unrecorded_layout_warnings(caught) == {Path(__file__).name}


# -- several devices ------------------------------------------------------------------------------


def test_cumulative_plans_one_device_per_gpu_the_host_facts_list() -> None:
    from hosts import L4, linux_gpu
    from ortplug.session.plan import SessionPlan
    from ortplug_cpu import CpuProvider
    from ortplug_serve.devices import device_plans

    ortplug_offer_providers = pytest.importorskip("ortplug_cuda.plugin").ortplug_offer_providers

    bigger = {**L4, "index": 1, "memory_mib": 2 * L4["memory_mib"]}
    host = linux_gpu(devices=[L4, bigger], device_count=2)
    checkpoint = _checkpoint(_rows_model())
    offer = next(iter(ortplug_offer_providers(checkpoint.metadata, host)))

    def plan(*chain: Any) -> SessionPlan:
        return SessionPlan(chain, ("",) * len(chain), SessionOptionsConfig(), False, host,
                           (None,) * len(chain))  # fmt: skip

    cuda, cpu = plan(offer.config, CpuProvider()), plan(CpuProvider())
    devices = device_plans(cuda, [cpu], checkpoint, every=True)
    assert [d.label for d in devices] == ["cuda:1", "cuda:0", "cpu"]  # the plugin's pick first
    assert [d.plan.chain[0].to_ort()[1]["device_id"] for d in devices[:2]] == ["1", "0"]
    assert devices[1].plan.chain[1:] == cuda.chain[1:] and devices[1].plan.host is host
    assert [d.label for d in device_plans(cuda, [cpu], checkpoint, every=False)] == ["cuda:1"]
    alone = type(offer.config)(device_id=0)
    assert alone.each_device(linux_gpu()) == (alone,)  # one GPU: itself


def _slow_second_device() -> Any:
    return make_plugin_host(("slow", MisbehavingPlugin("slow", delay_s=0.001)))


def test_cumulative_throughput_serves_on_the_cpu_and_a_second_device() -> None:
    checkpoint = _checkpoint(_rows_model())
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, 4)).astype(np.float32) for _ in range(64)]
    given = ServingConfig(streams=1, threads_per_stream=1, max_batch=4, max_delay_ms=0)
    with OnnxBackend.from_checkpoint(checkpoint) as single:
        expected = [single.run({"x": x})["y"] for x in xs]
    with OnnxBackend.from_checkpoint(
        checkpoint,
        plugins=_slow_second_device(),
        performance_hint="cumulative_throughput",
        serving=given,
    ) as backend:
        serving = backend.serving
        assert serving is not None
        assert {d.label for d in serving.devices if d.serving} == {"cpu", "misbehaving"}
        assert any(
            line.startswith("device     misbehaving [misbehaving, cpu]")
            for line in backend.report.lines()
        )
        got = callers(len(xs), lambda i: backend.run({"x": xs[i]})["y"])
        for want, y in zip(expected, got):
            assert not isinstance(y, Exception), y
            assert np.array_equal(y, want)  # bit-equal to single runs on the CPU provider
        server = _server(backend)
        assert all(device.requests for device in server.devices)


def test_a_device_failing_at_run_time_is_dropped_and_its_requests_run_elsewhere() -> None:
    checkpoint = _checkpoint(_rows_model())
    plugins = make_plugin_host(("big", MisbehavingPlugin("big_batch")))
    given = ServingConfig(streams=1, threads_per_stream=1, max_batch=4, max_delay_ms=0)
    big = np.linspace(-1, 1, 64 * 4, dtype=np.float32).reshape(64, 4)  # the test provider fails
    with OnnxBackend.from_checkpoint(checkpoint) as single:
        want = single.run({"x": big})["y"]
    with OnnxBackend.from_checkpoint(
        checkpoint, plugins=plugins, performance_hint="cumulative_throughput", serving=given
    ) as backend:
        server = _server(backend)
        assert len(server.alive) == 2
        with pytest.warns(ProviderFallbackWarning, match="misbehaving failed at run time"):
            for _ in range(200):  # each device takes requests in turn: the bad one soon gets one
                got = callers(4, lambda _: backend.run({"x": big})["y"])
                for result in got:
                    assert not isinstance(result, Exception), result
                    assert np.array_equal(result, want)
                if len(server.alive) == 1:
                    break
        assert [d.label for d in server.alive] == ["cpu"]
        (dropped,) = [d for d in server.devices if d.dropped]
        assert "failed at run time" in dropped.dropped and "ran elsewhere" in dropped.dropped
        for thread in _serving_threads():
            if "misbehaving" in thread.name:
                thread.join(60)
                assert not thread.is_alive()  # the dropped device's stream ended
        assert np.array_equal(backend.run({"x": big})["y"], want)
