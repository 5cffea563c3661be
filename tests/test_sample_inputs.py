"""Generated inputs a model accepts: sizes tried in order until the CPU reference runs them.

Real models built with ``onnx.helper`` that reject the 1x1 images, short audio and short
sequences a naive generator makes, run on real ONNX Runtime CPU sessions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import models
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from ortplug import LocalCheckpoint, OnnxBackend, StartupFallback
from ortplug.checkpoint import select_variant
from ortplug.errors import InputsNotAcceptedError
from ortplug.verification.sample_inputs import accepted_inputs, candidate_feeds, session_inputs
from ortplug_variants import calibration_feeds, write_variants

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"


def _model(nodes, inputs, outputs, initializers=()) -> bytes:
    graph = helper.make_graph(nodes, "accepts", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _cnn() -> bytes:
    """A stem like ResNet's: 7x7 convolution, stride 2, no padding; then a global pool and a Gemm.

    A 1x1 image is smaller than its kernel: ONNX Runtime refuses it.
    """
    rng = np.random.default_rng(1)
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 7, 7)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "fc"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[7, 7], strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["logits"]),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 5])],
        weights,
    )


def _pool(kernel: int) -> bytes:
    """A max pool with a ``kernel`` x ``kernel`` window: images smaller than it are refused."""
    return _model(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[kernel, kernel])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, None, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, None, None])],
    )


def _tokens(block: int) -> bytes:
    """Token ids cut into blocks of ``block`` by a Reshape: a length must be a multiple of it."""
    shape = numpy_helper.from_array(np.array([-1, block], np.int64), "block")
    return _model(
        [helper.make_node("Reshape", ["input_ids", "block"], ["blocks"])],
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [None, None])],
        [helper.make_tensor_value_info("blocks", TensorProto.INT64, [None, block])],
        [shape],
    )


def _audio() -> bytes:
    """Audio framed into 10 ms hops at 8 kHz (a Reshape to [-1, 80]); no sample-rate input."""
    frame = numpy_helper.from_array(np.array([-1, 80], np.int64), "frame")
    return _model(
        [helper.make_node("Reshape", ["wave", "frame"], ["frames"])],
        [helper.make_tensor_value_info("wave", TensorProto.FLOAT, [1, None])],
        [helper.make_tensor_value_info("frames", TensorProto.FLOAT, [None, 80])],
        [frame],
    )


def _session(data: bytes) -> onnxruntime.InferenceSession:
    return onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])


def test_a_cnn_is_checked_on_a_224_image_not_a_1x1_one() -> None:
    session = _session(_cnn())
    accepted = session_inputs(session, {})
    assert accepted.feed["x"].shape == (1, 3, 224, 224)
    assert accepted.generated == {"x": "float32 (1, 3, 224, 224) normal"}
    assert accepted.outputs["logits"].shape == (1, 5) and accepted.rejected == ()
    last = list(candidate_feeds(session.get_inputs(), {}))[-1]  # what was generated before
    assert last.feed["x"].shape == (1, 3, 1, 1)
    with pytest.raises(Exception, match="Invalid input shape"):
        session.run(None, dict(last.feed))


def test_sizes_are_tried_in_order_until_the_reference_runs() -> None:
    accepted = session_inputs(_session(_pool(300)), {})
    assert accepted.feed["x"].shape == (1, 3, 320, 320)
    assert len(accepted.rejected) == 1 and accepted.rejected[0][0] == (
        "x float32 (1, 3, 224, 224) normal"
    )


def test_a_token_model_gets_a_sequence_length_it_accepts() -> None:
    accepted = session_inputs(_session(_tokens(32)), {})
    assert accepted.feed["input_ids"].shape == (1, 64)
    assert accepted.outputs["blocks"].shape == (2, 32)


def test_audio_is_seconds_at_the_sample_rate_the_metadata_names() -> None:
    session = _session(_audio())
    assert session_inputs(session, {"sample_rate": 8000}).feed["wave"].shape == (1, 8000)
    with pytest.raises(InputsNotAcceptedError, match=r"\[wave float32 \(1, 1\) normal\]"):
        session_inputs(session, {})  # without a sample rate it does not say it is audio


def test_dim_ranges_and_given_arrays_come_first() -> None:
    session = _session(_pool(3))
    given = {"x": np.zeros((1, 3, 5, 5), np.float32)}
    accepted = session_inputs(session, {}, given)
    assert accepted.generated == {} and accepted.feed["x"] is given["x"]
    specs = [("x", "tensor(float)", (1, 3, "height", "width"))]
    spec = [type("S", (), {"name": n, "type": t, "shape": s})() for n, t, s in specs]
    ranges = {"dim_ranges": {"height": [8, 32, 64]}}
    shapes = [c.feed["x"].shape for c in candidate_feeds(spec, ranges)]
    assert shapes == [(1, 3, 32, 224), (1, 3, 32, 320), (1, 3, 32, 640), (1, 3, 32, 1)]


def test_when_no_size_runs_the_error_names_each_try() -> None:
    session = _session(_tokens(1000))
    with pytest.raises(InputsNotAcceptedError, match=r"ran none of 3 generated input") as info:
        session_inputs(session, {})
    message = str(info.value)
    for length in (16, 64, 256):
        assert f"input_ids int64 (1, {length}) in 0..9" in message
    assert "give the inputs" in message and info.value.first.feed["input_ids"].shape == (1, 16)


def test_a_run_callable_is_tried_like_a_session() -> None:
    calls = []

    def run(feed):
        calls.append(feed["x"].shape)
        if feed["x"].shape[-1] < 640:
            raise RuntimeError("too small")
        return {"y": feed["x"]}

    spec = type("S", (), {"name": "x", "type": "tensor(float)", "shape": (1, 3, None, None)})()
    accepted = accepted_inputs(run, [spec], {})
    assert calls == [(1, 3, 224, 224), (1, 3, 320, 320), (1, 3, 640, 640)]
    assert accepted.rejected[0][1] == "RuntimeError: too small"


def test_verifying_a_cnn_variant_runs_the_reference_on_a_real_image_size(tmp_path) -> None:
    weights = models.write(tmp_path, "cnn.onnx", _cnn())
    checkpoint = LocalCheckpoint(weights).resolve()
    write_variants(checkpoint, ["fp16"])
    fp16 = select_variant(LocalCheckpoint(weights).resolve(), "fp16")
    with OnnxBackend.from_checkpoint(fp16, providers=["cpu"], verify=True) as backend:
        verdict = backend.report.verification
        assert verdict is not None and verdict.passed, verdict
        assert verdict.covered[0] == "the first feed (x (1, 3, 224, 224))"


def test_int8_calibration_draws_sizes_the_model_runs(tmp_path) -> None:
    checkpoint = LocalCheckpoint(models.write(tmp_path, "cnn.onnx", _cnn())).resolve()
    feeds = calibration_feeds(checkpoint, batches=2)
    assert [feed["x"].shape for feed in feeds] == [(1, 3, 224, 224)] * 2


def _run_json(model: Path) -> dict:
    """``ortplug run MODEL --repeat 1 --json``'s report."""
    done = subprocess.run(
        [ORTPLUG, "run", str(model), "--repeat", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _flat_pixels() -> bytes:
    """x[N, 3, ?, ?] flattened and multiplied by a [3, 4] weight: only a 1x1 image runs (as a
    text recogniser whose height is unknown refuses 224, 320 and 640)."""
    return _model(
        [
            helper.make_node("Reshape", ["x", "flat"], ["f"]),
            helper.make_node("MatMul", ["f", "w"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, None, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [
            numpy_helper.from_array(np.array([0, -1], np.int64), "flat"),
            numpy_helper.from_array(np.ones((3, 4), np.float32), "w"),
        ],
    )


def _run_on_a_terminal(model: Path) -> tuple[str, str]:
    """``ortplug run MODEL --repeat 1``'s stdout and its stderr, written to a terminal."""
    main, child = os.openpty()
    with subprocess.Popen(
        [ORTPLUG, "run", str(model), "--repeat", "1"],
        stdout=subprocess.PIPE,
        stderr=child,
        text=True,
    ) as process:
        os.close(child)
        said = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            said += chunk
        out = process.stdout.read() if process.stdout else ""
        assert process.wait(timeout=300) == 0, said
    os.close(main)
    return out, said.decode().replace("\r\n", "\n")


def test_ortplug_run_says_which_sizes_it_tries_and_warns_of_a_degenerate_input(tmp_path) -> None:
    """It was silent, then timed a (1, 3, 1, 1) input without saying 224, 320 and 640 failed."""
    model = models.write(tmp_path, "rec.onnx", _flat_pixels())
    out, err = _run_on_a_terminal(model)
    tries = [line for line in err.splitlines() if line.startswith("ortplug: trying")]
    assert tries == [
        f"ortplug: trying generated inputs on the CPU reference: x float32 {shape} normal"
        for shape in ((1, 3, 224, 224), (1, 3, 320, 320), (1, 3, 640, 640), (1, 3, 1, 1))
    ]
    (warning,) = [line for line in err.splitlines() if "warning" in line]
    assert warning.startswith(
        "ortplug: warning: latency is for a degenerate input (x float32 (1, 3, 1, 1) normal): "
        "the CPU reference refused the representative sizes tried ([x float32 (1, 3, 224, 224) "
        "normal] [x float32 (1, 3, 320, 320) normal] [x float32 (1, 3, 640, 640) normal]: "
        "RunFailedError: "
    )
    assert "MatMul dimension mismatch" in warning
    assert warning.endswith("; pass real data with --input NAME=FILE.npy")
    assert "generated x: float32 (1, 3, 1, 1) normal" in out and "latency   median" in out


def test_off_a_terminal_only_the_degenerate_warning_is_said(tmp_path) -> None:
    model = models.write(tmp_path, "rec.onnx", _flat_pixels())
    done = subprocess.run(
        [ORTPLUG, "run", str(model), "--repeat", "1"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("ortplug: warning: latency is for a degenerate input")
    assert len(done.stderr.splitlines()) == 1
    clean = subprocess.run(  # a size that runs first: nothing to warn of
        [ORTPLUG, "run", str(models.write(tmp_path, "cnn.onnx", _cnn())), "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert clean.returncode == 0 and "degenerate" not in clean.stderr


def test_ortplug_run_generates_an_image_the_cnn_takes(tmp_path) -> None:
    report = _run_json(models.write(tmp_path, "cnn.onnx", _cnn()))
    assert report["generated_inputs"] == {"x": "float32 (1, 3, 224, 224) normal"}
    assert report["outputs"]["logits"]["shape"] == [1, 5]


def test_startup_fallback_warms_the_accelerator_up_on_an_image_the_cnn_takes() -> None:
    import ortplug_azuretest
    from ortplug import InMemoryCheckpoint
    from ortplug.testing import make_plugin_host

    plugins = make_plugin_host(("azuretest", ortplug_azuretest))
    backend = OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(_cnn()).resolve(),
        providers=["azure", "cpu"],
        plugins=plugins,
        startup_fallback=StartupFallback(real_traffic_checks=0),
    )
    with backend:
        assert backend.wait_ready(timeout=60) and backend.startup_error is None
        assert backend.providers[0] == "AzureExecutionProvider"  # a 1x1 warm-up failed it


def test_a_uint8_image_is_sized_as_an_image_not_as_tokens() -> None:
    spec = type("S", (), {"name": "image", "type": "tensor(uint8)", "shape": (1, None, None, 3)})()
    first = next(candidate_feeds([spec], {}))
    assert first.generated == {"image": "uint8 (1, 224, 224, 3) in 0..9"}
    gray = type(
        "S", (), {"name": "x", "type": "tensor(float)", "shape": ("n", "height", "width")}
    )()
    assert next(candidate_feeds([gray], {})).feed["x"].shape == (1, 224, 224)


def test_ortplug_run_feeds_the_checkpoints_own_samples(tmp_path) -> None:
    model = models.write(tmp_path, "cnn.onnx", _cnn())
    (tmp_path / "samples").mkdir()
    np.save(tmp_path / "samples" / "x.npy", np.ones((2, 3, 96, 96), np.float32))
    report = _run_json(model)
    assert report["generated_inputs"] == {} and report["outputs"]["logits"]["shape"] == [2, 5]
