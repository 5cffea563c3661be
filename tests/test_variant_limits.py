"""A manifest's variants resolve in linear time, up to a cap named in a clear error
(issue 24 item 34: 100k entries took 259 s, growing quadratically)."""

from __future__ import annotations

import json
import os

import models
import pytest
from ortplug import CheckpointMetadata, LocalCheckpoint
from ortplug.checkpoint.variants import MAX_VARIANTS, parse_variants
from ortplug.errors import CheckpointError, OptionError
from variant_models import mlp_with_variants


def _entries(count: int, repeat: str | None = None) -> list[dict[str, str]]:
    names = [f"v{i}" for i in range(count)]
    if repeat is not None:
        names[-1] = repeat
    return [{"name": n, "file": f"m.{n}.onnx", "precision": "int8"} for n in names]


def _checkpoint(tmp_path, count: int) -> LocalCheckpoint:
    weights = models.write(tmp_path, "m.onnx", models.add_model())
    metadata = json.loads(CheckpointMetadata.from_model(weights).to_json())
    metadata["variants"] = _entries(count)
    for entry in metadata["variants"]:
        os.symlink(weights, tmp_path / entry["file"])
    (tmp_path / "m.metadata.json").write_text(json.dumps(metadata))
    return LocalCheckpoint(weights)


def test_a_manifest_at_the_cap_resolves(tmp_path) -> None:
    resolved = _checkpoint(tmp_path, MAX_VARIANTS).resolve()
    assert len(resolved.metadata.variants) == MAX_VARIANTS


def test_a_manifest_over_the_cap_is_one_clear_error(tmp_path) -> None:
    with pytest.raises(CheckpointError, match=rf"variants: expected at most {MAX_VARIANTS} "):
        _checkpoint(tmp_path, MAX_VARIANTS + 1).resolve()
    with pytest.raises(OptionError, match="got 100000$"):
        parse_variants(_entries(100_000))


def test_repeated_names_are_still_named() -> None:
    with pytest.raises(OptionError, match=r"names must be unique, \['v3'\] repeat"):
        parse_variants(_entries(MAX_VARIANTS, repeat="v3"))


def test_a_model_package_over_the_cap_is_refused_before_its_folders_are_read(tmp_path) -> None:
    component = tmp_path / "pkg" / "models" / "model"
    component.mkdir(parents=True)
    variants = {f"v{i}": {"ep": "CPUExecutionProvider"} for i in range(MAX_VARIANTS + 1)}
    (component / "metadata.json").write_text(
        json.dumps({"component_name": "model", "variants": variants})
    )
    (tmp_path / "pkg" / "manifest.json").write_text(json.dumps({"schema_version": 1}))
    with pytest.raises(CheckpointError, match=rf"expected at most {MAX_VARIANTS} variants, got"):
        LocalCheckpoint(tmp_path / "pkg").resolve()


@pytest.mark.parametrize(
    ("tolerance", "shown"),
    [({"rtol": None, "atol": 0}, "rtol: expected a finite number >= 0, got None"),
     ({"rtol": "x", "atol": 0}, "rtol: expected a finite number >= 0, got 'x'"),
     ({"rtol": 0.1, "atol": True}, "atol: expected a finite number >= 0, got True")],
)  # fmt: skip
def test_a_bad_variant_tolerance_names_the_metadata_file_and_the_field(
    tmp_path, tolerance, shown
) -> None:
    """``float()`` in the converter raised a bare TypeError/ValueError that named no file."""
    checkpoint = mlp_with_variants(tmp_path, "fp16")
    path = tmp_path / "mlp.metadata.json"
    data = json.loads(path.read_text())
    data["variants"][0]["tolerance"] = tolerance
    path.write_text(json.dumps(data))
    with pytest.raises(CheckpointError) as caught:
        LocalCheckpoint(checkpoint.weights_path).resolve()
    assert str(caught.value).startswith(f"{path}: ") and shown in str(caught.value)
