"""run_into, IO binding and async runs on real sessions."""

from __future__ import annotations

import asyncio
import threading
from importlib.resources import files

import models
import numpy as np
import onnxruntime as ort
import pytest
from ortplug import (
    InMemoryCheckpoint,
    InputValidationError,
    OnnxBackend,
    RunOptionsConfig,
    SessionOptionsConfig,
)

X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)


@pytest.fixture
def demo(plugin_host) -> OnnxBackend:
    data = (files("ortplug.data") / "demo.onnx").read_bytes()
    return OnnxBackend.from_checkpoint(InMemoryCheckpoint(data).resolve(), plugins=plugin_host)


def _empty(batch: int = 2) -> dict[str, np.ndarray]:
    return {"logits": np.empty((batch, 3), np.float32), "probs": np.empty((batch, 3), np.float32)}


def test_run_into_writes_into_the_callers_arrays(demo) -> None:
    expected = demo.run({"x": X})
    targets = _empty()
    returned = demo.run_into({"x": X}, targets)
    assert returned is targets
    np.testing.assert_allclose(targets["probs"], expected["probs"])
    first = targets["probs"]
    demo.run_into({"x": -X}, targets)  # same arrays, new values, no new allocation
    assert targets["probs"] is first
    np.testing.assert_allclose(first, demo.run({"x": -X})["probs"])
    one = {"probs": np.empty((1, 3), np.float32)}
    demo.run_into([X[:1]], one)  # new shapes re-checked and re-bound; inputs in model order
    np.testing.assert_allclose(one["probs"], expected["probs"][:1])


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        (
            {"probs": np.empty((2, 3), np.float64)},
            r"output 'probs': expected dtype float32 \(tensor\(float\)\), got float64",
        ),
        (
            {"probs": np.empty((3, 3), np.float32)},
            r"output 'probs': expected shape \(2, 3\) for these inputs, got \(3, 3\)",
        ),
        (
            {"probs": np.empty((2, 3, 1), np.float32)},
            r"expected shape \(2, 3\) for these inputs, got \(2, 3, 1\)",
        ),
        (
            {"prob": np.empty((2, 3), np.float32)},
            r"'prob' is not an output of the model; its outputs are \['logits', 'probs'\]",
        ),
        ({"probs": np.empty((3, 2), np.float32).T}, "expected a writeable C-contiguous array"),
        ({"probs": [0.0] * 6}, "output 'probs': expected a numpy array, got list"),
    ],
)
def test_run_into_checks_before_running(demo, targets, message) -> None:
    with pytest.raises(ValueError, match=message):
        demo.run_into({"x": X}, targets)


def test_run_into_explains_bad_inputs(demo) -> None:
    with pytest.raises(InputValidationError, match="input 'x': expected dtype float32"):
        demo.run_into({"x": X.astype(np.int64)}, {"probs": np.empty((2, 3), np.float32)})
    with pytest.raises(
        TypeError, match="expected a mapping of output name to a preallocated numpy array"
    ):
        demo.run_into({"x": X}, [np.empty((2, 3), np.float32)])  # type: ignore[arg-type]


def test_run_into_from_several_threads(demo) -> None:
    errors = []

    def work(seed: int) -> None:
        x = np.random.default_rng(seed).standard_normal((2, 8)).astype(np.float32)
        targets = _empty()
        for _ in range(200):
            demo.run_into({"x": x}, targets)
            if not np.allclose(targets["probs"], demo.run({"x": x})["probs"]):
                errors.append(seed)
                return

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_binding_runs_many_times_on_bound_buffers(demo) -> None:
    x = X.copy()
    probs = np.empty((2, 3), np.float32)
    binding = demo.bind().bind_input("x", x).bind_output("probs", probs).bind_output("logits")
    binding.run()
    np.testing.assert_allclose(probs, demo.run({"x": x})["probs"])
    x *= -1  # inputs are read from the bound buffer on every run
    binding.run()
    expected = demo.run({"x": x})
    np.testing.assert_allclose(probs, expected["probs"])
    outputs = binding.outputs()
    assert list(outputs) == ["probs", "logits"]
    np.testing.assert_allclose(outputs["logits"], expected["logits"])
    values = binding.ort_values()
    assert isinstance(values["logits"], ort.OrtValue) and values["logits"].device_name() == "cpu"
    binding.synchronize_inputs()
    binding.synchronize_outputs()


def test_binding_accepts_ort_values_and_can_be_cleared(demo) -> None:
    binding = demo.bind()
    binding.bind_input("x", ort.OrtValue.ortvalue_from_numpy(X))
    target = ort.OrtValue.ortvalue_from_numpy(np.empty((2, 3), np.float32))
    binding.bind_output("probs", target).run()
    np.testing.assert_allclose(target.numpy(), demo.run({"x": X})["probs"])
    binding.clear_outputs()
    binding.bind_output("logits").run()
    assert list(binding.outputs()) == ["logits"]
    binding.clear_inputs()
    with pytest.raises(RuntimeError, match="the bound run failed"):
        binding.run()  # no input bound any more


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (
            lambda b: b.bind_input("z", X),
            r"bind_input: 'z' is not an input of the model; inputs: \['x'\]",
        ),
        (
            lambda b: b.bind_input("x", X.astype(np.float64)),
            "bind_input: input 'x' expects dtype float32",
        ),
        (lambda b: b.bind_output("prob"), r"bind_output: 'prob' is not an output of the model"),
        (
            lambda b: b.bind_output("probs", np.empty((2, 3), np.int32)),
            "output 'probs' is tensor\\(float\\), got an array of dtype int32",
        ),
        (
            lambda b: b.bind_output("probs", device=""),
            "bind_output: device: expected a name like 'cpu' or 'cuda'",
        ),
        (
            lambda b: b.bind_output("probs", device="cuda"),
            r"bind_output: device 'cuda' is not a device of this session \(its providers: "
            r"CPUExecutionProvider\); bind to 'cpu'",
        ),
    ],
)
def test_binding_rejects_bad_names_and_types(demo, action, message) -> None:
    with pytest.raises(ValueError, match=message):
        action(demo.bind())


def test_binding_of_a_closed_backend_refuses_to_run(demo) -> None:
    binding = demo.bind().bind_input("x", X).bind_output("probs")
    binding.run()
    demo.close()
    with pytest.raises(RuntimeError, match="OnnxBackend is closed"):
        binding.run()


def test_run_async_calls_back_with_outputs_or_the_error(demo) -> None:
    done = threading.Event()
    received: list[tuple[object, object]] = []

    def callback(outputs, error) -> None:
        received.append((outputs, error))
        done.set()

    demo.run_async({"x": X}, callback, ["probs"])
    assert done.wait(10)
    outputs, error = received[0]
    assert error is None and list(outputs) == ["probs"]
    np.testing.assert_allclose(outputs["probs"], demo.run({"x": X})["probs"])
    done.clear()
    demo.run_async({"x": X[:, :5].copy()}, callback)
    assert done.wait(10)
    outputs, error = received[1]
    assert outputs is None and isinstance(error, InputValidationError)
    assert "input 'x': dimension 1 must be 8" in str(error)
    with pytest.raises(InputValidationError, match="unknown input 'y'"):
        demo.run_async({"y": X}, callback)


def test_run_async_and_arun_serve_a_session_with_one_intra_op_thread(plugin_host) -> None:
    """ONNX Runtime refuses run_async on a session without an intra-op pool (one thread, as a
    one-CPU Ray actor sizes it): the run goes on ortplug's thread, outputs and errors as ever."""
    model = (files("ortplug.data") / "demo.onnx").read_bytes()
    one = SessionOptionsConfig(intra_op_num_threads=1)
    raw = ort.InferenceSession(model, one.to_ort(ort), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="intra op thread pool must have at least one thread"):
        raw.run_async(None, {"x": X}, lambda *_: None, None)
    backend = OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(model).resolve(),
        providers=["cpu"],
        plugins=plugin_host,
        session_options=one,
    )
    done = threading.Event()
    received: list[tuple[object, object]] = []

    def callback(outputs, error) -> None:
        received.append((outputs, error))
        done.set()

    backend.run_async({"x": X}, callback)
    assert done.wait(10)
    outputs, error = received[0]
    assert error is None
    np.testing.assert_allclose(outputs["probs"], raw.run(["probs"], {"x": X})[0])
    done.clear()
    backend.run_async({"x": X[:, :5].copy()}, callback)
    assert done.wait(10)
    assert received[1][0] is None and isinstance(received[1][1], InputValidationError)
    awaited = asyncio.run(backend.arun({"x": X}, ["logits"]))
    np.testing.assert_allclose(awaited["logits"], raw.run(["logits"], {"x": X})[0])


def test_a_run_async_refused_at_once_keeps_none_of_its_run_options(demo) -> None:
    """A run refused before it starts forgets the caller's run options, as a finished run does
    (each refused call's stayed registered for terminate() for the backend's life)."""
    for _ in range(3):
        with pytest.raises(InputValidationError, match="unknown input 'y'"):
            demo.run_async({"y": X}, lambda outputs, error: None, run_options=RunOptionsConfig())
    assert not demo._inflight._own


_EXIT_DURING_CALLBACK = """
import sys, time
import numpy as np
from ortplug import InMemoryCheckpoint, OnnxBackend
from ortplug.testing import demo_model

backend = OnnxBackend.from_checkpoint(InMemoryCheckpoint(open(demo_model(), "rb").read()))

def slow(outputs, error):
    time.sleep(0.3)
    print("callback returned", error, flush=True)

backend.run_async({"x": np.zeros((1, 8), np.float32)}, slow)  # the interpreter exits now
"""


def test_exiting_while_a_callback_runs_waits_for_it() -> None:
    """ONNX Runtime's thread, unwound inside a callback at exit, used to abort the process."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _EXIT_DURING_CALLBACK], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout) == (0, "callback returned None\n"), done.stderr


def test_arun_awaits_without_blocking_the_loop(demo) -> None:
    async def main() -> list[object]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        results = await asyncio.gather(*(demo.arun({"x": X * i}) for i in range(8)))
        task.cancel()
        return [results, ticks]

    results, ticks = asyncio.run(main())
    assert len(results) == 8 and ticks > 0
    np.testing.assert_allclose(results[3]["probs"], demo.run({"x": X * 3})["probs"])


def test_arun_raises_the_explained_error(demo) -> None:
    async def main() -> None:
        await demo.arun({"x": X.astype(np.float64)})

    with pytest.raises(InputValidationError, match="expected dtype float32"):
        asyncio.run(main())


def test_a_model_with_external_weights_given_in_memory(plugin_host) -> None:
    model = models.external_weights_model()
    x = np.ones(4, np.float32)
    by_file = InMemoryCheckpoint(
        model, external_data={"weights.bin": np.full(4, 5, np.float32).tobytes()}
    )
    backend = OnnxBackend.from_checkpoint(by_file.resolve(), plugins=plugin_host)
    assert backend.run({"x": x})["y"].tolist() == [6, 6, 6, 6]
    by_name = InMemoryCheckpoint(model, initializers={"w": np.full(4, 10, np.float32)})
    backend = OnnxBackend.from_checkpoint(by_name.resolve(), plugins=plugin_host)
    assert backend.run({"x": x})["y"].tolist() == [11, 11, 11, 11]
    assert by_name.resolve().fingerprint() != by_file.resolve().fingerprint()
    with pytest.raises(
        ValueError, match=r"initializers: \['v'\] are not initializers of the model; it has \['w'\]"
    ):
        InMemoryCheckpoint(model, initializers={"v": x}).resolve()
    with pytest.raises(ValueError, match="could not load"):
        OnnxBackend.from_checkpoint(InMemoryCheckpoint(model).resolve(), plugins=plugin_host)


def test_terminate_covers_bindings_with_their_own_run_options(demo) -> None:
    from ortplug import RunOptionsConfig, RunTerminatedError

    binding = demo.bind(RunOptionsConfig(tag="bound")).bind_input("x", X).bind_output("probs")
    binding.run()
    demo.terminate()
    with pytest.raises(RunTerminatedError, match="bound run was stopped by OnnxBackend.terminate"):
        binding.run()
    with pytest.raises(RunTerminatedError):
        demo.run_into({"x": X}, {"probs": np.empty((2, 3), np.float32)})
    demo.reset_terminate()
    binding.run()
    np.testing.assert_allclose(binding.outputs()["probs"], demo.run({"x": X})["probs"])


def test_in_memory_weights_stay_valid_for_the_session_life(plugin_host) -> None:
    import gc

    strided = np.arange(8, dtype=np.float32)[
        ::2
    ]  # not contiguous: the checkpoint keeps its own copy
    checkpoint = InMemoryCheckpoint(models.external_weights_model(), initializers={"w": strided})
    backend = OnnxBackend.from_checkpoint(checkpoint.resolve(), plugins=plugin_host)
    del checkpoint, strided
    gc.collect()
    junk = [
        np.full(4, -1.0, np.float32) for _ in range(1000)
    ]  # reuse freed memory if any was freed
    for _ in range(3):
        assert backend.run({"x": np.zeros(4, np.float32)})["y"].tolist() == [0, 2, 4, 6]
    assert len(junk) == 1000
