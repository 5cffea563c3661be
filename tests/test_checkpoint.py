"""LocalCheckpoint and InMemoryCheckpoint: resolving files, metadata beside them, and bad files."""

from __future__ import annotations

import models
import pytest
from ortplug import CheckpointMetadata, InMemoryCheckpoint, LocalCheckpoint, ResolvedCheckpoint
from ortplug.checkpoint import metadata_path_for


def test_resolve_infers_metadata_when_no_file_is_beside(tmp_path) -> None:
    path = models.write(tmp_path, "m.onnx", models.add_model())
    resolved = LocalCheckpoint(path).resolve()
    assert resolved.weights_path == path
    assert resolved.metadata.input_names == ("a", "b")
    assert resolved.metadata.static_shapes is True


def test_resolve_reads_metadata_beside_the_weights(tmp_path) -> None:
    path = models.write(tmp_path, "m.onnx", models.add_model())
    meta = CheckpointMetadata(model_family="adder", input_names=["a", "b"], output_names=["c"])
    metadata_path_for(path).write_text(meta.to_json())
    assert LocalCheckpoint(path).resolve().metadata.model_family == "adder"


def test_explicit_metadata_path_must_exist(tmp_path) -> None:
    path = models.write(tmp_path, "m.onnx", models.add_model())
    with pytest.raises(FileNotFoundError, match="nope.json"):
        LocalCheckpoint(path, metadata_path=tmp_path / "nope.json").resolve()


def test_missing_model_is_file_not_found(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.onnx"):
        LocalCheckpoint(tmp_path / "missing.onnx").resolve()


@pytest.mark.parametrize(
    "data", [b"not onnx at all\n", models.add_model()[:40], b""], ids=["text", "truncated", "empty"]
)
def test_non_onnx_file_names_the_file(tmp_path, data) -> None:
    path = models.write(tmp_path, "bad.onnx", data)
    with pytest.raises(ValueError, match=r"bad\.onnx is not a valid ONNX model"):
        LocalCheckpoint(path).resolve()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ('{"input_names": ["a", "b"], "output_names": ["c"], "precision": "int3"}', "precision"),
        (
            '{"input_names": ["a", "zz"], "output_names": ["c"]}',
            "input_names ['zz'] not in the model",
        ),
        (
            '{"input_names": ["a"], "output_names": ["out"]}',
            "output_names ['out'] not in the model",
        ),
    ],
)
def test_bad_metadata_file_names_file_and_field(tmp_path, text, fragment) -> None:
    path = models.write(tmp_path, "m.onnx", models.add_model())
    metadata_path_for(path).write_text(text)
    with pytest.raises(ValueError) as info:
        LocalCheckpoint(path).resolve()
    assert "m.metadata.json" in str(info.value)
    assert fragment in str(info.value)


def test_in_memory_checkpoint_resolves_to_bytes() -> None:
    data = models.add_model()
    resolved = InMemoryCheckpoint(data).resolve()
    assert resolved.weights_path is None
    assert resolved.source == data
    assert resolved.metadata.output_names == ("c",)


def test_in_memory_checkpoint_rejects_non_models() -> None:
    with pytest.raises(ValueError, match="not a valid ONNX model"):
        InMemoryCheckpoint(b"\x00\x01garbage").resolve()


def test_resolved_checkpoint_needs_exactly_one_source() -> None:
    meta = CheckpointMetadata(input_names=["a"], output_names=["c"])
    with pytest.raises(ValueError, match="exactly one of weights_path or model_bytes"):
        ResolvedCheckpoint(None, meta)
