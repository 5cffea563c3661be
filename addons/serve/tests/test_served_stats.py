"""What a throughput build served (``ortplug_serve.served``): rows per stream, queueing delay and
batch fill, counted by the server on real ONNX Runtime sessions. The counters must agree with
the requests the test made; nothing here asserts a time."""

from __future__ import annotations

import json

import attrs
import models
import numpy as np
import onnxruntime as ort
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend, ServingConfig
from ortplug_serve import DeviceStats, ServedStats, ServingWarning, served
from ortplug_serve.server import Server, Stream
from serve_models import WEIGHT, callers, mixing_model, rows_model

BATCHING = ServingConfig(streams=2, threads_per_stream=1, max_batch=8, max_delay_ms=20)


def _throughput(model: bytes, given: ServingConfig = BATCHING) -> OnnxBackend:
    checkpoint = InMemoryCheckpoint(model).resolve()
    return OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput", serving=given)


def _consistent(stats: ServedStats) -> None:
    """What holds of any snapshot: totals are the streams' sums, delays and shares in range."""
    for device in stats.devices:
        assert device.requests == sum(s.requests for s in device.streams)
        assert device.rows >= device.requests  # a request of no known rows counts one row
        assert device.runs <= device.requests
        assert device.max_wait_s >= 0.0 and device.waited_s >= 0.0
        if device.requests:
            mean = device.mean_wait_ms
            assert mean is not None and 0.0 <= mean <= device.max_wait_s * 1000.0 + 1e-9
        if device.fill is not None:
            assert 0.0 < device.fill <= 1.0
            assert device.shared_runs <= device.runs
        for stream in device.streams:
            assert stream.seconds >= 0.0 and stream.busy_s >= 0.0
            assert 0.0 <= stream.busy <= 1.0 and stream.rows_per_s >= 0.0
    assert stats.seconds >= 0.0 and stats.rows == sum(d.rows for d in stats.devices)
    json.dumps(stats.to_dict())  # JSON-ready


def test_rows_served_are_the_rows_requested_and_batches_fill_within_the_limit() -> None:
    rng = np.random.default_rng(0)
    requests = [rng.standard_normal((1 + i % 3, 4)).astype(np.float32) for i in range(48)]
    with _throughput(rows_model()) as backend:
        server = backend.dispatcher
        assert isinstance(server, Server)
        before = served(backend)
        assert before is not None and before.requests == 0 and before.rows == 0
        (device,) = before.devices
        assert device.fill is None and device.mean_wait_ms is None and device.batch_limit == 8
        got = callers(len(requests), lambda i: backend.run({"x": requests[i]})["y"])
        for x, y in zip(requests, got):
            assert not isinstance(y, Exception), y
            assert np.allclose(y, x @ WEIGHT, rtol=1e-5, atol=1e-5)
        stats = served(backend)
    assert stats is not None
    _consistent(stats)
    (device,) = stats.devices
    assert stats.requests == device.requests == len(requests)
    assert stats.rows == sum(x.shape[0] for x in requests)
    assert len(device.streams) == 2 and device.runs < device.requests  # some shared a run
    assert device.shared_runs == device.runs and device.fill is not None
    assert before.requests == 0  # a snapshot does not move with the server
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        stats.seconds = 0.0  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        device.streams[0].rows = 0  # type: ignore[misc]
    assert served(backend) is None  # a closed backend has no server
    closed = server.served()  # the server keeps what it served in all
    assert (closed.requests, closed.rows) == (stats.requests, stats.rows)
    assert server.served() is closed


def test_requests_that_run_one_by_one_count_no_batch_fill() -> None:
    with pytest.warns(ServingWarning, match="rows mix"):
        backend = _throughput(mixing_model())
    with backend:
        xs = [np.full((2, 4), i, np.float32) for i in range(16)]
        got = callers(len(xs), lambda i: backend.run({"x": xs[i]})["y"])
        assert all(not isinstance(y, Exception) for y in got)
        stats = served(backend)
    assert stats is not None
    _consistent(stats)
    (device,) = stats.devices
    # not batched, its rows are not looked at: each request counts one row
    assert (device.requests, device.runs, device.rows) == (16, 16, 16)
    assert device.shared_runs == 0 and device.fill is None
    assert "no shared run" in device.describe()


def test_a_static_batch_fills_up_to_its_rows() -> None:
    with _throughput(models.matmul_model(static=True)) as backend:  # x is [2, 4]
        rows = [np.full((1, 4), i, np.float32) for i in range(9)]
        got = callers(len(rows), lambda i: backend.run({"x": rows[i]})["y"])
        assert all(not isinstance(y, Exception) for y in got)
        stats = served(backend)
    assert stats is not None
    _consistent(stats)
    (device,) = stats.devices
    assert device.batch_limit == 2 and (device.requests, device.rows) == (9, 9)
    assert device.fill is not None and device.filled_rows == 9


def test_streams_replaced_while_serving_keep_what_they_served() -> None:
    with _throughput(rows_model()) as backend:
        server = backend.dispatcher
        assert isinstance(server, Server)
        x = np.ones((3, 4), np.float32)
        for _ in range(4):
            backend.run({"x": x})
        (device,) = server.devices
        old = device.streams[0]
        assert server.restream(device, [Stream(old.session, ort.RunOptions())])
        for _ in range(2):
            backend.run({"x": x})
        stats = server.served()
    _consistent(stats)
    (shown,) = stats.devices
    assert [s.retired for s in shown.streams] == [False, True, True]
    assert shown.streams[0].requests == 2 and (shown.requests, shown.rows) == (6, 18)
    assert "1 stream," in shown.describe()


def test_the_latency_hint_serves_through_no_server() -> None:
    with OnnxBackend.from_checkpoint(InMemoryCheckpoint(rows_model()).resolve()) as backend:
        backend.run({"x": np.ones((1, 4), np.float32)})
        assert served(backend) is None


def test_the_lines_say_each_devices_traffic() -> None:
    with _throughput(rows_model()) as backend:
        backend.run({"x": np.ones((2, 4), np.float32)})
        stats = served(backend)
    assert stats is not None
    (line,) = stats.lines()
    assert line.startswith("served     cpu: 2 streams, ") and "1 request in 1 run," in line
    assert isinstance(stats.devices[0], DeviceStats)
