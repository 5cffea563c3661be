"""Builds lock per model, not per process (issue 24 item 30): a long build (a startup-fallback
background build, a TensorRT engine) must not stall an unrelated model's build."""

from __future__ import annotations

import threading

import models
import numpy as np
import onnxruntime as ort
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend, SessionOptionsConfig

UNUSED_LINE = models.UNUSED_INITIALIZER_LINE


@pytest.fixture
def logger_restored():
    yield
    ort.set_default_logger_callback(None)
    ort.set_default_logger_severity(2)


#: Session options under which ONNX Runtime logs the unused initializer the test waits on.
WARNINGS = SessionOptionsConfig(log_severity_level=2)


def test_an_unrelated_build_does_not_wait_for_a_long_one(plugin_host, logger_restored) -> None:
    """The long build is held inside ONNX Runtime (in the user's logger callback, on the
    building thread) until the unrelated build has finished: with one process-wide build
    lock the unrelated build could never finish first."""
    slow = InMemoryCheckpoint(models.unused_initializer_model()).resolve()
    tiny = InMemoryCheckpoint(models.add_model()).resolve()
    inside, tiny_built = threading.Event(), threading.Event()
    results: dict[str, object] = {}

    def callback(severity, category, logid, location, message) -> None:
        if UNUSED_LINE in message and threading.current_thread().name == "slow":
            inside.set()
            tiny_built.wait(timeout=60)

    ort.set_default_logger_callback(callback, 2)

    def build(name: str, checkpoint) -> None:
        try:
            results[name] = OnnxBackend.from_checkpoint(
                checkpoint,
                providers=["cpu"],
                plugins=plugin_host,
                session_options=WARNINGS,  # ortplug's own sessions log only fatal errors
            )
        except BaseException as exc:
            results[name] = exc
        if name == "tiny":
            tiny_built.set()

    slow_thread = threading.Thread(target=build, args=("slow", slow), name="slow")
    slow_thread.start()
    assert inside.wait(timeout=60), "the slow build never logged its line"
    tiny_thread = threading.Thread(target=build, args=("tiny", tiny), name="tiny")
    tiny_thread.start()
    tiny_thread.join(timeout=30)
    finished_first = not tiny_thread.is_alive()
    tiny_built.set()  # release the slow build whatever happened
    tiny_thread.join()
    slow_thread.join()
    assert finished_first, "the tiny model's build waited for the slow model's build"
    assert isinstance(results["tiny"], OnnxBackend) and isinstance(results["slow"], OnnxBackend)
    out = results["tiny"].run({"a": np.ones((1, 4), np.float32), "b": np.ones((1, 4), np.float32)})
    assert out["c"].tolist() == [[2, 2, 2, 2]]
