"""Checkpoints with precision variants for the verification tests: an MLP and its int8/fp16 variants.

The variants are made by ortplug's own builders (ONNX Runtime's quantization and
float16 tools); :func:`broken_int8` quantizes with nonsense calibration (inputs a
thousand times smaller than real ones), so its activations saturate and its
outputs are wrong: the variant verification must reject.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from ortplug import CheckpointMetadata, LocalCheckpoint, ResolvedCheckpoint
from ortplug.checkpoint import Variant
from ortplug_variants import calibration_feeds, make_int8, write_variants

__all__ = [
    "INT8_ACCEPTED",
    "broken_int8",
    "mlp_model",
    "mlp_with_variants",
    "set_tolerance",
    "with_variant",
]


def mlp_model(din: int = 64, hidden: int = 128, layers: int = 2, classes: int = 10) -> bytes:
    """x[batch, din] -> (Gemm, Relu) x layers -> Gemm -> logits[batch, classes], He-scaled weights."""
    rng = np.random.default_rng(1)
    nodes, weights, previous, width = [], [], "x", din
    for i in range(layers):
        w = rng.standard_normal((width, hidden)) * np.sqrt(2 / width)
        weights += [
            numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
            numpy_helper.from_array(
                (0.01 * rng.standard_normal(hidden)).astype(np.float32), f"b{i}"
            ),
        ]
        nodes += [
            helper.make_node("Gemm", [previous, f"w{i}", f"b{i}"], [f"g{i}"]),
            helper.make_node("Relu", [f"g{i}"], [f"h{i}"]),
        ]
        previous, width = f"h{i}", hidden
    head = rng.standard_normal((width, classes)) * np.sqrt(1 / width)
    weights += [
        numpy_helper.from_array(head.astype(np.float32), "wo"),
        numpy_helper.from_array(np.zeros(classes, np.float32), "bo"),
    ]
    nodes.append(helper.make_node("Gemm", [previous, "wo", "bo"], ["logits"]))
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", din])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def mlp_with_variants(folder: Path, *precisions: str) -> ResolvedCheckpoint:
    """``folder/mlp.onnx`` with the given variants built and listed in its manifest, resolved."""
    path = folder / "mlp.onnx"
    path.write_bytes(mlp_model())
    if precisions:
        write_variants(LocalCheckpoint(path).resolve(), precisions)
    return LocalCheckpoint(path).resolve()


def broken_int8(checkpoint: ResolvedCheckpoint) -> None:
    """Rebuild the checkpoint's int8 variant file with calibration inputs 1000x too small."""
    assert checkpoint.weights_path is not None
    tiny = [
        {name: value * 1e-3 for name, value in feed.items()}
        for feed in calibration_feeds(checkpoint)
    ]
    make_int8(checkpoint, checkpoint.weights_path.with_name("mlp.int8.onnx"), tiny)


#: The tolerance a user who accepts int8 quantization's error on logits sets for the test MLP's
#: int8 variant (the element-wise default, rtol=0.05 atol=0.01, rejects errors of ~0.05 on
#: logits near zero; 1 in 100 rows of unit-scale inputs is off by 0.9, 1 in 1000 by 1.6).
INT8_ACCEPTED = {"rtol": 0.05, "atol": 2.0}


def set_tolerance(folder: Path, variant: str, tolerance: dict[str, float]) -> None:
    """Set one variant's tolerance in ``folder/mlp.metadata.json``, as a user edits it."""
    path = folder / "mlp.metadata.json"
    manifest = json.loads(path.read_text())
    for entry in manifest["variants"]:
        if entry["name"] == variant:
            entry["tolerance"] = tolerance
    path.write_text(json.dumps(manifest, indent=2))


def with_variant(
    folder: Path,
    reference: bytes | onnx.ModelProto,
    variant: bytes | onnx.ModelProto,
    precision: str = "int8",
) -> Path:
    """``folder/m.onnx`` with a variant ``m.<precision>.onnx`` (named as its precision) listed in
    its manifest, whatever the variant computes."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "m.onnx"
    file = f"m.{precision}.onnx"
    for target, model in ((path, reference), (folder / file, variant)):
        target.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    metadata = CheckpointMetadata.from_model(path)
    entry = Variant(name=precision, file=file, precision=precision)
    listed = {**metadata.to_dict(), "variants": [entry.to_dict()]}
    (folder / "m.metadata.json").write_text(CheckpointMetadata.from_dict(listed).to_json())
    return path
