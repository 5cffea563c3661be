"""Real ONNX models for the tests, built with ``onnx.helper``."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LIGHT_DIR = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"


def _model(graph: onnx.GraphProto, opset: int = 17) -> bytes:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def add_model(shape: list[int | str] | None = None) -> bytes:
    """c = a + b, float32, shape [1, 4] by default."""
    shape = shape or [1, 4]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("a", "b")]
    out = helper.make_tensor_value_info("c", TensorProto.FLOAT, shape)
    node = helper.make_node("Add", ["a", "b"], ["c"])
    return _model(helper.make_graph([node], "add", inputs, [out]))


def matmul_model(elem: int = TensorProto.FLOAT, static: bool = False) -> bytes:
    """y = x @ w with w an initializer of the given float type; x is [batch, 4] unless static."""
    dtype = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16}[elem]
    weight = numpy_helper.from_array(
        np.arange(12, dtype=np.float32).reshape(4, 3).astype(dtype), "w"
    )
    batch: int | str = 2 if static else "batch"
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "matmul",
        [helper.make_tensor_value_info("x", elem, [batch, 4])],
        [helper.make_tensor_value_info("y", elem, [batch, 3])],
        initializer=[weight],
    )
    return _model(graph)


def bf16_weights_model() -> bytes:
    """A graph whose weights are bfloat16 (cast to float before use)."""
    weight = helper.make_tensor("w", TensorProto.BFLOAT16, [4, 3], [0] * 12)
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
            helper.make_node("MatMul", ["x", "wf"], ["y"]),
        ],
        "bf16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        initializer=[weight],
    )
    return _model(graph)


def qdq_model() -> bytes:
    """QuantizeLinear -> DequantizeLinear around a Relu: an int8 (QDQ) checkpoint."""
    graph = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["xq"]),
            helper.make_node("DequantizeLinear", ["xq", "scale", "zero"], ["xd"]),
            helper.make_node("Relu", ["xd"], ["y"]),
        ],
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[
            numpy_helper.from_array(np.array(0.1, dtype=np.float32), "scale"),
            numpy_helper.from_array(np.array(0, dtype=np.int8), "zero"),
        ],
    )
    return _model(graph)


def shared_dim_model() -> bytes:
    """c = a + b where both inputs share the symbolic dimension 'batch'."""
    return add_model(["batch", 4])


def initializer_input_model() -> bytes:
    """An IR-3 style graph that lists its initializer among the inputs (overridable)."""
    bias = numpy_helper.from_array(np.ones(4, dtype=np.float32), "bias")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["y"])],
        "overridable",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
            helper.make_tensor_value_info("bias", TensorProto.FLOAT, [4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[bias],
    )
    return _model(graph)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    """Write model bytes to ``tmp_path/name`` and return the path."""
    path = tmp_path / name
    path.write_bytes(data)
    return path


def long_chain_model(nodes: int) -> bytes:
    """y = x + 1 + 1 + ... (``nodes`` Add nodes): a model that takes a while to load."""
    graph = helper.make_graph(
        [helper.make_node("Add", [f"t{i}", "one"], [f"t{i + 1}"]) for i in range(nodes)],
        "chain",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info(f"t{nodes}", TensorProto.FLOAT, [1])],
        initializer=[numpy_helper.from_array(np.ones(1, np.float32), "one")],
    )
    return _model(graph)
