"""Regenerate the small models shipped in the core package (ortplug/data/demo*.onnx).

Run once by a maintainer (needs the ``onnx`` package); the output is committed.
A two-layer MLP: x[batch, 8] -> Gemm -> Relu -> Gemm -> logits[batch, 3], probs[batch, 3].
``demo.onnx`` has a dynamic batch; ``demo_static.onnx`` fixes it at 4, the form
providers that want static shapes (CoreML, TensorRT without profiles) take, and
the default model of the plugins' smoke scripts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parents[1] / "core" / "src" / "ortplug" / "data"


def build(batch: int | str = "batch") -> onnx.ModelProto:
    rng = np.random.default_rng(20261202)
    weights = {
        "w1": rng.standard_normal((8, 16)).astype(np.float32) * 0.5,
        "b1": rng.standard_normal(16).astype(np.float32) * 0.1,
        "w2": rng.standard_normal((16, 3)).astype(np.float32) * 0.5,
        "b2": rng.standard_normal(3).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="dense1"),
        helper.make_node("Relu", ["h"], ["h_relu"], name="relu1"),
        helper.make_node("Gemm", ["h_relu", "w2", "b2"], ["logits"], name="dense2"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "ortplug_demo_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 3]),
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 3]),
        ],
        initializer=[numpy_helper.from_array(v, name=k) for k, v in weights.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ortplug"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name, batch in (("demo.onnx", "batch"), ("demo_static.onnx", 4)):
        onnx.save(build(batch), OUT / name)
        print(f"wrote {OUT / name}")
