"""What ortplug infers or checks in a checkpoint's metadata so a user's slip does not pass silently."""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from ortplug import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    LocalCheckpoint,
    MetadataKey,
    OnnxBackend,
    PluginHost,
    hookimpl,
)
from ortplug.errors import OrtplugConfigWarning


def _identity(graph_name: str) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], graph_name, [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.mark.parametrize(
    "graph_name",
    ["main_graph", "torch_jit", "torch-jit-export", "tf2onnx", "8c1f0d7be45a44f3a9d2", ""],
)
def test_a_generic_graph_name_gives_the_file_stem(tmp_path: Path, graph_name: str) -> None:
    path = tmp_path / "silero_vad.onnx"
    path.write_bytes(_identity(graph_name))
    assert LocalCheckpoint(path).resolve().metadata.model_family == "silero_vad"


def test_a_specific_graph_name_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(_identity("resnet50"))
    assert LocalCheckpoint(path).resolve().metadata.model_family == "resnet50"
    assert onnx.load(path).graph.name == "resnet50"


class _AcmeKeys:
    @hookimpl
    def ortplug_metadata_keys(self):
        yield MetadataKey("acme_tiles", int, "tile count for the Acme compiler")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"dim_range": {}},
            r"'dim_range' is read by no installed plugin \(did you mean 'dim_ranges'\?\)",
        ),
        ({"acme_tiles": "4"}, r"'acme_tiles': expected int \(tile count.*got str '4'"),
        ({"acme_tiles": True}, r"'acme_tiles': expected int"),
    ],
)
def test_unknown_or_mistyped_extra_keys_warn_naming_them(
    plugin_host: PluginHost, extra: dict[str, object], message: str
) -> None:
    assert plugin_host.register(_AcmeKeys(), name="acme")
    metadata = CheckpointMetadata(input_names=["x"], output_names=["y"], extra=extra)
    with pytest.warns(OrtplugConfigWarning, match=message):
        OnnxBackend.from_checkpoint(
            InMemoryCheckpoint(_identity("g"), metadata).resolve(), plugins=plugin_host
        )


def test_declared_extra_keys_build_quietly(plugin_host: PluginHost) -> None:
    assert plugin_host.register(_AcmeKeys(), name="acme")
    metadata = CheckpointMetadata(
        input_names=["x"],
        output_names=["y"],
        extra={"acme_tiles": 4, "dim_ranges": {"x": {}}},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrtplugConfigWarning)
        OnnxBackend.from_checkpoint(
            InMemoryCheckpoint(_identity("g"), metadata).resolve(), plugins=plugin_host
        )
    declared = {"acme_tiles", "dim_ranges", "output_checks", "samples", "sample_rate"}
    assert set(plugin_host.metadata_keys()) == declared
    assert plugin_host.metadata_keys()["acme_tiles"].plugin == "acme"
