"""Verification of what is built (issue 30, items 4-6): the bytes verified are the bytes
fingerprinted, a reused IO binding never returns accumulated sequence items, and the CPU
reference is built with the caller's session options. Real models (``onnx.helper``), real
ONNX Runtime sessions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import onnx
import onnxruntime_extensions
import pytest
from onnx import TensorProto, helper, numpy_helper
from ortplug import (
    InMemoryCheckpoint,
    LocalCheckpoint,
    OnnxBackend,
    SessionOptionsConfig,
    Verification,
    VerificationError,
)
from ortplug.checkpoint import select_variant
from ortplug.testing import make_plugin_host
from ortplug_misbehaving import MisbehavingPlugin, MisbehavingProvider
from variant_models import with_variant


def _model(
    nodes, inputs, outputs, opset: int = 18, domains=(), name: str = "g", initializers=()
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in domains)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _split_to_sequence() -> onnx.ModelProto:
    """s = SplitToSequence(x) along axis 0: a sequence of the rows of x[4, 8]."""
    return _model(
        [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [8])],
    )


# -- item 4: the bytes verified are the bytes fingerprinted --------------------------------------


@attrs.frozen
class _Replacing(MisbehavingProvider):
    """A correct test accelerator whose build ends by renaming ``new`` over ``old`` (a deploy or
    an rsync landing while the session is verified): the session holds the old file's bytes."""

    new: str = ""
    old: str = ""

    def serve(self, session: Any) -> Any:
        if os.path.exists(self.new):
            os.replace(self.new, self.old)
        return session


def _scaled(weights: np.ndarray) -> onnx.ModelProto:
    """y = x * w for x[1, 64]."""
    return _model(
        [helper.make_node("Mul", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        initializers=[numpy_helper.from_array(weights, "w")],
    )


@pytest.mark.parametrize("replaced", ["m.int8.onnx", "m.int8.data"])
def test_a_file_replaced_while_it_is_verified_does_not_inherit_the_pass(
    tmp_path: Path, replaced: str
) -> None:
    weights = np.linspace(0.5, 1.5, 64, dtype=np.float32).reshape(1, 64)
    path = with_variant(tmp_path, _scaled(weights), _scaled(weights))
    onnx.save_model(  # the variant's weights in an external-data file
        _scaled(weights),
        tmp_path / "m.int8.onnx",
        save_as_external_data=True,
        location="m.int8.data",
        size_threshold=0,
    )
    staged = tmp_path / "staged"  # a broken variant: its weights tripled, in either file
    staged.mkdir()
    (staged / "m.int8.onnx").write_bytes(_scaled(weights * 3).SerializeToString())
    (staged / "m.int8.data").write_bytes((weights * 3).tobytes())
    racing = _Replacing("no_node", new=str(staged / replaced), old=str(tmp_path / replaced))
    plugins = make_plugin_host(("bad", MisbehavingPlugin("no_node")))  # type: ignore[arg-type]

    def build() -> OnnxBackend:
        checkpoint = select_variant(LocalCheckpoint(path).resolve(), "int8")
        return OnnxBackend.from_checkpoint(
            checkpoint, providers=[racing, "cpu"], plugins=plugins, verify=True
        )

    first = build().report.verification  # built from the good files, which are then replaced
    assert first is not None and first.passed and not first.cached
    assert not (staged / replaced).exists()
    with pytest.raises(VerificationError, match="variant int8 .* failed verification: output 'y'"):
        build()  # the next build checks the files now there (it read the good files' PASS)


# -- item 5: bindings and sequences ---------------------------------------------------------------


def test_a_reused_binding_returns_each_runs_sequence_items_only() -> None:
    model = _split_to_sequence().SerializeToString()
    backend = OnnxBackend.from_checkpoint(InMemoryCheckpoint(model).resolve(), providers=["cpu"])
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    binding = backend.bind().bind_input("x", x).bind_output("s")
    counts = []
    for _ in range(3):
        binding.run()
        counts.append(len(binding.outputs()["s"]))
    assert counts == [4, 4, 4]  # ONNX Runtime appended: 4, 8, 12
    np.testing.assert_array_equal(binding.outputs()["s"][3], x[3])


def test_an_identical_variant_of_a_sequence_output_model_verifies(tmp_path: Path) -> None:
    path = with_variant(tmp_path, _split_to_sequence(), _split_to_sequence())
    checkpoint = select_variant(LocalCheckpoint(path).resolve(), "int8")
    backend = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"], verify=True)
    verdict = backend.report.verification
    assert verdict is not None and verdict.passed, verdict
    assert backend.metadata.precision == "int8"


def test_a_stale_binding_on_a_sequence_output_model_is_rejected_not_a_crash() -> None:
    """The output bound afresh is left without a value by a provider that does not run again:
    reading it would crash ONNX Runtime; the verdict says it instead."""
    model = _split_to_sequence().SerializeToString()
    plugins = make_plugin_host(("bad", MisbehavingPlugin("stale")))  # type: ignore[arg-type]
    with pytest.raises(
        VerificationError, match="stale outputs: its second run wrote no value for output 's'"
    ):
        OnnxBackend.from_checkpoint(
            InMemoryCheckpoint(model).resolve(),
            providers=[MisbehavingProvider("stale"), "cpu"],
            plugins=plugins,
        )


# -- item 6: the reference is built as the caller's session would be ------------------------------

#: The library with the custom operator ``_neg_pos`` needs (onnxruntime-extensions).
CUSTOM_OPS = SessionOptionsConfig(custom_op_libraries=onnxruntime_extensions.get_library_path())


def _neg_pos(name: str = "g") -> onnx.ModelProto:
    """neg, pos = NegPos(x), a custom operator of onnxruntime-extensions (ai.onnx.contrib)."""
    return _model(
        [helper.make_node("NegPos", ["x"], ["neg", "pos"], domain="ai.onnx.contrib")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [
            helper.make_tensor_value_info("neg", TensorProto.FLOAT, ["n"]),
            helper.make_tensor_value_info("pos", TensorProto.FLOAT, ["n"]),
        ],
        opset=17,
        domains=["ai.onnx.contrib"],
        name=name,
    )


def test_a_custom_op_variant_verifies_on_an_explicit_chain(tmp_path: Path) -> None:
    path = with_variant(tmp_path, _neg_pos(), _neg_pos())
    checkpoint = select_variant(LocalCheckpoint(path).resolve(), "int8")
    backend = OnnxBackend.from_checkpoint(
        checkpoint, providers=["cpu"], verify=True, session_options=CUSTOM_OPS
    )  # the reference was built without the library: ModelLoadError, NegPos not registered
    verdict = backend.report.verification
    assert verdict is not None and verdict.passed and not verdict.cached, verdict
    x = np.array([-2.0, 3.0], np.float32)
    assert backend.run({"x": x})["pos"].tolist() == [0.0, 3.0]


def test_a_custom_op_model_verifies_its_accelerator_without_timing() -> None:
    checkpoint = InMemoryCheckpoint(_neg_pos().SerializeToString()).resolve()
    plugins = make_plugin_host(("good", MisbehavingPlugin("slow", delay_s=0)))  # type: ignore[arg-type]
    backend = OnnxBackend.from_checkpoint(
        checkpoint, plugins=plugins, session_options=CUSTOM_OPS, verify=Verification(measure=False)
    )
    assert backend.providers == ("AzureExecutionProvider", "CPUExecutionProvider")
    verdict = backend.report.verification
    assert verdict is not None and verdict.passed, verdict


def test_the_reference_does_not_write_over_the_candidates_optimized_model(tmp_path: Path) -> None:
    path = with_variant(tmp_path, _neg_pos("reference"), _neg_pos("variant"))
    written = tmp_path / "optimized.onnx"
    options = SessionOptionsConfig(
        custom_op_libraries=CUSTOM_OPS.custom_op_libraries, optimized_model_path=str(written)
    )
    checkpoint = select_variant(LocalCheckpoint(path).resolve(), "int8")
    OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"], verify=True, session_options=options)
    assert onnx.load(written).graph.name == "variant"  # what serves, not the reference
