"""What a throughput build measures on (the caller's arrays, the checkpoint's samples, generated
inputs, never degenerate ones silently) and what its record holds for later builds (the inputs'
digest and shapes, the row check's verdict), including records that are corrupt or lie.

Real models (``onnx.helper``) and real ONNX Runtime sessions; nothing here asserts a time.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from ortplug import (
    InMemoryCheckpoint,
    LocalCheckpoint,
    OnnxBackend,
    Verification,
    get_plugin_host,
)
from ortplug.backend import recorded_serving
from ortplug.errors import OrtplugCacheWarning
from ortplug_serve import ServingWarning
from ortplug_serve.server import Server
from serve_models import WEIGHT, callers, mixing_model, rows_model


def _model(graph: onnx.GraphProto) -> bytes:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _line_model() -> bytes:
    """y = squeeze(x, axis 2), x [N, 3, h, w]: like PP-OCR's recognizer, it takes images one
    pixel high only, so of the generated sizes only the degenerate 1x1 runs."""
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    graph = helper.make_graph(
        [helper.make_node("Squeeze", ["x", "axes"], ["y"])],
        "line",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, "w"])],
        initializer=[axes],
    )
    return _model(graph)


def _host() -> Any:
    return get_plugin_host().host_capabilities()


def _records(cache: Path) -> list[Path]:
    return sorted((cache / "serving").glob("*.json"))


def _rewrite(path: Path, change: dict[str, Any]) -> None:
    """Change a record in place (as a user or another program might), keeping its file."""
    record = json.loads(path.read_text())
    record.update(change)
    with open(path, "w") as out:  # the same file: its permissions stay this user's alone
        json.dump(record, out)


def test_given_arrays_are_measured_on_and_other_arrays_measure_again() -> None:
    checkpoint = InMemoryCheckpoint(rows_model()).resolve()
    rng = np.random.default_rng(0)
    mine = {"x": rng.standard_normal((3, 4)).astype(np.float32)}
    first = OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", verify=Verification(inputs=mine)
    )
    with first:
        serving = first.serving
        assert serving is not None and serving.source.startswith("measured")
        assert serving.inputs == "given: x float32 (3, 4)"
        assert "inputs     given: x float32 (3, 4)" in serving.lines()
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", verify=Verification(inputs=mine)
    ) as again:
        assert again.serving is not None and again.serving.source.startswith("recorded")
        assert again.serving.inputs == "given: x float32 (3, 4)"
    other = {"x": mine["x"] + 1}  # the same shape, other values: not what the record measured
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", verify=Verification(inputs=other)
    ) as changed:
        assert changed.serving is not None and changed.serving.source.startswith("measured")
    with OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput") as plain:
        assert plain.serving is not None and plain.serving.source.startswith("measured")
        assert plain.serving.inputs == "generated: x float32 (1, 4)"


def test_the_checkpoints_samples_are_measured_on(tmp_path: Path) -> None:
    (tmp_path / "samples").mkdir()
    np.save(tmp_path / "samples" / "x.npy", np.ones((2, 4), np.float32))
    (tmp_path / "rows.onnx").write_bytes(rows_model())
    checkpoint = LocalCheckpoint(tmp_path / "rows.onnx").resolve()
    with OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput") as backend:
        assert backend.serving is not None and backend.serving.source.startswith("measured")
        assert backend.serving.inputs == "samples: x float32 (2, 4)"
    with OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput") as again:
        assert again.serving is not None and again.serving.source.startswith("recorded")
        assert again.serving.inputs == "samples: x float32 (2, 4)"


def test_degenerate_generated_inputs_are_not_measured_on_and_say_so_once() -> None:
    checkpoint = InMemoryCheckpoint(_line_model()).resolve()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend = OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")
    said = [w for w in caught if "degenerate" in str(w.message)]
    assert len(said) == 1 and issubclass(said[0].category, ServingWarning)
    assert "(1, 3, 1, 1)" in str(said[0].message) and "\n" not in str(said[0].message)
    with backend:
        serving = backend.serving
        assert serving is not None
        assert serving.source.startswith("defaults, not measured (only generated inputs of")
        assert serving.inputs == (
            "generated: x float32 (1, 3, 1, 1) (degenerate sizes: not measured on)"
        )
        assert not any(line.startswith("trial") for line in serving.lines())
        x = np.full((1, 3, 1, 5), 2.0, np.float32)
        assert np.array_equal(backend.run({"x": x})["y"], x[:, :, 0])
    assert recorded_serving(checkpoint, _host()) is None  # nothing measured: nothing recorded
    line = {"x": np.random.default_rng(1).standard_normal((1, 3, 1, 320)).astype(np.float32)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        real = OnnxBackend.from_checkpoint(
            checkpoint, performance_hint="throughput", verify=Verification(inputs=line)
        )
    assert not [w for w in caught if "degenerate" in str(w.message)]
    with real:
        assert real.serving is not None and real.serving.source.startswith("measured")
        assert real.serving.inputs == "given: x float32 (1, 3, 1, 320)"


def test_a_corrupt_record_is_said_once_and_measured_again(ortplug_cache: Path) -> None:
    checkpoint = InMemoryCheckpoint(rows_model()).resolve()
    OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput").close()
    (path,) = _records(ortplug_cache)
    for broken in ('{"schema": 2, "model": ', json.dumps({"schema": 2, "inputs": [1]})):
        path.write_text(broken)
        with pytest.warns(OrtplugCacheWarning, match="serving record"):
            backend = OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")
        with backend:
            assert backend.serving is not None and backend.serving.source.startswith("measured")
            x = np.arange(8, dtype=np.float32).reshape(2, 4)
            assert np.allclose(backend.run({"x": x})["y"], x @ WEIGHT)


def test_a_record_whose_inputs_are_tampered_with_is_not_used(ortplug_cache: Path) -> None:
    checkpoint = InMemoryCheckpoint(rows_model()).resolve()
    OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput").close()
    (path,) = _records(ortplug_cache)
    _rewrite(path, {"inputs": {"digest": "0" * 64, "shapes": {"x": [1, 4]}}})
    with OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput") as backend:
        assert backend.serving is not None and backend.serving.source.startswith("measured")


def test_a_record_that_lies_about_the_rows_never_mixes_callers_rows(ortplug_cache: Path) -> None:
    """The mixing model's record says its rows may share runs, with batches and a queueing
    delay: the build uses it, and every caller still gets what its request gives alone (the
    server re-checks each row count on real requests and stops sharing runs)."""
    checkpoint = InMemoryCheckpoint(mixing_model()).resolve()
    with pytest.warns(ServingWarning, match="rows mix"):
        OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput").close()
    (path,) = _records(ortplug_cache)
    record = json.loads(path.read_text())
    assert record["rows_problem"] is not None and "rows mix" in record["rows_problem"]
    layout = {"streams": 1, "threads": 1, "max_batch": 16, "max_delay_ms": 50.0}
    record["report"]["devices"][0]["layout"] = layout
    _rewrite(path, {"rows_problem": None, "report": record["report"]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend = OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")
        server = backend.dispatcher
        with backend:
            serving = backend.serving
            assert serving is not None and serving.source.startswith("recorded")
            assert serving.batching.startswith("concurrent requests of the same shapes share")
            rng = np.random.default_rng(3)
            xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(24)]
            got = callers(len(xs), lambda i: backend.run({"x": xs[i]})["y"])
    for x, y in zip(xs, got):
        assert not isinstance(y, Exception), y
        assert np.allclose(y, x - x.mean(axis=0, keepdims=True))
    assert isinstance(server, Server)
    if server.unbatched is not None:  # runs were shared, and the re-check caught the mixing
        assert any("one by one from now on" in str(w.message) for w in caught)


def test_a_recorded_layout_builds_its_sessions_behind_the_first_requests(
    ortplug_cache: Path,
) -> None:
    checkpoint = InMemoryCheckpoint(rows_model()).resolve()
    OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput").close()
    (path,) = _records(ortplug_cache)
    record = json.loads(path.read_text())
    layout = {"streams": 2, "threads": 1, "max_batch": 1, "max_delay_ms": 0.0}
    record["report"]["devices"][0]["layout"] = layout
    _rewrite(path, {"report": record["report"]})
    backend = OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")
    server = backend.dispatcher
    assert isinstance(server, Server)
    time.sleep(0.5)  # no request yet: the layout's sessions wait for one (not beside the first)
    assert len(server.devices[0].streams) == 1
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = callers(8, lambda i: backend.run({"x": x + i})["y"])  # while the streams are built
    for index, y in enumerate(got):
        assert np.allclose(y, (x + index) @ WEIGHT)
    for _ in range(3000):  # the build thread's sessions (a bound, not a timing claim)
        if len(server.devices[0].streams) == 2 or server.restream_failed is not None:
            break
        time.sleep(0.01)
    assert server.restream_failed is None
    assert len(server.devices[0].streams) == 2
    assert np.allclose(backend.run({"x": x})["y"], x @ WEIGHT)
    backend.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("ortplug-serving")]


def test_work_behind_the_first_request_waits_for_it_and_not_past_close(ortplug_cache: Path) -> None:
    """``first_served()`` returns once a request ran (``True``) or the server closed (``False``:
    a layout's sessions are then never built)."""
    checkpoint = InMemoryCheckpoint(rows_model()).resolve()
    for served in (True, False):
        backend = OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")
        server = backend.dispatcher
        assert isinstance(server, Server)
        waited: list[bool] = []
        waiter = threading.Thread(
            target=lambda s, w: w.append(s.first_served()), args=(server, waited)
        )
        waiter.start()
        waiter.join(0.2)
        assert waiter.is_alive()  # nothing served yet
        if served:
            backend.run({"x": np.ones((1, 4), np.float32)})
        else:
            backend.close()
        waiter.join(30)
        assert waited == [served]
        backend.close()
