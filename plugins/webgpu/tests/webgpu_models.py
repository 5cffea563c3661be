"""Models for the WebGPU tests: resnet50 with real (random) weights, a small fp16 CNN, one Relu.

``light_resnet50`` from the onnx package's backend test data has every weight
a constant 0.02 (``ConstantOfShape``), so every class gets the same score and
any provider matches CPU; :func:`random_resnet50` gives it seeded random
weights (He-scaled convolutions, batch norms near identity) and exposes the
logits, so a comparison with CPU means something.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["LIGHT_RESNET50", "fp16_cnn", "random_resnet50", "relu_model"]

LIGHT_RESNET50 = (
    Path(os.path.dirname(onnx.__file__))
    / "backend"
    / "test"
    / "data"
    / "light"
    / "light_resnet50.onnx"
)


def _weight(rng: np.random.Generator, op: str, index: int, shape: list[int]) -> np.ndarray:
    """A value for input ``index`` of an ``op`` node that keeps activations in a sane range."""
    if op == "Conv" and index == 1:
        fan_in = int(np.prod(shape[1:]))
        return rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
    if op == "BatchNormalization":
        noise = rng.standard_normal(shape)
        return {1: 1 + 0.1 * noise, 4: 1 + 0.1 * np.abs(noise)}.get(index, 0.1 * noise)
    if op == "Gemm" and index == 1:  # residual sums grow: keep the logits around +-10
        return rng.standard_normal(shape) / (50 * np.sqrt(max(shape)))
    return 0.01 * rng.standard_normal(shape)


@cache
def random_resnet50(seed: int = 0) -> bytes:
    """light_resnet50 with seeded random weights as initializers; outputs: softmax and logits."""
    model = onnx.load(str(LIGHT_RESNET50))
    graph = model.graph
    rng = np.random.default_rng(seed)
    shapes = {t.name: numpy_helper.to_array(t).tolist() for t in graph.initializer}
    consumers = {
        name: (node.op_type, i) for node in graph.node for i, name in enumerate(node.input)
    }
    weights, kept = [], []
    for node in graph.node:
        if node.op_type != "ConstantOfShape":
            kept.append(node)
            continue
        name = node.output[0]
        weights.append((name, shapes[node.input[0]]))
    shape_inputs = {n.input[0] for n in graph.node if n.op_type == "ConstantOfShape"}
    originals = [t for t in graph.initializer if t.name not in shape_inputs]
    weights += [(t.name, list(t.dims)) for t in originals if t.data_type == TensorProto.FLOAT]
    initializers = [t for t in originals if t.data_type != TensorProto.FLOAT]  # shapes
    for name, shape in weights:
        if name not in consumers:
            continue  # unused in the original graph
        op, index = consumers[name]
        value = _weight(rng, op, index, shape).astype(np.float32)
        initializers.append(numpy_helper.from_array(value, name))
    logits = next(n for n in kept if n.op_type == "Gemm").output[0]
    del graph.node[:]
    graph.node.extend(kept)
    data = graph.input[0]
    del graph.input[:]
    graph.input.append(data)
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    graph.output.append(helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, 1000]))
    model.ir_version = 4  # initializers need not be graph inputs
    onnx.checker.check_model(model)
    return model.SerializeToString()


def fp16_cnn() -> bytes:
    """A static fp16 CNN: Conv-Relu-Conv-Relu-GlobalAveragePool-Flatten-Gemm, input [1, 3, 32, 32]."""
    rng = np.random.default_rng(1)

    def init(name: str, *shape: int, scale: float) -> onnx.TensorProto:
        value = (rng.standard_normal(shape) * scale).astype(np.float16)
        return numpy_helper.from_array(value, name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ]
    initializers = [
        init("w1", 16, 3, 3, 3, scale=0.3),
        init("b1", 16, scale=0.1),
        init("w2", 32, 16, 3, 3, scale=0.1),
        init("b2", 32, scale=0.1),
        init("w3", 10, 32, scale=0.2),
        init("b3", 10, scale=0.1),
    ]
    graph = helper.make_graph(
        nodes,
        "fp16_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 10])],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def relu_model() -> bytes:
    """y = Relu(x), float32 [1, 8]: one small shader, cheap to compile cold."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()
