"""Threads (issue 12): terminate racing bind, the user's ORT logger across builds, build time-outs
under concurrent builds, other threads' warnings during builds, what close() releases."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from importlib.resources import files
from pathlib import Path

import models
import numpy as np
import onnxruntime as ort
import pytest
from ortplug import (
    BackendClosedError,
    InMemoryCheckpoint,
    OnnxBackend,
    ProviderNotRealizedError,
    RunOptionsConfig,
    SessionOptionsConfig,
)

X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
UNUSED_LINE = models.UNUSED_INITIALIZER_LINE


UNUSED = InMemoryCheckpoint(models.unused_initializer_model())
#: A session ortplug builds logs nothing unless its options ask: these ask for ORT's warnings.
WARNINGS = SessionOptionsConfig(log_severity_level=2)


@pytest.fixture
def demo(plugin_host) -> OnnxBackend:
    data = (files("ortplug.data") / "demo.onnx").read_bytes()
    return OnnxBackend.from_checkpoint(InMemoryCheckpoint(data).resolve(), plugins=plugin_host)


def _concurrently(*targets: Callable[[], object]) -> list[BaseException]:
    """Start every target in its own thread at once, wait for all; what they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(targets))

    def guarded(target: Callable[[], object]) -> None:
        start.wait()
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return errors


# -- 1. terminate() / reset_terminate() racing bind() --------------------------------------------


def test_terminate_and_reset_racing_bind_never_fail(demo) -> None:
    deadline = time.monotonic() + 5
    binders_done = threading.Semaphore(0)
    kept: list[object] = []  # a long set to iterate while bind() adds to it

    def binder() -> None:
        own = RunOptionsConfig(tag="bound")
        try:
            for i in range(3000):
                if time.monotonic() > deadline:
                    break
                binding = demo.bind(own if i % 2 else None)
                if i % 3:
                    kept.append(binding)  # the others are dropped: the weak set shrinks too
        finally:
            binders_done.release()

    def terminator() -> None:
        while time.monotonic() < deadline and not binders_done.acquire(blocking=False):
            demo.terminate()
            demo.reset_terminate()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        assert _concurrently(binder, terminator) == []
    finally:
        sys.setswitchinterval(interval)
    binding = demo.bind(RunOptionsConfig(tag="after")).bind_input("x", X).bind_output("probs")
    binding.run()  # the last reset_terminate() left nothing terminated


def test_a_binding_made_during_terminate_is_terminated(demo) -> None:
    demo.terminate()
    binding = demo.bind(RunOptionsConfig(tag="late")).bind_input("x", X).bind_output("probs")
    with pytest.raises(RuntimeError, match="stopped by OnnxBackend.terminate"):
        binding.run()
    demo.reset_terminate()
    binding.run()


# -- 2. the user's ONNX Runtime logger callback --------------------------------------------------


@pytest.fixture
def user_logger() -> Iterator[list[tuple[int, str]]]:
    """A logger callback set by the user through onnxruntime; removed after the test."""
    lines: list[tuple[int, str]] = []
    ort.set_default_logger_callback(lambda sev, _cat, _id, _loc, msg: lines.append((sev, msg)))
    yield lines
    ort.set_default_logger_callback(None)


def test_a_users_logger_callback_survives_a_build(plugin_host, user_logger) -> None:
    backend = OnnxBackend.from_checkpoint(
        UNUSED.resolve(), session_options=WARNINGS, plugins=plugin_host
    )
    assert any(UNUSED_LINE in m for m in backend.build_messages)  # ortplug still captures
    assert any(UNUSED_LINE in m for _, m in user_logger)  # and the user got the line as well
    user_logger.clear()
    ort.InferenceSession(UNUSED.model_bytes, providers=["CPUExecutionProvider"])  # after the build
    assert [m for _, m in user_logger if UNUSED_LINE in m]


def test_a_users_severity_is_kept_across_a_build(plugin_host, user_logger) -> None:
    ort.set_default_logger_severity(3)  # errors only: the unused-initializer line is below
    try:
        backend = OnnxBackend.from_checkpoint(
            UNUSED.resolve(), session_options=WARNINGS, plugins=plugin_host
        )
        assert any(UNUSED_LINE in m for m in backend.build_messages)  # ortplug captures warnings
        ort.InferenceSession(UNUSED.model_bytes, providers=["CPUExecutionProvider"])
        assert user_logger == []  # neither during the build nor after it
    finally:
        ort.set_default_logger_severity(2)
    ort.InferenceSession(UNUSED.model_bytes, providers=["CPUExecutionProvider"])
    assert [m for _, m in user_logger if UNUSED_LINE in m]  # the callback is still the user's


def test_other_threads_log_lines_during_a_build_reach_the_user_not_the_build(
    plugin_host, user_logger
) -> None:
    checkpoint = InMemoryCheckpoint(models.long_chain_model(10_000)).resolve()  # ~0.4 s to load
    building = threading.Event()
    sessions = 0

    def other_thread() -> None:
        nonlocal sessions
        building.wait()
        while building.is_set():
            ort.InferenceSession(UNUSED.model_bytes, providers=["CPUExecutionProvider"])
            sessions += 1

    def build() -> OnnxBackend:
        building.set()
        try:
            return OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)
        finally:
            building.clear()

    thread = threading.Thread(target=other_thread)
    thread.start()
    backend = build()
    thread.join()
    assert sessions > 0
    assert not any(UNUSED_LINE in m for m in backend.build_messages)
    assert len([m for _, m in user_logger if UNUSED_LINE in m]) == sessions  # none lost


_FRESH_PROCESS = """
import sys
sys.path.insert(0, {tests!r})
{imports}
import onnxruntime as ort
from ortplug import OnnxBackend
from ortplug.testing import make_plugin_host
from test_thread_hardening import UNUSED, UNUSED_LINE
lines = []
ort.set_default_logger_callback(lambda *args: lines.append(args[-1]))
OnnxBackend.from_checkpoint(UNUSED.resolve(), plugins=make_plugin_host())
lines.clear()
ort.InferenceSession(UNUSED.model_bytes, providers=["CPUExecutionProvider"])
print(any(UNUSED_LINE in line for line in lines))
"""


@pytest.mark.parametrize(
    "imports",
    ["import onnxruntime; import ortplug.backend", "import ortplug.backend; import onnxruntime"],
)
def test_a_callback_set_before_the_first_build_survives_it(imports: str) -> None:
    code = _FRESH_PROCESS.format(imports=imports, tests=str(Path(__file__).parent))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


# -- 3. load_timeout_s times the build, not the wait for the build lock -------------------------


def test_concurrent_builds_each_get_their_full_load_timeout(plugin_host) -> None:
    checkpoint = InMemoryCheckpoint(models.long_chain_model(3000)).resolve()
    OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)  # warm: probes, first imports
    started = time.monotonic()
    OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)
    single = time.monotonic() - started
    # One build meets this easily, even slowed down by a loaded machine; 24 builds in a row do not.
    options = SessionOptionsConfig(load_timeout_s=10 * single)
    backends: list[OnnxBackend] = []

    def build() -> None:
        backends.append(
            OnnxBackend.from_checkpoint(checkpoint, session_options=options, plugins=plugin_host)
        )

    started = time.monotonic()
    assert _concurrently(*[build] * 24) == []
    assert len(backends) == 24
    # the last builds waited for the build lock longer than one time-out: only the build is timed
    assert time.monotonic() - started > options.load_timeout_s


# -- 4. other threads' warnings during builds -----------------------------------------------------


def test_builds_neither_swallow_nor_raise_other_threads_warnings(plugin_host) -> None:
    stop = threading.Event()
    counts = {"sent": 0, "raised": 0}

    def warner() -> None:
        while not stop.is_set():
            counts["sent"] += 1
            try:
                warnings.warn("from another thread", DeprecationWarning, stacklevel=1)
            except DeprecationWarning:
                counts["raised"] += 1

    built: list[OnnxBackend] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        thread = threading.Thread(target=warner)
        thread.start()
        try:
            for _ in range(20):
                built.append(
                    OnnxBackend.from_checkpoint(
                        UNUSED.resolve(), session_options=WARNINGS, plugins=plugin_host
                    )
                )
        finally:
            stop.set()
            thread.join()
    assert len(built) == 20
    assert counts["sent"] > 0 and counts["raised"] == counts["sent"]
    assert all(any(UNUSED_LINE in m for m in b.build_messages) for b in built)


def test_onnxruntimes_own_warnings_become_the_builds_messages(all_plugins) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ORT's warning is not raised: it is the cause
        with pytest.raises(ProviderNotRealizedError, match="not in available provider names"):
            OnnxBackend.from_checkpoint(
                UNUSED.resolve(),
                providers=["cuda", "cpu"],  # no CUDA in this wheel: ORT warns
                plugins=all_plugins,
            )
    with pytest.warns(UserWarning, match="not in available provider names"):  # ORT used directly
        ort.InferenceSession(UNUSED.model_bytes, providers=["NoSuchExecutionProvider"])


# -- 5. close() releases every native resource ---------------------------------------------------


def test_close_releases_the_session_and_every_threads_bindings(demo) -> None:
    session = weakref.ref(demo.ort_session._sess)  # ORT's native session
    targets = {"probs": np.empty((2, 3), np.float32)}
    demo.run_into({"x": X}, targets)
    ran, checked = threading.Event(), threading.Event()

    def other_thread() -> None:  # its run_into binding lives as long as the thread
        demo.run_into({"x": X}, {"probs": np.empty((2, 3), np.float32)})
        ran.set()
        checked.wait(60)

    thread = threading.Thread(target=other_thread)
    thread.start()
    assert ran.wait(60)
    binding = demo.bind(RunOptionsConfig(tag="kept")).bind_input("x", X).bind_output("probs")
    binding.run()
    demo.close()
    gc.collect()
    alive = session()
    checked.set()
    thread.join()
    assert alive is None  # while demo, binding and the other thread are still alive
    with pytest.raises(BackendClosedError, match="OnnxBackend is closed"):
        binding.run()
    with pytest.raises(BackendClosedError, match="OnnxBackend is closed"):
        binding.outputs()
    with pytest.raises(BackendClosedError, match="OnnxBackend is closed"):
        demo.run_into({"x": X}, targets)
    demo.terminate()  # harmless on a closed backend
    demo.reset_terminate()
