"""Verification that cannot be fooled (issue 24, items 20-24): every file the model loads is in the
verdict's key, outputs are compared value by value, integer and string outputs must match exactly,
cached verdicts are validated against the model, and an unusable variant file gives way to the
reference weights. Real models (``onnx.helper``), real ONNX Runtime sessions.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from ortplug import (
    LocalCheckpoint,
    OnnxBackend,
    Tolerance,
    VerificationError,
    VerificationWarning,
)
from ortplug.checkpoint import select_variant
from ortplug.errors import CheckpointError, MissingFileError, OrtplugCacheWarning
from ortplug.testing import make_plugin_host
from ortplug.verification.verdicts import compare_outputs
from variant_models import broken_int8, mlp_with_variants, with_variant

VNNI = {"ORTPLUG_OVERRIDE_CPU_ISA_FLAGS": '["avx2", "avx512_vnni"]'}


def _model(nodes, inputs, outputs, initializers=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _verify_variant(path: Path) -> OnnxBackend:
    checkpoint = LocalCheckpoint(path).resolve()
    return OnnxBackend.from_checkpoint(
        select_variant(checkpoint, "int8"), providers=["cpu"], verify=True
    )


# -- item 20: the verdict key covers external data ------------------------------------------------


def _scaled(weights: np.ndarray) -> onnx.ModelProto:
    return _model(
        [helper.make_node("Mul", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(weights, "w")],
    )


def test_a_cached_pass_does_not_survive_a_change_to_external_weights(tmp_path: Path) -> None:
    weights = np.linspace(0.5, 1.5, 64, dtype=np.float32).reshape(1, 64)
    folder = tmp_path / "m"
    folder.mkdir()
    for name, data in (("m.onnx", "m.data"), ("m.int8.onnx", "m.int8.data")):
        onnx.save_model(
            _scaled(weights),
            folder / name,
            save_as_external_data=True,
            location=data,
            size_threshold=0,
        )
    reference, variant = (
        onnx.load(folder / name, load_external_data=False) for name in ("m.onnx", "m.int8.onnx")
    )
    path = with_variant(folder, reference, variant)  # the .onnx files still name the data files
    first = _verify_variant(path).report.verification
    assert first is not None and first.passed and not first.cached
    again = _verify_variant(path).report.verification
    assert again is not None and again.cached  # the same files: the verdict is reused
    data = folder / "m.int8.data"
    tripled = np.frombuffer(data.read_bytes(), np.float32) * 3
    stamp = data.stat()
    data.write_bytes(tripled.astype(np.float32).tobytes())  # same size
    os.utime(data, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # and the same mtime
    with pytest.raises(VerificationError, match="variant int8 .* failed verification: output 'y'"):
        _verify_variant(path)


def test_the_fingerprint_covers_every_external_data_file(tmp_path: Path) -> None:
    weights = np.ones((1, 64), np.float32)
    onnx.save_model(
        _scaled(weights),
        tmp_path / "m.onnx",
        save_as_external_data=True,
        location="w.bin",
        size_threshold=0,
    )
    checkpoint = LocalCheckpoint(tmp_path / "m.onnx").resolve()
    before = checkpoint.fingerprint()
    (tmp_path / "w.bin").write_bytes((weights * 2).tobytes())
    assert LocalCheckpoint(tmp_path / "m.onnx").resolve().fingerprint() != before
    assert checkpoint.fingerprint() != before  # the same checkpoint object sees the change too


# -- item 21: sequence and map outputs compared value by value ------------------------------------


def _sequence_of(weights: np.ndarray) -> onnx.ModelProto:
    return _model(
        [
            helper.make_node("Mul", ["x", "w"], ["y"]),
            helper.make_node("SequenceConstruct", ["y"], ["s"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2000])],
        [
            helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2000]),
        ],
        [numpy_helper.from_array(weights, "w")],
    )


def test_a_sequence_output_is_compared_element_by_element(tmp_path: Path) -> None:
    weights = np.ones(2000, np.float32)
    wrong = weights.copy()
    wrong[500:1500] = 7.0  # 1000 of 2000 elements differ, none among the first or last three
    path = with_variant(tmp_path, _sequence_of(weights), _sequence_of(wrong))
    with pytest.raises(VerificationError, match=r"output 's': at \[0\]\[\d+\]: .* exceeds"):
        _verify_variant(path)


def test_nested_outputs_compare_values_not_their_repr() -> None:
    big = np.zeros(2000, np.float32)
    changed = big.copy()
    changed[1000] = 5
    (sequence,) = compare_outputs({"s": [big]}, {"s": [changed]}, Tolerance(0.1, 0.1))
    assert sequence.max_abs == 5 and "at [0][1000]: 5, reference 0" in str(sequence.problem())
    (maps,) = compare_outputs(
        {"m": [{"a": 0.5, "b": 0.5}]}, {"m": [{"a": 0.9, "b": 0.1}]}, Tolerance(0.05, 0)
    )
    assert maps.max_abs == pytest.approx(0.4) and "at [0]['a']" in str(maps.problem())
    (keys,) = compare_outputs({"m": [{"a": 1.0}]}, {"m": [{"b": 1.0}]}, Tolerance(1, 1))
    assert "keys" in str(keys.problem())
    (length,) = compare_outputs({"s": [big, big]}, {"s": [big]}, Tolerance(1, 1))
    assert "1 item, reference 2 items" in str(length.problem())
    (same,) = compare_outputs({"m": [{"a": 0.5}]}, {"m": [{"a": 0.5}]}, Tolerance(0, 0))
    assert same.problem() is None


# -- item 22: integer, boolean and string outputs must match exactly ------------------------------


def _labels(offset: int) -> onnx.ModelProto:
    return _model(
        [
            helper.make_node("ArgMax", ["x"], ["top"], axis=1, keepdims=0),
            helper.make_node("Add", ["top", "offset"], ["label"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 1000])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [64])],
        [numpy_helper.from_array(np.array([offset], np.int64), "offset")],
    )


def test_integer_labels_must_match_exactly(tmp_path: Path) -> None:
    path = with_variant(tmp_path, _labels(0), _labels(1))  # every label one off: 0.1% of the range
    with pytest.raises(
        VerificationError,
        match=r"output 'label': at \[0\]: \d+, reference \d+ \(64 of 64 elements differ; integer "
        r"outputs must match exactly\)",
    ):
        _verify_variant(path)


def test_exact_outputs_allow_no_difference_at_any_tolerance() -> None:
    loose = Tolerance(1e6, 1e6)
    (ints,) = compare_outputs({"l": np.array([1, 2, 3])}, {"l": np.array([1, 2, 4])}, loose)
    assert "at [2]: 4, reference 3 (1 of 3 elements differ" in str(ints.problem())
    flags = compare_outputs({"b": np.array([True, False])}, {"b": np.array([True, True])}, loose)
    assert "boolean outputs must match exactly" in str(flags[0].problem())
    text = compare_outputs({"t": np.array(["cat", "dog"])}, {"t": np.array(["cat", "cow"])}, loose)
    assert "string outputs must match exactly" in str(text[0].problem())
    (equal,) = compare_outputs({"l": np.array([1, 2])}, {"l": np.array([1, 2])}, Tolerance(0, 0))
    assert equal.problem() is None
    floats = compare_outputs({"f": np.array([1.0, 2.0])}, {"f": np.array([1.0, 2.01])}, loose)
    assert floats[0].problem() is None  # only floating outputs get a tolerance


@pytest.fixture(autouse=True)
def _first_verified_choice_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about verification: the first verified choice serves, nothing is timed
    (the measured choice is tests/test_proven_choice.py's)."""
    monkeypatch.setenv("ORTPLUG_MEASURE", "0")


# -- item 23: a cached verdict is untrusted input -------------------------------------------------


@pytest.fixture
def broken(tmp_path: Path):
    """An MLP whose int8 variant fails verification; its failing verdict is cached."""
    checkpoint = mlp_with_variants(tmp_path, "int8")
    broken_int8(checkpoint)
    plugins = make_plugin_host(environ=VNNI)
    with pytest.warns(VerificationWarning, match="variant int8 .* failed verification"):
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=plugins)
    assert backend.metadata.precision == "fp32"
    (record,) = Path(os.environ["ORTPLUG_CACHE_DIR"], "verify").glob("*.json")
    return checkpoint, plugins, record


#: A passing check for an output the model lacks.
_ZZ = {
    "name": "zz",
    "max_abs": 0,
    "scale": 1,
    "violation": None,
    "rows": 0,
    "topk_agree": 0,
    "min_cosine": None,
    "on": "",
}


@pytest.mark.parametrize(
    ("forge", "reason"),
    [
        (lambda checks: [_ZZ], "'zz' is not an output of the model"),
        (lambda checks: [{**checks[0], "max_abs": -1, "violation": None}], "max_abs -1"),
        (lambda checks: [{**checks[0], "scale": float("inf"), "violation": None}], "scale inf"),
    ],
)
def test_a_forged_verdict_is_refused_and_measured_again(broken, forge, reason) -> None:
    checkpoint, plugins, record = broken
    data = json.loads(record.read_text())
    data["checks"] = forge(data["checks"])
    record.write_text(json.dumps(data))
    with pytest.warns() as caught:
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=plugins)
    messages = [str(w.message) for w in caught]
    assert any(
        isinstance(w.message, OrtplugCacheWarning) and reason in str(w.message) for w in caught
    ), messages
    assert any("failed verification" in m for m in messages), messages
    assert backend.metadata.precision == "fp32"  # the broken variant is not served


def test_an_integer_output_that_differs_cannot_pass_from_the_cache(tmp_path: Path) -> None:
    path = with_variant(tmp_path, _labels(0), _labels(1))
    with pytest.raises(VerificationError):
        _verify_variant(path)
    (record,) = Path(os.environ["ORTPLUG_CACHE_DIR"], "verify").glob("*.json")
    data = json.loads(record.read_text())
    data["checks"][0]["violation"] = None  # forged: the labels would pass
    record.write_text(json.dumps(data))
    with (
        pytest.warns(OrtplugCacheWarning, match="'label' is an exact .* output"),
        pytest.raises(VerificationError, match="integer outputs must match exactly"),
    ):
        _verify_variant(path)


# -- item 24: an unusable variant file falls back to the reference --------------------------------


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: p.write_bytes(b"not a model"), "is not a valid ONNX model"),
        (lambda p: p.unlink(), "file not found"),
    ],
)
def test_an_unusable_variant_file_gives_way_to_the_reference(tmp_path, damage, reason) -> None:
    checkpoint = mlp_with_variants(tmp_path, "int8")
    assert checkpoint.weights_path is not None
    damage(checkpoint.weights_path.with_name("mlp.int8.onnx"))
    plugins = make_plugin_host(environ=VNNI)
    unusable = f"variant 'int8' cannot be used: .*{reason}"
    with pytest.warns(VerificationWarning, match=unusable) as caught:
        backend = OnnxBackend.from_checkpoint(
            LocalCheckpoint(checkpoint.weights_path), plugins=plugins
        )
    assert str(caught[0].message).endswith("taking the next choice: the reference weights on [cpu]")
    assert backend.metadata.precision == "fp32"
    resolved = LocalCheckpoint(checkpoint.weights_path).resolve()
    with pytest.raises((CheckpointError, MissingFileError), match=reason):
        select_variant(resolved, "int8")  # an explicit variant still raises


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: p.write_bytes(b"not a model"), "is not a valid ONNX model"),
        (lambda p: p.unlink(), "file not found"),
        (lambda p: (p.unlink(), p.mkdir()), "is a folder, expected an .onnx file"),
    ],
)
def test_a_broken_variant_the_recorded_choice_never_uses_fails_no_later_build(
    tmp_path, monkeypatch, damage, reason
) -> None:
    """A first build records its measured choice; a variant file broken afterwards is one the
    later builds never build: it is left out with one warning (every later build failed with the
    file's error, while a fresh cache served the reference)."""
    monkeypatch.setenv("ORTPLUG_MEASURE", "1")  # a first build records its choice
    checkpoint = mlp_with_variants(tmp_path, "int8")
    assert checkpoint.weights_path is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the int8 variant fails the default tolerance
        first = OnnxBackend.from_checkpoint(checkpoint, plugins=make_plugin_host(environ=VNNI))
    assert first.metadata.precision == "fp32"
    assert list(Path(os.environ["ORTPLUG_CACHE_DIR"], "autotune").glob("*.json"))
    damage(checkpoint.weights_path.with_name("mlp.int8.onnx"))
    with pytest.warns(VerificationWarning, match=f"variant 'int8' cannot be used: .*({reason})"):
        later = OnnxBackend.from_checkpoint(
            LocalCheckpoint(checkpoint.weights_path), plugins=make_plugin_host(environ=VNNI)
        )
    assert later.metadata.precision == "fp32" and later.providers == ("CPUExecutionProvider",)


def test_a_variant_that_onnx_runtime_refuses_gives_way_to_the_reference(tmp_path: Path) -> None:
    checkpoint = mlp_with_variants(tmp_path, "int8")
    assert checkpoint.weights_path is not None
    model = onnx.load(checkpoint.weights_path)
    model.graph.node[0].op_type = "NoSuchOp"  # readable, but ONNX Runtime cannot build it
    checkpoint.weights_path.with_name("mlp.int8.onnx").write_bytes(model.SerializeToString())
    plugins = make_plugin_host(environ=VNNI)
    with pytest.warns(VerificationWarning, match="variant 'int8' cannot be used: .*NoSuchOp"):
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=plugins)
    assert backend.metadata.precision == "fp32"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception, match="NoSuchOp"):
            OnnxBackend.from_checkpoint(
                select_variant(checkpoint, "int8"), providers=["cpu"], verify=True
            )


def test_a_package_variant_for_another_provider_with_a_broken_file_is_left_out(
    tmp_path: Path,
) -> None:
    checkpoint = mlp_with_variants(tmp_path, "fp16")
    assert checkpoint.weights_path is not None
    component = tmp_path / "pkg" / "models" / "mlp"
    for name, data in (("cpu", checkpoint.weights_path.read_bytes()), ("gpu", b"not a model")):
        (component / name).mkdir(parents=True)
        (component / name / "model.onnx").write_bytes(data)
    variants = {"cpu": {"ep": "CPUExecutionProvider"}, "gpu": {"ep": "CUDAExecutionProvider"}}
    (component / "metadata.json").write_text(json.dumps({"variants": variants}))
    with pytest.warns(VerificationWarning, match="'gpu': .*not a valid ONNX model.*left out"):
        resolved = LocalCheckpoint(component).resolve()
    assert resolved.metadata.variants == ()
    (component / "cpu" / "model.onnx").write_bytes(b"not a model")  # the reference itself
    with pytest.raises(CheckpointError, match="variant 'cpu': .*not a valid ONNX model"):
        LocalCheckpoint(component).resolve()
