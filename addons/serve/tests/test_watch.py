"""The server watching itself: its layout against the latency path on live traffic.

The decision (:func:`ortplug_serve.watch.compare`, :func:`~ortplug_serve.watch.decide`) is fed
numbers; the switches run on real servers of real models (``onnx.helper``) with real ONNX
Runtime sessions while callers run, each caller's rows compared with a plain session's; the
record a verdict rewrites is read back by a second build. Nothing here asserts a time.
"""

from __future__ import annotations

import re
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend, ServingConfig, get_plugin_host
from ortplug.backend import recorded_serving
from ortplug.errors import OptionError
from ortplug_serve import ServingWarning, served
from ortplug_serve.config import Layout, Trial
from ortplug_serve.server import LONE_AFTER, Server, Stream
from ortplug_serve.watch import (
    ALTERNATIVES,
    MARGIN,
    PAIRS,
    Watch,
    Window,
    alternatives,
    compare,
    decide,
    window_of,
)
from serve_models import WEIGHT, callers, rows_model

TWO = Layout(2, 1, 1, 0.0)
ONE = Layout(1, None, 1, 0.0)
BATCHED = Layout(2, 1, 8, 0.0)
#: Given in full: nothing measured, nothing watched (the tests switch the server themselves).
GIVEN = ServingConfig(streams=2, threads_per_stream=1, max_batch=8, max_delay_ms=0)


def _windows(layout: float, latency: float, requests: int = 40) -> list[Window]:
    """:data:`PAIRS` pairs of 0.25 s windows serving those rows per second, the order turning."""
    out = []
    for index in range(PAIRS):
        pair = [Window("layout", requests, round(layout / 4), 0.25),
                Window("latency", requests, round(latency / 4), 0.25)]  # fmt: skip
        out += pair if index % 2 == 0 else pair[::-1]
    return out


def test_a_layout_ahead_of_the_latency_path_is_kept() -> None:
    result = compare(_windows(400, 300))
    assert result.verdict == "kept"
    assert result.layout_rows_per_s == pytest.approx(400) and result.ratio == pytest.approx(4 / 3)
    decision = decide(result, TWO, [ONE])
    assert (decision.action, decision.layout) == ("layout", TWO)
    assert (
        decision.line.startswith("layout kept: 2 streams x 1 thread") and "1.33x" in decision.line
    )


def test_a_layout_within_the_margin_is_kept_so_the_server_does_not_flap() -> None:
    assert compare(_windows(300 / MARGIN + 2, 300)).verdict == "kept"
    assert compare(_windows(300 / MARGIN - 2, 300)).verdict == "behind"


def test_the_ratio_is_taken_pair_by_pair_so_traffic_that_changes_weighs_on_both() -> None:
    quiet, busy = _windows(80, 100)[:2], _windows(800, 1000)[2:4]
    result = compare([*quiet, *busy])
    assert result.verdict == "behind" and result.ratio == pytest.approx(0.8)
    assert result.counted == 4


def test_a_layout_behind_in_some_pairs_only_is_kept_a_moment_of_the_host_decides_nothing() -> None:
    """Two pairs behind, one far ahead (the host slowed while the layout's window of that pair
    ran, say): the geometric mean is under the margin, but the layout is kept."""
    slow, fast = _windows(150, 300)[:4], _windows(1000, 300)[4:]
    result = compare([*slow, *fast])
    assert result.ratio is not None and result.ratio * MARGIN < 1
    assert result.verdict == "kept" and result.counted == 6
    assert compare([*slow, *_windows(150, 300)[4:]]).verdict == "behind"


def test_a_layout_that_falls_behind_is_replaced_by_the_next_one_measured() -> None:
    result = compare(_windows(200, 300))
    assert result.verdict == "behind"
    decision = decide(result, TWO, [ONE, BATCHED])
    assert (decision.action, decision.layout) == ("next", ONE)
    assert "fell behind" in decision.line and "0.67x" in decision.line


def test_when_no_layout_beats_the_latency_path_the_latency_path_serves_and_says_so() -> None:
    decision = decide(compare(_windows(250, 300)), ONE, [])
    assert decision.action == "latency"
    assert "no layout beats the latency path" in decision.line
    assert "1 stream with the session's own threads" in decision.line


def _looks(served: list[int], rows_each: int = 2) -> list[tuple[float, int, int]]:
    """Looks at the counters every 50 ms from t = 10 s: requests served so far, each 2 rows."""
    return [(10 + 0.05 * index, count, rows_each * count) for index, count in enumerate(served)]


def test_a_window_spans_the_looks_that_saw_requests_served_not_the_idle_ends() -> None:
    """Traffic that starts after the window began and stops before it ends (a caller's turn)
    does not dilute the window's rate: the rows between the first and last look that moved."""
    idle_start, busy = [100, 100, 100], [110, 120, 130, 140, 150]
    assert window_of("layout", _looks(idle_start + busy)) is None  # 0.20 s served: not yet
    window = window_of("layout", _looks([*idle_start, *busy, 160]))
    assert window is not None and (window.requests, window.rows) == (50, 100)
    assert window.seconds == pytest.approx(0.25)  # from 10.15 s, not from the start at 10 s
    assert window.rows_per_s == pytest.approx(400)  # not the 300 over the window's 0.4 s


def test_a_window_in_which_the_traffic_paused_counts_nothing() -> None:
    burst = [0, 10, 20, 30]  # 0.15 s of requests, then none for longer than a pause
    assert window_of("latency", _looks([*burst, *[30] * 6])) is None  # a short gap: waits
    paused = window_of("latency", _looks([*burst, *[30] * 7]))
    assert paused is not None and (paused.requests, paused.rows) == (0, 0)
    assert compare([paused, paused] * PAIRS).verdict == "undecided"


@pytest.mark.parametrize(
    "windows",
    [
        [],  # no traffic at all
        [Window("layout", 0, 0, 0.25), Window("latency", 0, 0, 0.25)] * PAIRS,  # idle
        _windows(400, 300, requests=3),  # a trickle: no window served enough
        [w for w in _windows(400, 300) if w.path == "layout"],  # one path only
        _windows(400, 300)[:3],  # the traffic stopped mid-comparison
    ],
)
def test_too_little_traffic_decides_nothing(windows: list[Window]) -> None:
    result = compare(windows)
    assert result.verdict == "undecided" and result.ratio is None
    decision = decide(result, TWO, [ONE])
    assert decision.action == "wait" and "too little traffic" in decision.line


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (("fast", 1, 1, 0.25), "path: expected one of layout, latency, got 'fast'"),
        (("layout", -1, 1, 0.25), "requests: expected a whole number >= 0, got -1"),
        (("layout", 1, 1.5, 0.25), "rows: expected a whole number >= 0, got 1.5"),
        (("layout", 1, 1, float("nan")), "seconds: expected a number >= 0, got nan"),
    ],
)
def test_a_bad_window_is_one_line_naming_the_field(arguments: Any, fragment: str) -> None:
    with pytest.raises(OptionError, match="^" + re.escape(fragment) + "$"):
        Window(*arguments)


def test_a_margin_under_one_is_refused() -> None:
    with pytest.raises(OptionError, match=r"^margin: expected a number >= 1, got 0.5$"):
        compare(_windows(1, 1), margin=0.5)


def test_the_alternatives_are_the_best_other_layouts_measured() -> None:
    trials = [Trial(TWO, 500.0), Trial(ONE, 300.0), Trial(BATCHED, 450.0), Trial(TWO, 490.0)]
    assert alternatives(trials, TWO) == [BATCHED][:ALTERNATIVES]
    assert alternatives([Trial(TWO, 1.0)], TWO) == []


def _server(backend: OnnxBackend) -> Server:
    server = backend.dispatcher
    assert isinstance(server, Server)
    return server


def _wait_requests(server: Server, more: int) -> None:
    """Until the server served ``more`` requests from now (a bound on the loop, not a timing
    claim)."""
    count = server.served().requests + more
    for _ in range(20000):
        if server.served().requests >= count:
            return
        server.stopping.wait(0.001)
    raise AssertionError(f"the server served {server.served().requests} of {count} requests")


def _check_rows(results: list[list[tuple[np.ndarray, np.ndarray]]]) -> None:
    """Every caller's answers are what a plain ONNX Runtime session gives its rows alone."""
    plain = ort.InferenceSession(rows_model(), providers=["CPUExecutionProvider"])
    answered = 0
    for result in results:
        assert not isinstance(result, Exception), result
        for x, y in result:
            (expected,) = plain.run(["y"], {"x": x})
            np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
            answered += 1
    assert answered > 0


def test_switching_paths_and_layouts_while_callers_run_keeps_each_callers_rows() -> None:
    with OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(rows_model()).resolve(), performance_hint="throughput", serving=GIVEN
    ) as backend:
        server = _server(backend)
        assert server.watch is None  # a layout given in full is not watched
        (device,) = server.devices
        session = device.streams[0].session
        latency = Stream(session, ort.RunOptions())
        done = threading.Event()

        def switch() -> None:
            _wait_requests(server, 40)
            assert server.serve_latency(device, latency) and server.on_latency_path
            _wait_requests(server, 80)
            assert server.restream(device, [Stream(session, ort.RunOptions()) for _ in range(2)])
            assert server.serve_latency(device, None) and not server.on_latency_path
            _wait_requests(server, 80)
            assert server.serve_latency(device, latency)
            _wait_requests(server, 80)
            assert server.serve_latency(device, None)
            _wait_requests(server, 40)
            done.set()

        switcher = threading.Thread(target=switch)
        switcher.start()

        def caller(index: int) -> list[tuple[np.ndarray, np.ndarray]]:
            rng = np.random.default_rng(index)
            got = []
            while not done.is_set() or len(got) < 4:
                x = rng.standard_normal((1 + index % 3, 4)).astype(np.float32)
                got.append((x, backend.run({"x": x})["y"]))
            return got

        results = callers(8, caller)
        switcher.join()
        stats = served(backend)
    _check_rows(results)
    assert stats is not None
    (shown,) = stats.devices
    paths = [s for s in shown.streams if s.latency]
    assert len(paths) == 1 and paths[0].requests >= 2 * 80 - 2 * 8  # its phases, less a switch's
    assert sum(s.requests for s in shown.streams) == shown.requests == sum(map(len, results))
    assert "latency path" not in shown.describe()  # it serves no more


class _Gated:
    """A real session whose runs wait for ``go`` (a caller held in its run, as a long one is)."""

    def __init__(self, session: Any) -> None:
        self.session, self.go, self.entered = session, threading.Event(), threading.Event()

    def run(self, *args: Any) -> Any:
        self.entered.set()
        assert self.go.wait(30), "the test never let the run go"
        return self.session.run(*args)


def test_a_lone_callers_requests_run_with_the_sessions_own_threads_others_on_the_streams() -> None:
    """A lone caller of a throughput build ran on one single-thread stream (0.64-0.71x raw ONNX
    Runtime for magika on 2 CPUs), and the watch, comparing on such traffic, dropped a layout
    that served many callers well; now a request that finds nothing queued or running, as the
    one before it did, runs on the latency path (one moment of idle streams is not enough)."""
    assert LONE_AFTER == 2  # the counts below
    with OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(rows_model()).resolve(), performance_hint="throughput", serving=GIVEN
    ) as backend:
        server = _server(backend)
        (device,) = server.devices
        gated = _Gated(device.streams[0].session)
        lone = Stream(gated, ort.RunOptions())
        assert server.serve_lone_requests(device, lone) and not server.on_latency_path
        x = np.arange(4, dtype=np.float32).reshape(1, 4)

        def counts() -> tuple[int, int]:
            return lone.requests, sum(s.requests for s in device.streams)

        gated.go.set()
        expected = backend.run({"x": x})["y"]
        assert counts() == (0, 1)  # the first quiet request: a stream
        np.testing.assert_array_equal(backend.run({"x": x})["y"], expected)
        assert counts() == (1, 1)  # the second in a row: the lone requests' path
        gated.go.clear()
        gated.entered.clear()
        held = threading.Thread(target=backend.run, args=({"x": x},))
        held.start()
        assert gated.entered.wait(30)  # the lone path is busy: the next request takes a stream
        np.testing.assert_array_equal(backend.run({"x": x})["y"], expected)
        assert counts() == (1, 2)
        gated.go.set()
        held.join()
        assert counts() == (2, 2)
        assert server.serve_latency(device, lone) and server.serve_latency(device, None)
        backend.run({"x": x})  # after the watch's turn on the latency path: quiet again
        backend.run({"x": x})
        assert counts() == (3, 3) and not lone.retired
        stats = served(backend)
    assert stats is not None and stats.requests == 6
    (shown,) = stats.devices
    assert [s.requests for s in shown.streams if s.latency] == [3]


def _measured(checkpoint: Any) -> OnnxBackend:
    return OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")


def test_a_verdict_rewrites_the_record_and_a_second_build_starts_from_it(
    ortplug_cache: Path,
) -> None:
    checkpoint = InMemoryCheckpoint(rows_model()).resolve()
    host = get_plugin_host().host_capabilities()
    with _measured(checkpoint) as first:
        watch = _server(first).watch
        assert isinstance(watch, Watch)
        behind = decide(compare(_windows(100, 300)), watch.layout, [])
        with pytest.warns(ServingWarning, match="serves the latency path: no layout beats"):
            assert watch.apply(behind) is False
        assert _server(first).on_latency_path
        assert served(first) is not None and "no layout beats" in str(served(first).watch)
        assert first.serving is not None and first.serving.source.startswith("watched: ")
        assert first.serving.latency is not None  # the backend's report is the one serving now
    assert first.serving.latency is not None  # and stays what it served, once closed
    found = recorded_serving(checkpoint, host)
    assert found is not None and found[1].latency is not None
    assert "no layout beats the latency path" in found[1].latency
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        second = _measured(checkpoint)
    with second:
        lines = [str(w.message) for w in said if issubclass(w.category, ServingWarning)]
        assert len(lines) == 1 and "serves the latency path (recorded:" in lines[0]
        assert second.serving is not None and second.serving.source.startswith("recorded: ")
        assert any(line.startswith("latency    serves the latency path") for line in
                   second.serving.lines())  # fmt: skip
        server = _server(second)
        assert server.on_latency_path  # from its first request
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        assert np.allclose(second.run({"x": x})["y"], x @ WEIGHT)
        watch = server.watch
        assert isinstance(watch, Watch)
        ahead = decide(compare(_windows(400, 300)), watch.layout, [])
        assert watch.apply(ahead) is False and not server.on_latency_path
        assert second.serving.latency is None and second.serving.source.startswith("watched: ")
        results = callers(6, lambda i: [(x + i, second.run({"x": x + i})["y"])])
    _check_rows(results)
    found = recorded_serving(checkpoint, host)
    assert found is not None and found[1].latency is None
    assert found[1].source.startswith("watched: layout kept")


@pytest.mark.parametrize("count", [1, 4])
def test_the_watch_compares_on_live_traffic_and_every_caller_keeps_its_rows(count: int) -> None:
    with _measured(InMemoryCheckpoint(rows_model()).resolve()) as backend:
        server = _server(backend)
        assert isinstance(server.watch, Watch) and server.served().watch is None

        def caller(index: int) -> list[tuple[np.ndarray, np.ndarray]]:
            rng = np.random.default_rng(index)
            got = []
            for _ in range(200000):  # until the watch decided (a bound, not a timing claim)
                x = rng.standard_normal((1, 4)).astype(np.float32)
                got.append((x, backend.run({"x": x})["y"]))
                if server.watched is not None and "too little traffic" not in server.watched:
                    break
            return got

        results = callers(count, caller)
        stats = served(backend)
    _check_rows(results)
    assert stats is not None and stats.watch is not None
    assert stats.watch.startswith(("layout kept: ", "no layout beats the latency path", "fell"))
    assert stats.lines()[-1] == f"watch      {stats.watch}"
    assert any(s.latency and s.requests > 0 for s in stats.devices[0].streams)


def test_no_traffic_compares_nothing_and_closes_at_once() -> None:
    backend = _measured(InMemoryCheckpoint(rows_model()).resolve())
    server = _server(backend)
    assert not server.stopping.wait(0.3)  # no request: nothing to compare
    assert server.served().watch is None and not server.on_latency_path
    backend.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("ortplug-serving")]


def test_watch_false_serves_the_layout_unwatched() -> None:
    given = ServingConfig(watch=False)
    assert given.to_dict() == ServingConfig().to_dict()  # the same record
    with OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(rows_model()).resolve(), performance_hint="throughput", serving=given
    ) as backend:
        assert _server(backend).watch is None
    with pytest.raises(OptionError, match=r"^watch: expected True or False, got 'no'$"):
        ServingConfig(watch="no")  # type: ignore[arg-type]
