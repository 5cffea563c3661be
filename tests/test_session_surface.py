"""Introspection, profiling, live provider options and custom-op libraries on real sessions."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import models
import numpy as np
import onnx
import onnxruntime_extensions
import pytest
from onnx import TensorProto, helper
from ortplug import InMemoryCheckpoint, LocalCheckpoint, OnnxBackend, SessionOptionsConfig

DEMO = (files("ortplug.data") / "demo.onnx").read_bytes()


def _backend(model: bytes, plugins, **kwargs) -> OnnxBackend:
    return OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(model).resolve(), plugins=plugins, **kwargs
    )


def test_inputs_and_outputs_with_symbolic_shapes(plugin_host) -> None:
    backend = _backend(DEMO, plugin_host)
    (x,) = backend.inputs
    assert (x.name, x.type, x.kind, x.element_type, x.shape) == (
        "x",
        "tensor(float)",
        "tensor",
        "float",
        ("batch", 8),
    )
    assert x.dtype == np.float32 and x.symbolic_dims == ("batch",)
    assert [(o.name, o.shape) for o in backend.outputs] == [
        ("logits", ("batch", 3)),
        ("probs", ("batch", 3)),
    ]


def test_nested_types_are_described(plugin_host) -> None:
    (seq,) = _backend(models.sequence_model(), plugin_host).inputs
    assert (seq.kind, seq.element.kind, seq.element.element_type) == ("sequence", "tensor", "float")
    (opt,) = _backend(models.optional_model(), plugin_host).inputs
    assert (opt.kind, opt.element.type) == ("optional", "tensor(float)")
    (labels,) = _backend(models.zipmap_model(), plugin_host).outputs
    inner = labels.element
    assert (labels.kind, inner.kind, inner.key_type, inner.value.element_type) == (
        "sequence",
        "map",
        "string",
        "float",
    )
    assert labels.dtype is None


def test_overridable_initializers_are_listed(plugin_host) -> None:
    backend = _backend(models.initializer_input_model(), plugin_host)
    assert [(i.name, i.shape) for i in backend.overridable_initializers] == [("bias", (4,))]


def test_model_metadata(plugin_host) -> None:
    model = onnx.load_from_string(models.add_model())
    model.producer_name, model.domain, model.model_version, model.doc_string = (
        "ortplug-tests",
        "ai.test",
        7,
        "adds",
    )
    model.graph.doc_string = "a + b"
    helper.set_model_props(model, {"precision": "fp32", "owner": "qa"})
    info = _backend(model.SerializeToString(), plugin_host).model_info
    assert (info.producer, info.graph_name, info.domain, info.version) == (
        "ortplug-tests",
        "add",
        "ai.test",
        7,
    )
    assert (info.description, info.graph_description) == ("adds", "a + b")
    assert dict(info.custom) == {"precision": "fp32", "owner": "qa"}


def test_memory_info_and_provider_options(plugin_host) -> None:
    backend = _backend(DEMO, plugin_host)
    (x,) = backend.input_memory_info
    assert (x.name, x.location, x.device_id, x.mem_type) == ("x", "Cpu", 0, "DEFAULT")
    assert [m.name for m in backend.output_memory_info] == ["logits", "probs"]
    assert backend.provider_options == {"CPUExecutionProvider": {}}


def test_profiling_writes_a_trace_and_reports_its_path(plugin_host, tmp_path) -> None:
    options = SessionOptionsConfig(
        enable_profiling=True, profile_file_prefix=str(tmp_path / "trace")
    )
    backend = _backend(DEMO, plugin_host, session_options=options)
    assert backend.profiling_start_time_ns > 0
    backend.run({"x": np.ones((1, 8), np.float32)})
    path = Path(backend.end_profiling())
    assert path.parent == tmp_path and path.name.startswith("trace")
    events = json.loads(path.read_text())
    assert any(event.get("name", "").startswith("model_run") for event in events)


def test_end_profiling_without_profiling_says_how(plugin_host) -> None:
    backend = _backend(DEMO, plugin_host)
    assert backend.profiling_start_time_ns == 0
    with pytest.raises(
        RuntimeError, match=r"build it with SessionOptionsConfig\(enable_profiling=True\)"
    ):
        backend.end_profiling()


def test_ep_dynamic_options_reach_the_live_session(plugin_host) -> None:
    backend = _backend(DEMO, plugin_host)
    backend.set_ep_dynamic_options({"ep.dynamic.workload_type": "Efficient"})
    assert backend.run({"x": np.ones((1, 8), np.float32)})["probs"].shape == (1, 3)
    backend.set_ep_dynamic_options({"ep.dynamic.workload_type": "Default"})
    with pytest.raises(ValueError, match="expected a non-empty mapping"):
        backend.set_ep_dynamic_options({})
    backend.close()
    with pytest.raises(RuntimeError, match="closed"):
        backend.set_ep_dynamic_options({"ep.dynamic.workload_type": "Default"})


def _upper_model() -> bytes:
    graph = helper.make_graph(
        [helper.make_node("StringUpper", ["s"], ["u"], domain="ai.onnx.contrib")],
        "upper",
        [helper.make_tensor_value_info("s", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info("u", TensorProto.STRING, ["n"])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.contrib", 1)],
    )
    model.ir_version = 8
    return model.SerializeToString()


def test_custom_op_libraries_from_session_options(plugin_host) -> None:
    library = onnxruntime_extensions.get_library_path()
    with pytest.raises(ValueError, match="StringUpper"):
        _backend(_upper_model(), plugin_host)
    backend = _backend(
        _upper_model(),
        plugin_host,
        session_options=SessionOptionsConfig(custom_op_libraries=library),
    )
    assert backend.run({"s": np.array(["ab", "Cd"], dtype=object)})["u"].tolist() == ["AB", "CD"]


def test_register_custom_op_library_rebuilds_with_the_same_options(plugin_host, tmp_path) -> None:
    model = models.write(tmp_path, "demo.onnx", DEMO)
    options = SessionOptionsConfig(
        intra_op_num_threads=1, config_entries={"session.intra_op.allow_spinning": "0"}
    )
    backend = OnnxBackend.from_checkpoint(
        LocalCheckpoint(model).resolve(), session_options=options, plugins=plugin_host
    )
    before = backend.run({"x": np.ones((1, 8), np.float32)})["probs"]
    library = onnxruntime_extensions.get_library_path()
    backend.register_custom_op_library(library)
    assert backend.session_options.custom_op_libraries == (library,)
    assert backend.session_options.intra_op_num_threads == 1
    assert backend.session_options.config_entries["session.intra_op.allow_spinning"] == "0"
    np.testing.assert_array_equal(backend.run({"x": np.ones((1, 8), np.float32)})["probs"], before)


def test_register_custom_op_library_errors_keep_the_backend(plugin_host, tmp_path) -> None:
    backend = _backend(DEMO, plugin_host)
    with pytest.raises(
        FileNotFoundError, match="register_custom_op_library: file not found: .*nope.so"
    ):
        backend.register_custom_op_library(tmp_path / "nope.so")
    not_a_library = tmp_path / "fake.so"
    not_a_library.write_bytes(b"not ELF")
    with pytest.raises(ValueError, match="fake.so"):
        backend.register_custom_op_library(not_a_library)
    assert backend.run({"x": np.ones((1, 8), np.float32)})["probs"].shape == (1, 3)
    import onnxruntime as ort

    wrapped = OnnxBackend(backend.metadata, ort.InferenceSession(DEMO))
    with pytest.raises(RuntimeError, match="wraps a session it did not build"):
        wrapped.register_custom_op_library(onnxruntime_extensions.get_library_path())
