"""A lossy candidate proves itself on the caller's data before it serves (issue 37 item 5, T15).

An int8 (fp16, bf16) variant, a reduced-precision mode or a loosened tolerance is judged at a
looser tolerance than the reference's, on generated inputs: by default it shadows the CPU
reference on real requests (the CPU answers them meanwhile, no caller waits) and serves only
after agreeing on ``real_traffic_checks`` of them. The variant here is an int8 one that saturates
its input at +-4, as a quantizer calibrated on unit-scale data does: right on the generated
inputs verification runs, wrong on real inputs three times larger.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from ortplug import LocalCheckpoint, OnnxBackend, Verification, VerificationWarning
from variant_models import with_variant

CPU = ("CPUExecutionProvider",)
_WEIGHTS = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)


def _linear(saturate: float | None = None) -> onnx.ModelProto:
    """y = x @ W, x [batch, 8]; ``saturate``: x clipped to +-saturate first (an int8 variant's
    range, calibrated on unit-scale inputs)."""
    nodes, source, inits = [], "x", [numpy_helper.from_array(_WEIGHTS, "w")]
    if saturate is not None:
        bounds = np.array([-saturate, saturate], np.float32)
        inits += [numpy_helper.from_array(bounds[:1].reshape(()), "lo"),
                  numpy_helper.from_array(bounds[1:].reshape(()), "hi")]  # fmt: skip
        nodes.append(helper.make_node("Clip", ["x", "lo", "hi"], ["clipped"]))
        source = "clipped"
    nodes.append(helper.make_node("MatMul", [source, "w"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _checkpoint(folder: Path, saturate: float | None):
    return LocalCheckpoint(with_variant(folder, _linear(), _linear(saturate), "int8")).resolve()


def _real(count: int, scale: float, seed: int = 7) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": (rng.standard_normal((1, 8)) * scale).astype(np.float32)} for _ in range(count)]


def _until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_an_int8_variant_wrong_on_the_callers_inputs_never_serves_them_by_default(tmp_path):
    checkpoint = _checkpoint(tmp_path, saturate=4.0)
    reference = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"])
    with pytest.warns(VerificationWarning) as caught:
        backend = OnnxBackend.from_checkpoint(checkpoint, verify=Verification(measure=False))
        verdict = next(c for c in backend.report.candidates if c.variant == "int8").verdict
        assert verdict is not None and verdict.passed  # right on the generated inputs
        assert backend.shadowing and backend.providers == CPU
        calls = _real(20, scale=3.0)
        assert max(float(np.abs(f["x"]).max()) for f in calls) > 4
        right = 0
        for feed in calls:
            got = backend.run(feed)["y"]
            time.sleep(0.01)  # real requests come and go: the shadow keeps up
            right += bool(np.array_equal(got, reference.run(feed)["y"]))
        assert right == 20
        assert backend.wait_ready(60)
    (line,) = [str(w.message) for w in caught if issubclass(w.category, VerificationWarning)]
    assert "variant int8" in line and "on real inputs: request" in line
    assert line.endswith("the CPU reference keeps serving")
    assert backend.report.verification is None  # the CPU reference serves, unverified: itself
    assert "was rejected on real inputs" in (backend.startup_status or "")
    backend.close()


def test_an_identical_int8_variant_takes_over_after_the_stated_number_of_requests(
    tmp_path, caplog, monkeypatch
):
    checkpoint = _checkpoint(tmp_path, saturate=None)
    monkeypatch.setenv("ORTPLUG_REAL_TRAFFIC_CHECKS", "3")  # the stated number
    backend = OnnxBackend.from_checkpoint(checkpoint, verify=Verification(measure=False))
    assert backend.shadowing and backend.report.verification is None
    status = backend.startup_status or ""
    assert (
        "the CPU reference serves while variant int8 on [cpu] shadows it on real requests" in status
    )
    assert "0 of 3 agreed (it serves after 3)" in status
    feeds = _real(3, scale=3.0)
    with caplog.at_level(logging.WARNING, logger="ortplug"):
        for feed in feeds[:2]:
            backend.run(feed)
        _until(lambda: "2 of 3 agreed" in (backend.startup_status or ""), "two agreeing requests")
        assert backend.report.verification is None and not backend.wait_ready(0)
        backend.run(feeds[2])
        assert backend.wait_ready(60)
    verdict = backend.report.verification
    assert verdict is not None and verdict.variant == "int8"  # the variant serves now
    said = [r.getMessage() for r in caplog.records if "serves, after agreeing" in r.getMessage()]
    assert len(said) == 1 and "\n" not in said[0]
    assert (
        "variant int8 on [cpu] serves, after agreeing with the CPU reference on 3 real requests"
        in said[0]
    )
    backend.close()


def test_the_default_is_eight_requests_and_zero_serves_a_lossy_candidate_once_verified(
    tmp_path, monkeypatch
):
    checkpoint = _checkpoint(tmp_path, saturate=None)
    backend = OnnxBackend.from_checkpoint(checkpoint, verify=Verification(measure=False))
    assert "0 of 8 agreed (it serves after 8)" in (backend.startup_status or "")
    backend.close()
    monkeypatch.setenv("ORTPLUG_REAL_TRAFFIC_CHECKS", "0")  # no real-traffic checks
    at_once = OnnxBackend.from_checkpoint(checkpoint, verify=Verification(measure=False))
    assert at_once.startup_status is None and not at_once.shadowing
    verdict = at_once.report.verification
    assert verdict is not None and verdict.variant == "int8"
    at_once.close()


def test_a_lossy_candidate_verified_on_the_users_data_serves_at_once(tmp_path):
    checkpoint = _checkpoint(tmp_path, saturate=None)
    given = _real(1, scale=3.0)[0]
    backend = OnnxBackend.from_checkpoint(
        checkpoint,
        verify=Verification(inputs=given, measure=False),
    )
    verdict = backend.report.verification
    assert verdict is not None and verdict.variant == "int8" and verdict.inputs == "given"
    assert not backend.shadowing
    backend.close()


def test_wait_ready_without_traffic_says_why_it_waits(tmp_path):
    """T15: it waited its whole time-out without a word."""
    checkpoint = _checkpoint(tmp_path, saturate=None)
    backend = OnnxBackend.from_checkpoint(checkpoint, verify=Verification(measure=False))
    with pytest.warns(VerificationWarning) as caught:
        assert not backend.wait_ready(1.5)
    (line,) = [str(w.message) for w in caught]
    assert line.startswith(
        "wait_ready: the CPU reference serves while variant int8 on [cpu] shadows"
    )
    assert "0 of 8 agreed (it serves after 8); no real request came in 1 s" in line
    assert "real_traffic_checks=0" in line and caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        assert not backend.wait_ready(1.2)
    backend.close()


def test_under_a_throughput_hint_an_unproven_lossy_choice_is_not_what_serves(tmp_path):
    """A dispatcher cannot let the candidate shadow the CPU first: the CPU reference serves the
    many callers (said once), so the wrong-on-real-inputs int8 variant answers none of them."""
    from ortplug import Verification

    checkpoint = _checkpoint(tmp_path, saturate=4.0)
    reference = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"])
    with pytest.warns(VerificationWarning, match="serves the CPU reference, not int8"):
        backend = OnnxBackend.from_checkpoint(
            checkpoint, verify=Verification(measure=False), performance_hint="throughput"
        )
    with backend:
        assert backend.performance_hint == "throughput" and backend.providers == CPU
        for feed in _real(20, scale=3.0):
            np.testing.assert_array_equal(backend.run(feed)["y"], reference.run(feed)["y"])
    reference.close()
