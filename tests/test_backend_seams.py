"""The backend's public seams as API: its option values, the old keywords, ONNX Runtime's errors
read by class, what serves (``serve``) and who runs the calls (``dispatch_through``)."""

from __future__ import annotations

import asyncio
import inspect
import threading
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from importlib.resources import files
from typing import Any

import models
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from ortplug import (
    AddonNotInstalledError,
    InMemoryCheckpoint,
    InputValidationError,
    OnnxBackend,
    OptionError,
    OrtplugError,
    RunFailedError,
    RunTerminatedError,
    StartupFallback,
    Tolerance,
    Verification,
)
from ortplug.addons import HINTS_GROUP, entry_point_target
from ortplug.errors import OptionTypeError
from ortplug.pipeline.build_pipeline import ServeChange
from ortplug.session.ort_errors import is_model_error

DEMO = (files("ortplug.data") / "demo.onnx").read_bytes()
X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)


def _demo(**kwargs: Any) -> OnnxBackend:
    return OnnxBackend.from_checkpoint(InMemoryCheckpoint(DEMO).resolve(), **kwargs)


def test_from_checkpoint_takes_at_most_nine_parameters() -> None:
    parameters = inspect.signature(OnnxBackend.from_checkpoint).parameters
    assert len(parameters) <= 9, list(parameters)
    assert {"verify", "startup_fallback", "performance_hint", "serving"} <= set(parameters)


def test_a_verification_value_sets_what_the_keywords_did() -> None:
    with _demo(providers=["cpu"], verify=Verification(inputs={"x": X}, measure=False)) as b:
        assert b.providers == ("CPUExecutionProvider",)
    with _demo(verify=Verification(enabled=False)) as b:
        assert b.report.verification is None


@pytest.mark.parametrize(
    ("keyword", "value", "spelled"),
    [
        ("verify_inputs", {"x": X}, "verify=Verification(inputs=...)"),
        ("measure", False, "verify=Verification(measure=...)"),
        ("min_accelerator_share", 0.0, "verify=Verification(min_accelerator_share=...)"),
    ],
)
def test_the_old_keywords_still_work_and_say_their_new_spelling(keyword, value, spelled) -> None:
    with pytest.warns(DeprecationWarning, match=spelled.replace("(", r"\(").replace(")", r"\)")):
        backend = _demo(providers=["cpu"], **{keyword: value})
    with backend:
        assert backend.run({"x": X})["probs"].shape == (2, 3)


def test_an_old_startup_keyword_needs_the_startup_fallback() -> None:
    refused = pytest.raises(OptionError, match="real_traffic_checks: used only with startup_fa")
    with refused, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        _demo(real_traffic_checks=3)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"verify": "yes"}, OptionTypeError, "verify: expected True, False, None or a Tolerance"),
        ({"startup_fallback": 1}, OptionTypeError, "startup_fallback: expected True, False or"),
        (
            {"verify": False, "startup_fallback": StartupFallback(spot_check=0.5)},
            OptionError,
            "used only with verification on, got verify=False",
        ),
        (
            {"verify": Verification(enabled=False, inputs={"x": X})},
            OptionError,
            "Verification.inputs: used only with enabled=True",
        ),
        ({"verify": Verification(measure="no")}, OptionTypeError, "Verification.measure"),
        ({"serving": object()}, OptionError, "serving: used only with performance_hint"),
    ],
)
def test_bad_option_values_are_one_line_naming_them(kwargs, error, message) -> None:
    with pytest.raises(error, match=message):
        _demo(**kwargs)


def test_a_tolerance_is_still_a_verify_value() -> None:
    with _demo(verify=Tolerance(1e-3, 1e-3)) as backend:
        assert backend.run({"x": X})["logits"].shape == (2, 3)


# -- ONNX Runtime's errors, by class ------------------------------------------------------------


def _reshape_model() -> bytes:
    """Reshape to the shape given at run time: ONNX Runtime fails the run, not the inputs' types."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    return models.graph_model(
        nodes,
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
    )


def test_a_failed_run_is_an_ortplug_error_that_is_still_a_runtime_error() -> None:
    backend = OnnxBackend.from_checkpoint(InMemoryCheckpoint(_reshape_model()).resolve())
    with backend, pytest.raises(RunFailedError, match="ONNX Runtime failed to run model") as got:
        backend.run({"x": np.ones(6, np.float32), "shape": np.array([4, 4], np.int64)})
    assert isinstance(got.value, RuntimeError) and isinstance(got.value, OrtplugError)
    assert got.value.__cause__ is not None
    assert type(got.value.__cause__).__module__.startswith("onnxruntime")


def test_the_callers_inputs_and_a_terminated_run_are_told_apart_by_state() -> None:
    with _demo() as backend:
        with pytest.raises(InputValidationError, match="x"):
            backend.run({"x": np.ones((2, 5), np.float32)})
        backend.terminate()
        with pytest.raises(RunTerminatedError):
            backend.run({"x": X})
        backend.reset_terminate()
        assert backend.run({"x": X})["probs"].shape == (2, 3)


def test_model_errors_are_recognised_by_their_class() -> None:
    with pytest.raises(Exception) as refused:
        ort.InferenceSession(b"not a model", providers=["CPUExecutionProvider"])
    assert is_model_error(refused.value)
    assert not is_model_error(RuntimeError("InvalidProtobuf"))  # a message is not a class


# -- the seams -----------------------------------------------------------------------------------


def test_serve_is_the_one_seam_that_changes_what_serves() -> None:
    with _demo() as backend:
        now = backend.serve(ServeChange())
        assert now.moved and now.session is not None and now.candidates == backend.report.candidates
        emptied = backend.serve(ServeChange(candidates=()))
        assert emptied.candidates == () and backend.report.candidates == ()
    assert not backend.serve(ServeChange(set_watch=True, watch=None)).moved  # closed


class _PoolDispatcher:
    """A dispatcher as an add-on writes one: a thread pool running the backend's own session."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="test-dispatch")
        self.calls = 0
        self.closed: str | None = None
        self.terminated = False
        self._lock = threading.Lock()

    class _Summary:
        hint = "pool"
        streams = 2

        def lines(self) -> list[str]:
            return ["two threads"]

        def to_dict(self) -> dict[str, Any]:
            return {"hint": self.hint}

    report = _Summary()

    def run(self, names, feed) -> list[Any]:
        return self.submit(feed, names, None).result()

    def submit(self, feed, names, run_options) -> Future[list[Any]]:
        with self._lock:
            self.calls += 1
        return self._pool.submit(self._session.run, list(names), dict(feed), run_options)

    def terminate(self, terminate: bool) -> None:
        self.terminated = terminate

    def close(self, why: str) -> None:
        self.closed = why
        self._pool.shutdown(wait=True)


def test_a_dispatcher_runs_every_call_form_and_closes_with_the_backend() -> None:
    backend = _demo()
    want = backend.run({"x": X})
    dispatcher = _PoolDispatcher(backend.ort_session)
    backend.dispatch_through(dispatcher)
    assert backend.dispatcher is dispatcher and backend.performance_hint == "pool"
    assert backend.serving is dispatcher.report and backend.report.serving is dispatcher.report
    np.testing.assert_array_equal(backend.run({"x": X})["probs"], want["probs"])
    into = {"probs": np.empty((2, 3), np.float32)}
    backend.run_into({"x": X}, into)
    np.testing.assert_array_equal(into["probs"], want["probs"])
    got: Future[Any] = Future()
    backend.run_async({"x": X}, lambda outputs, error: got.set_result((outputs, error)))
    outputs, error = got.result(timeout=30)
    assert error is None and np.array_equal(outputs["logits"], want["logits"])
    awaited = asyncio.run(backend.arun({"x": X}))
    np.testing.assert_array_equal(awaited["logits"], want["logits"])
    assert dispatcher.calls == 4
    backend.terminate()
    assert dispatcher.terminated
    backend.close()
    assert dispatcher.closed is not None and "closed" in dispatcher.closed


def test_a_hint_no_add_on_registers_is_one_line_naming_the_group() -> None:
    with pytest.raises(AddonNotInstalledError, match="'ortplug.hints'"):
        entry_point_target(HINTS_GROUP, "no-such-hint", needed_for="performance_hint='x'")


def test_the_drop_in_seams_give_onnx_runtimes_own_session() -> None:
    with _demo() as backend:
        assert isinstance(backend.ort_session, ort.InferenceSession)
        assert backend.run_lock is None  # the CPU provider declares concurrent runs safe
        assert backend.dispatcher is None


def test_a_backend_nobody_closes_is_freed_with_its_last_reference() -> None:
    """No reference cycle through the backend: its session goes when the last reference does,
    not at a later cycle collection (which cost every unclosed build ~5 ms and held the memory)."""
    import gc
    import weakref

    gc.disable()
    try:
        for kwargs in ({"providers": ["cpu"]}, {}):
            backend = _demo(**kwargs)
            backend.run_into({"x": X}, {"probs": np.empty((2, 3), np.float32)})
            gone = weakref.ref(backend)
            del backend
            assert gone() is None, kwargs
    finally:
        gc.enable()
