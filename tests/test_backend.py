"""OnnxBackend on real ONNX Runtime sessions: the seed contract, light models, and bad input."""

from __future__ import annotations

import threading
from types import MappingProxyType

import models
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from ortplug import (
    CheckpointMetadata,
    InferenceBackend,
    InMemoryCheckpoint,
    InputValidationError,
    LocalCheckpoint,
    OnnxBackend,
    SessionOptionsConfig,
)


@pytest.fixture
def adder(plugin_host) -> OnnxBackend:
    return OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(models.add_model()).resolve(), plugins=plugin_host
    )


def _feed(a: float = 1.0, b: float = 2.0) -> dict[str, np.ndarray]:
    return {"a": np.full((1, 4), a, np.float32), "b": np.full((1, 4), b, np.float32)}


def test_run_returns_every_output_by_name(adder) -> None:
    out = adder.run(_feed(1.5, 2.0))
    assert list(out) == ["c"]
    np.testing.assert_array_equal(out["c"], np.full((1, 4), 3.5, np.float32))
    assert isinstance(adder, InferenceBackend)
    assert adder.providers == ("CPUExecutionProvider",)


def test_run_after_close_raises_runtime_error(adder) -> None:
    adder.close()
    adder.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        adder.run(_feed())
    assert adder.closed


def test_context_manager_closes(plugin_host) -> None:
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    with OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host) as backend:
        assert backend.run(_feed())["c"].shape == (1, 4)
    with pytest.raises(RuntimeError):
        backend.run(_feed())


def test_wraps_a_session_the_caller_owns() -> None:
    session = ort.InferenceSession(models.add_model(), providers=["CPUExecutionProvider"])
    meta = CheckpointMetadata(input_names=["a", "b"], output_names=["c"])
    backend = OnnxBackend(meta, session)
    np.testing.assert_array_equal(backend.run(_feed(1, 1))["c"], np.full((1, 4), 2, np.float32))
    assert backend.metadata is meta


def test_metadata_naming_missing_inputs_is_rejected() -> None:
    session = ort.InferenceSession(models.add_model(), providers=["CPUExecutionProvider"])
    meta = CheckpointMetadata(input_names=["a", "q"], output_names=["c"])
    with pytest.raises(ValueError, match=r"input_names \['q'\] not in the model.*\['a', 'b'\]"):
        OnnxBackend(meta, session)


def test_accepts_any_mapping_and_is_thread_safe(adder) -> None:
    results = []

    def worker(i: int) -> None:
        results.append(adder.run(MappingProxyType(_feed(i, i)))["c"][0, 0])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [2.0 * i for i in range(8)]


def test_local_checkpoint_and_session_options(tmp_path, plugin_host) -> None:
    path = models.write(tmp_path, "mm.onnx", models.matmul_model())
    options = SessionOptionsConfig(graph_optimization_level="disable", intra_op_num_threads=1)
    backend = OnnxBackend.from_checkpoint(
        LocalCheckpoint(path).resolve(), session_options=options, plugins=plugin_host
    )
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    expected = x @ np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(backend.run({"x": x})["y"], expected)


def test_from_checkpoint_resolves_unresolved_checkpoints(tmp_path, plugin_host) -> None:
    path = models.write(tmp_path, "add.onnx", models.add_model())
    backend = OnnxBackend.from_checkpoint(LocalCheckpoint(path), plugins=plugin_host)
    assert backend.metadata.input_names == ("a", "b")
    with pytest.raises(TypeError, match="expected a ResolvedCheckpoint"):
        OnnxBackend.from_checkpoint(str(path), plugins=plugin_host)  # type: ignore[arg-type]


LIGHT_MODELS = sorted(models.LIGHT_DIR.glob("light_*.onnx"))


@pytest.mark.parametrize("path", LIGHT_MODELS, ids=lambda p: p.stem)
def test_light_models_give_their_expected_outputs(path, plugin_host) -> None:
    backend = OnnxBackend.from_checkpoint(LocalCheckpoint(path).resolve(), plugins=plugin_host)
    (spec,) = backend.input_specs
    shape = tuple(spec.shape)
    n = int(np.prod(shape))
    x = (np.arange(n).reshape(shape) / n).astype(np.float32)  # the onnx backend test's input
    out = backend.run({spec.name: x})
    expected = onnx.TensorProto()
    expected.ParseFromString(path.with_name(path.stem + "_output_0.pb").read_bytes())
    (name,) = backend.metadata.output_names
    np.testing.assert_allclose(out[name], numpy_helper.to_array(expected), rtol=1e-3, atol=1e-5)


# -- bad input: each names the input, the expected and the given -------------------------------


@pytest.mark.parametrize(
    ("feed", "fragments"),
    [
        ({"a": np.ones((1, 4), np.float32)}, ["missing input 'b'", "['a', 'b']"]),
        (
            {**_feed(), "z": np.ones((1, 4), np.float32)},
            ["unknown input 'z'", "the model's inputs are ['a', 'b']"],
        ),
        (
            {"a": np.ones((1, 4), np.float32), "B": np.ones((1, 4), np.float32)},
            ["unknown input 'B' (did you mean 'b'?)", "missing input 'b'"],
        ),
        (
            {"a": np.ones((1, 4)), "b": np.ones((1, 4), np.float32)},
            ["input 'a'", "float32", "float64"],
        ),
        (
            {"a": np.ones(4, np.float32), "b": np.ones((1, 4), np.float32)},
            ["input 'a'", "expected rank 2", "got rank 1"],
        ),
        (
            {"a": np.ones((1, 5), np.float32), "b": np.ones((1, 4), np.float32)},
            ["input 'a'", "dimension 1 must be 4", "got 5"],
        ),
    ],
    ids=["missing", "extra", "misspelt", "dtype", "rank", "static-dim"],
)
def test_bad_inputs_are_named(adder, feed, fragments) -> None:
    with pytest.raises(InputValidationError) as info:
        adder.run(feed)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert adder.run(_feed())["c"][0, 0] == 3.0  # the backend is still usable


def test_shared_symbolic_dimension_mismatch_is_named(plugin_host) -> None:
    backend = OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(models.shared_dim_model()).resolve(), plugins=plugin_host
    )
    with pytest.raises(InputValidationError, match="disagree on dimension 'batch': 2 vs 3"):
        backend.run({"a": np.ones((2, 4), np.float32), "b": np.ones((3, 4), np.float32)})


def test_inputs_in_model_order_and_bad_containers(adder) -> None:
    one = np.ones((1, 4), np.float32)
    assert adder.run([one, 2 * one])["c"][0, 0] == 3.0
    with pytest.raises(
        TypeError,
        match=r"expected a mapping of input name to value, or a list in model order \(\['a', 'b'\]\), got ndarray",
    ):
        adder.run(one)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"got 3 positional values, the model takes at most 2"):
        adder.run([one, one, one])


def test_overridable_initializer_can_be_fed(plugin_host) -> None:
    backend = OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(models.initializer_input_model()).resolve(), plugins=plugin_host
    )
    x = np.zeros((1, 4), np.float32)
    assert backend.run({"x": x})["y"][0, 0] == 1.0
    assert backend.run({"x": x, "bias": np.full(4, 5, np.float32)})["y"][0, 0] == 5.0
