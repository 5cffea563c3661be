"""The coreml plugin: exact option strings, aliases, legacy fields and their conflicts, cache keys."""

from __future__ import annotations

from pathlib import Path

import attrs
import hosts
import models
import pytest
from ortplug import InMemoryCheckpoint, parse_provider
from ortplug_coreml import CoreMLProvider, model_cache_key
from ortplug_coreml.probes import detect_coreml

MAC = hosts.mac("arm64")


def test_defaults_are_mlprogram_and_a_cache() -> None:
    assert CoreMLProvider().to_ort() == ("CoreMLExecutionProvider", {"ModelFormat": "MLProgram"})


def test_every_option_has_its_onnxruntime_name_and_string_value() -> None:
    config = CoreMLProvider(
        model_format="NeuralNetwork",
        compute_units="CPUAndNeuralEngine",
        require_static_input_shapes=True,
        enable_on_subgraphs=False,
        specialization_strategy="FastPrediction",
        allow_low_precision_accumulation_on_gpu=True,
        profile_compute_plan=False,
        model_cache_directory="/c/coreml",
    )
    assert config.to_ort() == (
        "CoreMLExecutionProvider",
        {
            "ModelFormat": "NeuralNetwork",
            "MLComputeUnits": "CPUAndNeuralEngine",
            "RequireStaticInputShapes": "1",
            "EnableOnSubgraphs": "0",
            "SpecializationStrategy": "FastPrediction",
            "AllowLowPrecisionAccumulationOnGPU": "1",
            "ProfileComputePlan": "0",
            "ModelCacheDirectory": "/c/coreml",
        },
    )


def test_booleans_are_never_python_spellings() -> None:
    options = CoreMLProvider(require_static_input_shapes=True, enable_on_subgraphs=True).to_ort()[1]
    assert {options["RequireStaticInputShapes"], options["EnableOnSubgraphs"]} == {"1"}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("all", "ALL"),
        ("cpu_only", "CPUOnly"),
        ("cpu_and_gpu", "CPUAndGPU"),
        ("cpu_and_neural_engine", "CPUAndNeuralEngine"),
        ("CPUAndGPU", "CPUAndGPU"),
        ("MLComputeUnitsCPUOnly", "CPUOnly"),
        ("MLComputeUnitsAll", "ALL"),
    ],
)
def test_compute_unit_aliases(given: str, expected: str) -> None:
    assert CoreMLProvider(compute_units=given).to_ort()[1]["MLComputeUnits"] == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"coreml_flags": 0x001}, {"MLComputeUnits": "CPUOnly"}),
        (
            {"coreml_flags": 0x020 | 0x008},
            {"MLComputeUnits": "CPUAndGPU", "RequireStaticInputShapes": "1"},
        ),
        ({"coreml_flags": 0x002 | 0x010}, {"EnableOnSubgraphs": "1"}),
        ({"use_cpu_only": True}, {"MLComputeUnits": "CPUOnly"}),
        ({"use_cpu_and_gpu": True}, {"MLComputeUnits": "CPUAndGPU"}),
        ({"only_enable_device_with_ane": True}, {"MLComputeUnits": "CPUAndNeuralEngine"}),
        ({"only_enable_device_with_ane": True, "compute_units": "all"}, {"MLComputeUnits": "ALL"}),
        ({"create_mlprogram": False}, {"ModelFormat": "NeuralNetwork"}),
        ({"coreml_flags": 0x010, "model_format": "MLProgram"}, {}),
        ({"use_cpu_only": True, "compute_units": "cpu_only"}, {"MLComputeUnits": "CPUOnly"}),
    ],
)
def test_legacy_fields_fold_into_the_current_options(fields, expected) -> None:
    options = CoreMLProvider(**fields).to_ort()[1]
    assert options == {"ModelFormat": options["ModelFormat"], **expected}
    assert options["ModelFormat"] in ("MLProgram", "NeuralNetwork")


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        (
            {"compute_units": "cpu_and_gpu", "use_cpu_only": True},
            ("compute_units", "use_cpu_only=True"),
        ),
        (
            {"only_enable_device_with_ane": True, "compute_units": "cpu_only"},
            ("compute_units", "only_enable_device_with_ane=True"),
        ),
        (
            {"only_enable_device_with_ane": True, "use_cpu_and_gpu": True},
            ("use_cpu_and_gpu=True", "only_enable_device_with_ane=True"),
        ),
        (
            {"coreml_flags": 0x001 | 0x020},
            ("COREML_FLAG_USE_CPU_ONLY", "COREML_FLAG_USE_CPU_AND_GPU"),
        ),
        (
            {"model_format": "NeuralNetwork", "coreml_flags": 0x010},
            ("model_format", "COREML_FLAG_CREATE_MLPROGRAM"),
        ),
        (
            {"model_format": "MLProgram", "create_mlprogram": False},
            ("model_format", "create_mlprogram=False"),
        ),
    ],
)
def test_contradictions_are_rejected_naming_both_fields(all_plugins, fields, names) -> None:
    with pytest.raises(ValueError, match="contradict each other") as caught:
        parse_provider({"kind": "coreml", **fields}, plugins=all_plugins)
    for name in names:
        assert name in str(caught.value)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"compute_units": "GPU"},
            "compute_units: expected one of ALL, CPUOnly, CPUAndGPU, CPUAndNeuralEngine",
        ),
        ({"model_format": "onnx"}, "model_format: expected one of MLProgram, NeuralNetwork"),
        (
            {"specialization_strategy": "Fast"},
            "specialization_strategy: expected one of Default, FastPrediction",
        ),
        (
            {"coreml_flags": 0x040},
            "coreml_flags: expected a combination of COREML_FLAG_USE_CPU_ONLY",
        ),
        (
            {"require_static_input_shapes": 1},
            "require_static_input_shapes: expected true, false or null",
        ),
        (
            {"MLComputeUnits": "ALL"},
            r"unknown option\(s\) \['MLComputeUnits'\]; allowed: model_format, compute_units",
        ),
    ],
)
def test_bad_values_are_rejected_naming_the_field(all_plugins, fields, message) -> None:
    with pytest.raises(ValueError, match=message):
        parse_provider({"kind": "coreml", **fields}, plugins=all_plugins)


def test_prepare_requires_static_shapes_and_keys_the_model_cache(
    all_plugins, _private_cache
) -> None:
    checkpoint = InMemoryCheckpoint(models.matmul_model(static=True)).resolve()
    prepared = all_plugins.prepare_provider(CoreMLProvider(), checkpoint, MAC)
    assert prepared.require_static_input_shapes is True
    folder = Path(prepared.model_cache_directory)
    assert folder.is_dir() and folder.parent == _private_cache / "coreml"
    assert all_plugins.prepare_provider(CoreMLProvider(), checkpoint, MAC) == prepared
    mine = CoreMLProvider(model_cache_directory="/mine")
    assert all_plugins.prepare_provider(mine, checkpoint, MAC).model_cache_directory == "/mine"
    off = all_plugins.prepare_provider(CoreMLProvider(model_cache=False), checkpoint, MAC)
    assert off.model_cache_directory is None
    assert "ModelCacheDirectory" not in off.to_ort()[1]


def test_cache_key_changes_with_model_runtime_and_options() -> None:
    checkpoint = InMemoryCheckpoint(models.matmul_model(static=True)).resolve()
    base = model_cache_key(CoreMLProvider(), checkpoint, MAC)
    assert model_cache_key(CoreMLProvider(), checkpoint, MAC) == base
    changed_model = InMemoryCheckpoint(
        models.matmul_model(static=True).replace(b"matmul", b"matmux")
    ).resolve()
    assert changed_model.fingerprint() != checkpoint.fingerprint()
    variants = {
        model_cache_key(CoreMLProvider(), changed_model, MAC),
        model_cache_key(CoreMLProvider(), checkpoint, attrs.evolve(MAC, ort_version="1.32.0")),
        model_cache_key(CoreMLProvider(compute_units="ALL"), checkpoint, MAC),
    }
    assert base not in variants and len(variants) == 3
    assert model_cache_key(CoreMLProvider(model_cache_directory="/x"), checkpoint, MAC) == base


def test_probe_off_macos_reports_no_apple_silicon() -> None:
    assert detect_coreml() == {
        "macos_version": None,
        "apple_silicon": False,
        "neural_engine": False,
    }
