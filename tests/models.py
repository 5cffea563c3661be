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


def graph_model(nodes, inputs, outputs, initializers=()) -> bytes:
    """A checked opset-17 model of ``nodes`` (``onnx.helper`` nodes and value infos)."""
    return _model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers)))


def add_model(shape: list[int | str] | None = None, nodes: int = 1) -> bytes:
    """c = a + b, float32, shape [1, 4] by default.

    ``nodes`` > 1 spreads it over that many nodes (adding zero after the first): a
    model that computes the same but takes ONNX Runtime longer to build.
    """
    shape = shape or [1, 4]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("a", "b")]
    out = helper.make_tensor_value_info("c", TensorProto.FLOAT, shape)
    names = ["a", *(f"t{i}" for i in range(1, nodes)), "c"]
    graph_nodes = [helper.make_node("Add", ["a", "b"], [names[1]])]
    graph_nodes += [
        helper.make_node("Add", [names[i], "zero"], [names[i + 1]]) for i in range(1, nodes)
    ]
    zero = numpy_helper.from_array(np.zeros(1, np.float32), "zero")
    initializers = [zero] if nodes > 1 else []
    return _model(helper.make_graph(graph_nodes, "add", inputs, [out], initializer=initializers))


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


def _typed_model(nodes, inputs, outputs, *, opset: int = 18, domains=(), initializers=()) -> bytes:
    graph = helper.make_graph(nodes, "typed", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, v) for d, v in domains)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def optional_model() -> bytes:
    """has = OptionalHasElement(o) for an optional(tensor(float)) input that may be omitted."""
    optional = helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    )
    return _typed_model(
        [helper.make_node("OptionalHasElement", ["o"], ["has"])],
        [helper.make_value_info("o", optional)],
        [helper.make_tensor_value_info("has", TensorProto.BOOL, [])],
    )


def sequence_model() -> bytes:
    """count = SequenceLength(seq) for a seq(tensor(float)) input."""
    sequence = helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, ["n"])
    )
    return _typed_model(
        [helper.make_node("SequenceLength", ["seq"], ["count"])],
        [helper.make_value_info("seq", sequence)],
        [helper.make_tensor_value_info("count", TensorProto.INT64, [])],
    )


def zipmap_model() -> bytes:
    """scores[1, 2] -> ZipMap -> a sequence of {label: score} maps (ai.onnx.ml)."""
    maps = helper.make_sequence_type_proto(
        helper.make_map_type_proto(
            TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.FLOAT, [])
        )
    )
    return _typed_model(
        [
            helper.make_node(
                "ZipMap",
                ["scores"],
                ["labels"],
                domain="ai.onnx.ml",
                classlabels_strings=["cat", "dog"],
            )
        ],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 2])],
        [helper.make_value_info("labels", maps)],
        domains=[("ai.onnx.ml", 3)],
    )


def identity_model(elem: int, shape: list[int | str]) -> bytes:
    """y = Identity(x) for one element type (strings, bools, every int width, fp16...)."""
    return _typed_model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", elem, shape)],
        [helper.make_tensor_value_info("y", elem, shape)],
    )


def bf16_input_model() -> bytes:
    """y = Cast<float>(x) for a bfloat16 input."""
    return _typed_model(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )


def if_loop_model() -> bytes:
    """y = If(flag, x + 1, x - 1); total = Loop(3 times) adding x: an If and a Loop subgraph."""
    vec = [2]
    then_branch = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["then_out"])],
        "then",
        [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, vec)],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Sub", ["x", "one"], ["else_out"])],
        "else",
        [],
        [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, vec)],
    )
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, vec),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, vec),
        ],
    )
    return _typed_model(
        [
            helper.make_node(
                "If", ["flag"], ["y"], then_branch=then_branch, else_branch=else_branch
            ),
            helper.make_node("Loop", ["trips", "", "zero"], ["total"], body=body),
        ],
        [
            helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, vec),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, vec),
            helper.make_tensor_value_info("total", TensorProto.FLOAT, vec),
        ],
        initializers=[
            numpy_helper.from_array(np.ones(2, np.float32), "one"),
            numpy_helper.from_array(np.zeros(2, np.float32), "zero"),
            numpy_helper.from_array(np.array(3, np.int64), "trips"),
        ],
    )


def slow_loop_model() -> bytes:
    """y = x @ I, ``trips`` times (an input): with 10**9 trips it runs until terminated."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("MatMul", ["acc_in", "w"], ["acc_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [64, 64]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [64, 64]),
        ],
    )
    return _typed_model(
        [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
        [
            helper.make_tensor_value_info("trips", TensorProto.INT64, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])],
        initializers=[numpy_helper.from_array(np.eye(64, dtype=np.float32), "w")],
    )


def external_weights_model() -> bytes:
    """y = x + w where w[4] is stored as external data in "weights.bin" (not embedded)."""
    from onnx import external_data_helper

    model = onnx.load_from_string(
        _typed_model(
            [helper.make_node("Add", ["x", "w"], ["y"])],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
            initializers=[numpy_helper.from_array(np.zeros(4, np.float32), "w")],
        )
    )
    external_data_helper.set_external_data(model.graph.initializer[0], "weights.bin")
    model.graph.initializer[0].ClearField("raw_data")
    return model.SerializeToString()


def string_label_classifier(
    features: int = 4, classes: tuple[str, ...] = ("cat", "dog", "owl")
) -> bytes:
    """What skl2onnx makes of a LogisticRegression fitted on string classes (ai.onnx.ml).

    X[batch, features] -> LinearClassifier -> label (strings) and scores -> ZipMap ->
    probabilities (a sequence of {class: probability} maps). No MatMul or Conv: nothing a
    quantizer or an fp16 converter changes.
    """
    coefficients = np.linspace(-1, 1, len(classes) * features).astype(np.float32)
    maps = helper.make_sequence_type_proto(
        helper.make_map_type_proto(
            TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.FLOAT, [])
        )
    )
    return _typed_model(
        [
            helper.make_node(
                "LinearClassifier",
                ["X"],
                ["label", "scores"],
                domain="ai.onnx.ml",
                classlabels_strings=list(classes),
                coefficients=coefficients.tolist(),
                intercepts=[0.0] * len(classes),
                multi_class=1,
                post_transform="SOFTMAX",
            ),
            helper.make_node(
                "ZipMap",
                ["scores"],
                ["probabilities"],
                domain="ai.onnx.ml",
                classlabels_strings=list(classes),
            ),
        ],
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", features])],
        [
            helper.make_tensor_value_info("label", TensorProto.STRING, ["batch"]),
            helper.make_value_info("probabilities", maps),
        ],
        domains=[("ai.onnx.ml", 1)],
    )


#: The warning ONNX Runtime logs (on the building thread) for ``unused_initializer_model``.
UNUSED_INITIALIZER_LINE = "Removing initializer 'unused'"


def unused_initializer_model() -> bytes:
    """y = x, with an initializer no node uses: building it logs one warning line."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "unused",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        initializer=[numpy_helper.from_array(np.zeros(1, np.float32), "unused")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


#: What ONNX Runtime logs for ``log_model``: at its build, and at every run of a (1, 4) input.
LOG_MODEL_LINES = (UNUSED_INITIALIZER_LINE, "VerifyOutputSizes")


def log_model() -> bytes:
    """y = relu(x) for x [n, 4], whose y is declared [2, 4] and which holds an initializer no
    node uses: ONNX Runtime warns at its build (the initializer) and at each run of n != 2."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "log",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        initializer=[numpy_helper.from_array(np.zeros(1, np.float32), "unused")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def gather_model() -> bytes:
    """y = table[ids] (table 10x4, ids [batch, 3]): a row holding an id of 10 or more fails."""
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"])],
        "gather",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 4])],
        initializer=[table],
    )
    return _model(graph)


def string_argmax_classifier() -> bytes:
    """x[batch, 4] -> scores = x @ w; label = ("cat", "dog", "eel")[argmax(scores)]: a float and a
    string output (the labels a scikit-learn classifier converted by skl2onnx gives)."""
    weights = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    names = helper.make_tensor("names", TensorProto.STRING, [3], [b"cat", b"dog", b"eel"])
    return graph_model(
        [
            helper.make_node("MatMul", ["x", "w"], ["scores"]),
            helper.make_node("ArgMax", ["scores"], ["idx"], axis=1, keepdims=0),
            helper.make_node("Gather", ["names", "idx"], ["label"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 3]),
            helper.make_tensor_value_info("label", TensorProto.STRING, ["batch"]),
        ],
        [numpy_helper.from_array(weights, "w"), names],
    )
