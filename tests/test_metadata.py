"""CheckpointMetadata: validation, JSON round-trip, and inference from real graphs."""

from __future__ import annotations

import json

import models
import onnx
import pytest
from ortplug import CheckpointMetadata
from ortplug.checkpoint.onnx_wire import WireFormatError, summarize_model


def test_json_round_trip_keeps_every_field() -> None:
    meta = CheckpointMetadata(
        model_family="resnet",
        input_names=["x"],
        output_names=["y", "z"],
        precision="fp16",
        static_shapes=True,
        extra={"source": "hub", "nested": [1, 2]},
    )
    data = json.loads(meta.to_json())
    assert data["schema_version"] == 1
    again = CheckpointMetadata.from_json(meta.to_json())
    assert again == meta
    assert dict(again.extra) == {"source": "hub", "nested": [1, 2]}


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"schema_version": 2, "input_names": ["x"], "output_names": ["y"]}, "upgrade ortplug"),
        ({"input_names": ["x"], "output_names": ["y"], "precision": "int4"}, "fp32, fp16"),
        ({"input_names": ["x"], "output_names": ["y"], "colour": 1}, "unknown field(s) ['colour']"),
        ({"input_names": "x", "output_names": ["y"]}, "input_names: expected a list"),
        ({"input_names": ["x", "x"], "output_names": ["y"]}, "must be unique"),
        ({"output_names": ["y"]}, "missing required field(s) ['input_names']"),
        ({"input_names": ["x"], "output_names": ["y"], "static_shapes": "yes"}, "static_shapes"),
        ({"input_names": ["x"], "output_names": ["y"], "extra": {"f": object()}}, "extra"),
    ],
)
def test_bad_metadata_names_the_field(data: dict, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        CheckpointMetadata.from_dict(data)
    assert fragment in str(info.value)


def test_malformed_json_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not valid JSON"):
        CheckpointMetadata.from_json("{input_names: [")


def test_metadata_is_frozen() -> None:
    meta = CheckpointMetadata(input_names=["x"], output_names=["y"])
    with pytest.raises(AttributeError):
        meta.precision = "fp16"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("builder", "precision", "static"),
    [
        (lambda: models.matmul_model(), "fp32", False),
        (lambda: models.matmul_model(static=True), "fp32", True),
        (lambda: models.matmul_model(onnx.TensorProto.FLOAT16), "fp16", False),
        (models.bf16_weights_model, "bf16", True),
        (models.qdq_model, "int8", True),
    ],
)
def test_from_model_infers_precision_and_static_shapes(builder, precision, static) -> None:
    meta = CheckpointMetadata.from_model(builder())
    assert (meta.precision, meta.static_shapes) == (precision, static)


def test_from_model_skips_initializers_listed_as_inputs() -> None:
    meta = CheckpointMetadata.from_model(models.initializer_input_model())
    assert meta.input_names == ("x",)
    assert meta.output_names == ("y",)


@pytest.mark.parametrize(
    "path", sorted(models.LIGHT_DIR.glob("light_*.onnx")), ids=lambda p: p.stem
)
def test_wire_reader_agrees_with_onnx_on_light_models(path) -> None:
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    summary = summarize_model(path.read_bytes())
    assert [i.name for i in summary.feed_inputs] == [
        i.name for i in model.graph.input if i.name not in inits
    ]
    assert [o.name for o in summary.outputs] == [o.name for o in model.graph.output]
    assert summary.op_types == {n.op_type for n in model.graph.node}
    meta = CheckpointMetadata.from_model(path)
    assert meta.static_shapes is True
    assert meta.precision == "fp32"


def test_import_of_metadata_does_not_need_onnx() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['onnx'] = None\n"
        "from ortplug import CheckpointMetadata\n"
        f"print(CheckpointMetadata.from_model({str(models.LIGHT_DIR / 'light_squeezenet.onnx')!r}).input_names)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "data_0" in out.stdout


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff\xff\xff\xff", models.add_model()[:-7], b"hello world, not a model"],
    ids=["empty", "garbage", "truncated", "text"],
)
def test_reader_rejects_non_models(data: bytes) -> None:
    with pytest.raises(WireFormatError):
        summarize_model(data)
