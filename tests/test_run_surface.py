"""Every run form on real sessions: feeds, output selection, value types, run options, terminate."""

from __future__ import annotations

import threading
import time

import ml_dtypes
import models
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto
from ortplug import (
    InMemoryCheckpoint,
    InputValidationError,
    OnnxBackend,
    RunOptionsConfig,
    RunTerminatedError,
)


def _backend(model: bytes, plugins, **kwargs) -> OnnxBackend:
    return OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(model).resolve(), plugins=plugins, **kwargs
    )


@pytest.fixture
def demo(plugin_host) -> OnnxBackend:
    from importlib.resources import files

    return _backend((files("ortplug.data") / "demo.onnx").read_bytes(), plugin_host)


X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)


def test_outputs_can_be_selected_by_name(demo) -> None:
    everything = demo.run({"x": X})
    assert list(everything) == ["logits", "probs"]
    only = demo.run({"x": X}, ["probs"])
    assert list(only) == ["probs"]
    np.testing.assert_array_equal(only["probs"], everything["probs"])
    assert list(demo.run([X], "logits")) == ["logits"]


def test_unknown_output_names_are_listed(demo) -> None:
    with pytest.raises(
        ValueError,
        match=r"outputs: \['prob'\] not outputs of the model; its outputs are \['logits', 'probs'\]",
    ):
        demo.run({"x": X}, ["prob"])
    with pytest.raises(ValueError, match="outputs: expected a non-empty list"):
        demo.run({"x": X}, [])


def test_overridable_initializers_can_follow_inputs_in_model_order(plugin_host) -> None:
    backend = _backend(models.initializer_input_model(), plugin_host)
    x = np.zeros((1, 4), np.float32)
    assert backend.run([x])["y"].tolist() == [[1, 1, 1, 1]]  # stored bias
    assert backend.run([x, np.full(4, 5, np.float32)])["y"].tolist() == [[5, 5, 5, 5]]


@pytest.mark.parametrize(
    ("elem", "values"),
    [
        (TensorProto.STRING, np.array(["ab", "çd", ""], dtype=object)),
        (TensorProto.BOOL, np.array([True, False, True])),
        (TensorProto.FLOAT16, np.array([0.5, -2, 65504], np.float16)),
        (TensorProto.DOUBLE, np.array([1e-300, 2, 3])),
        (TensorProto.INT8, np.array([-128, 0, 127], np.int8)),
        (TensorProto.UINT8, np.array([0, 1, 255], np.uint8)),
        (TensorProto.INT16, np.array([-3, 0, 3], np.int16)),
        (TensorProto.UINT16, np.array([0, 1, 65535], np.uint16)),
        (TensorProto.INT32, np.array([-(2**31), 0, 2**31 - 1], np.int32)),
        (TensorProto.UINT32, np.array([0, 1, 2**32 - 1], np.uint32)),
        (TensorProto.INT64, np.array([-(2**63), 0, 2**63 - 1], np.int64)),
        (TensorProto.UINT64, np.array([0, 1, 2**64 - 1], np.uint64)),
    ],
)
def test_every_element_type_round_trips(plugin_host, elem, values) -> None:
    backend = _backend(models.identity_model(elem, ["n"]), plugin_host)
    result = backend.run({"x": values})["y"]
    assert result.dtype == values.dtype and result.tolist() == values.tolist()


def test_zero_sized_tensors_run(plugin_host) -> None:
    backend = _backend(models.identity_model(TensorProto.FLOAT, ["n", 3]), plugin_host)
    assert backend.run({"x": np.zeros((0, 3), np.float32)})["y"].shape == (0, 3)


def test_bfloat16_arrays_are_accepted(plugin_host) -> None:
    backend = _backend(models.bf16_input_model(), plugin_host)
    values = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
    assert backend.run({"x": values})["y"].tolist() == [1.5, -2.0]
    as_ort_value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
        values.view(np.uint16), TensorProto.BFLOAT16
    )
    assert backend.run({"x": as_ort_value})["y"].tolist() == [1.5, -2.0]


def test_sequences_maps_and_optionals(plugin_host) -> None:
    sequence = _backend(models.sequence_model(), plugin_host)
    assert sequence.run({"seq": [np.ones(2, np.float32), np.ones(5, np.float32)]})["count"] == 2
    maps = _backend(models.zipmap_model(), plugin_host)
    (labels,) = maps.run({"scores": np.array([[0.25, 0.75]], np.float32)})["labels"]
    assert labels == {"cat": 0.25, "dog": 0.75}
    optional = _backend(models.optional_model(), plugin_host)
    assert bool(optional.run({"o": np.ones(2, np.float32)})["has"]) is True
    assert bool(optional.run({"o": None})["has"]) is False
    assert bool(optional.run({})["has"]) is False  # an optional input may be omitted


def test_if_and_loop_subgraphs(plugin_host) -> None:
    backend = _backend(models.if_loop_model(), plugin_host)
    x = np.array([1, 2], np.float32)
    assert backend.run({"flag": np.array(True), "x": x})["y"].tolist() == [2, 3]
    result = backend.run({"flag": np.array(False), "x": x})
    assert result["y"].tolist() == [0, 1] and result["total"].tolist() == [3, 6]


def test_run_options_are_applied() -> None:
    config = RunOptionsConfig(
        tag="batch-7",
        log_severity_level=3,
        log_verbosity_level=1,
        only_execute_path_to_fetches=True,
        config_entries={"memory.enable_memory_arena_shrinkage": "cpu:0"},
    )
    options = config.to_ort(ort)
    assert (options.logid, options.log_severity_level, options.log_verbosity_level) == (
        "batch-7",
        3,
        1,
    )
    assert options.only_execute_path_to_fetches is True
    assert options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    assert RunOptionsConfig.from_dict({"tag": "t"}) == RunOptionsConfig(tag="t")


def test_a_run_with_its_own_options(demo) -> None:
    options = RunOptionsConfig(tag="probe", only_execute_path_to_fetches=True)
    result = demo.run({"x": X}, ["logits"], run_options=options)
    np.testing.assert_allclose(result["logits"], demo.run({"x": X})["logits"])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tag": 3}, "tag: expected a string or null, got 3"),
        ({"log_severity_level": 5}, "log_severity_level: expected an integer 0..4"),
        (
            {"only_execute_path_to_fetches": "yes"},
            "only_execute_path_to_fetches: expected true, false or null",
        ),
        ({"config_entries": {"k": 1}}, "config_entries: expected string keys and values"),
        ({"terminate": True}, r"unknown field\(s\) \['terminate'\]"),
    ],
)
def test_bad_run_options_name_the_field(data, message) -> None:
    with pytest.raises(ValueError, match=message):
        RunOptionsConfig.from_dict(data)


def test_terminate_stops_a_running_run_and_the_backend_stays_usable(plugin_host) -> None:
    backend = _backend(models.slow_loop_model(), plugin_host)
    caught: list[BaseException] = []

    x = np.eye(64, dtype=np.float32)

    def run() -> None:
        try:
            backend.run({"trips": np.array(10**9), "x": x})
        except BaseException as exc:
            caught.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.3)
    backend.terminate()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert len(caught) == 1 and isinstance(caught[0], RunTerminatedError)
    assert "reset_terminate()" in str(caught[0])
    backend.reset_terminate()
    np.testing.assert_array_equal(backend.run({"trips": np.array(2), "x": x})["y"], x)


def test_terminate_before_run_refuses_until_reset(demo) -> None:
    demo.terminate()
    with pytest.raises(RunTerminatedError, match="stopped by OnnxBackend.terminate"):
        demo.run({"x": X})
    with pytest.raises(RunTerminatedError):
        demo.run({"x": X}, run_options=RunOptionsConfig(tag="mine"))
    demo.reset_terminate()
    assert demo.run({"x": X})["probs"].shape == (2, 3)


def test_bad_values_are_still_explained(demo) -> None:
    with pytest.raises(
        InputValidationError,
        match=r"input 'x': expected dtype float32 \(tensor\(float\)\), got float64",
    ):
        demo.run({"x": X.astype(np.float64)})
