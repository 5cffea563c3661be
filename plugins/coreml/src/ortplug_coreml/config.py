"""``CoreMLProvider``: typed options of ONNX Runtime's CoreML execution provider.

The current option names (``ModelFormat``, ``MLComputeUnits``...) are the
fields; the legacy forms of seed 003 (``coreml_flags`` bits, ``use_cpu_only``,
``use_cpu_and_gpu``, ``only_enable_device_with_ane``, ``create_mlprogram``)
are accepted too and folded into them. Fields that say contradicting things
are rejected with an error naming both.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
from ortplug.plugins import (
    OptionError,
    bool_field,
    choice_field,
    declared_kind,
    ort_options,
    path_field,
)

__all__ = ["COMPUTE_UNITS", "COREML_FLAGS", "CoreMLProvider"]

COMPUTE_UNITS = ("ALL", "CPUOnly", "CPUAndGPU", "CPUAndNeuralEngine")
_UNIT_ALIASES = {
    "cpu_only": "CPUOnly",
    "cpu_and_gpu": "CPUAndGPU",
    "cpu_and_neural_engine": "CPUAndNeuralEngine",
    "MLComputeUnitsAll": "ALL",
    "MLComputeUnitsCPUOnly": "CPUOnly",
    "MLComputeUnitsCPUAndGPU": "CPUAndGPU",
    "MLComputeUnitsCPUAndNeuralEngine": "CPUAndNeuralEngine",
}
_FORMATS = ("MLProgram", "NeuralNetwork")
_FORMAT_ALIASES = {"mlprogram": "MLProgram", "neural_network": "NeuralNetwork"}

#: The legacy ``COREML_FLAG_*`` bits (``coreml_provider_factory.h``).
COREML_FLAGS = {
    "COREML_FLAG_USE_CPU_ONLY": 0x001,
    "COREML_FLAG_ENABLE_ON_SUBGRAPH": 0x002,
    "COREML_FLAG_ONLY_ENABLE_DEVICE_WITH_ANE": 0x004,
    "COREML_FLAG_ONLY_ALLOW_STATIC_INPUT_SHAPES": 0x008,
    "COREML_FLAG_CREATE_MLPROGRAM": 0x010,
    "COREML_FLAG_USE_CPU_AND_GPU": 0x020,
}
_ALL_FLAGS = sum(COREML_FLAGS.values())

# What each legacy bit claims: (effective setting, value).
_FLAG_CLAIMS = {
    "COREML_FLAG_USE_CPU_ONLY": ("compute_units", "CPUOnly"),
    "COREML_FLAG_ENABLE_ON_SUBGRAPH": ("enable_on_subgraphs", True),
    "COREML_FLAG_ONLY_ENABLE_DEVICE_WITH_ANE": ("compute_units", "CPUAndNeuralEngine"),
    "COREML_FLAG_ONLY_ALLOW_STATIC_INPUT_SHAPES": ("require_static_input_shapes", True),
    "COREML_FLAG_CREATE_MLPROGRAM": ("model_format", "MLProgram"),
    "COREML_FLAG_USE_CPU_AND_GPU": ("compute_units", "CPUAndGPU"),
}


def _check_flags(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (
        not isinstance(value, int) or isinstance(value, bool) or value < 0 or value & ~_ALL_FLAGS
    ):
        raise OptionError(
            f"{attribute.name}: expected a combination of {', '.join(COREML_FLAGS)} "
            f"(0..{_ALL_FLAGS:#x}), got {value!r}"
        )


@declared_kind
@attrs.frozen(kw_only=True)
class CoreMLProvider:
    """ONNX Runtime's ``CoreMLExecutionProvider``; ``None`` leaves CoreML's default.

    ``model_format`` defaults to MLProgram (broader op coverage than
    NeuralNetwork). ``model_cache`` lets ortplug keep compiled models under
    its cache directory, keyed by the model's hash, unless
    ``model_cache_directory`` names one. Booleans reach CoreML as ``"1"``/``"0"``.
    """

    kind: ClassVar[str]  # kind and ort_name: the manifest's (ortplug.json)
    ort_name: ClassVar[str]

    model_format: str | None = choice_field(_FORMATS, aliases=_FORMAT_ALIASES)
    compute_units: str | None = choice_field(COMPUTE_UNITS, aliases=_UNIT_ALIASES)
    require_static_input_shapes: bool | None = bool_field()
    enable_on_subgraphs: bool | None = bool_field()
    specialization_strategy: str | None = choice_field(("Default", "FastPrediction"))
    allow_low_precision_accumulation_on_gpu: bool | None = bool_field()
    profile_compute_plan: bool | None = bool_field()
    model_cache: bool = bool_field(True)
    model_cache_directory: str | None = path_field()
    # Legacy forms (seed 003), folded into the fields above.
    coreml_flags: int | None = attrs.field(default=None, validator=_check_flags)
    use_cpu_only: bool | None = bool_field()
    use_cpu_and_gpu: bool | None = bool_field()
    only_enable_device_with_ane: bool | None = bool_field()
    create_mlprogram: bool | None = bool_field()

    def __attrs_post_init__(self) -> None:
        self.effective()  # raises on contradictions

    def _claims(self) -> list[tuple[str, object, str]]:
        """``(setting, value, source)`` for every field that says something."""
        claims: list[tuple[str, object, str]] = [
            (name, getattr(self, name), name)
            for name in (
                "model_format",
                "compute_units",
                "require_static_input_shapes",
                "enable_on_subgraphs",
            )
            if getattr(self, name) is not None
        ]
        flags = self.coreml_flags or 0
        for flag, bit in COREML_FLAGS.items():
            if flags & bit:
                setting, value = _FLAG_CLAIMS[flag]
                claims.append((setting, value, f"coreml_flags={flags:#x} ({flag})"))
        legacy = {
            "use_cpu_only": ("compute_units", "CPUOnly"),
            "use_cpu_and_gpu": ("compute_units", "CPUAndGPU"),
            "only_enable_device_with_ane": ("compute_units", "CPUAndNeuralEngine"),
        }
        for name, (setting, value) in legacy.items():
            if getattr(self, name):
                claims.append((setting, value, f"{name}=True"))
        if self.create_mlprogram is not None:
            format_ = "MLProgram" if self.create_mlprogram else "NeuralNetwork"
            claims.append(("model_format", format_, f"create_mlprogram={self.create_mlprogram}"))
        return claims

    def effective(self) -> dict[str, object]:
        """The settings all fields agree on; ``ValueError`` naming both sides of a contradiction.

        ``only_enable_device_with_ane`` is compatible with ``ALL`` (the Neural
        Engine is among all units) and means ``CPUAndNeuralEngine`` otherwise.
        """
        chosen: dict[str, tuple[object, str]] = {}
        for setting, value, source in self._claims():
            if setting not in chosen:
                chosen[setting] = (value, source)
                continue
            previous, previous_source = chosen[setting]
            if previous == value:
                continue
            ane_with_all = {previous, value} == {"ALL", "CPUAndNeuralEngine"} and (
                "only_enable_device_with_ane" in source + previous_source
                or "ONLY_ENABLE_DEVICE_WITH_ANE" in source + previous_source
            )
            if ane_with_all:
                chosen[setting] = ("ALL", previous_source)
                continue
            raise OptionError(
                f"coreml: {previous_source} and {source} contradict each other "
                f"({setting} {previous!r} vs {value!r}); keep one"
            )
        settings = {setting: value for setting, (value, _) in chosen.items()}
        settings.setdefault("model_format", "MLProgram")
        return settings

    def to_ort(self) -> tuple[str, dict[str, str]]:
        """ONNX Runtime's provider name and options (booleans as ``"1"``/``"0"``)."""
        settings = self.effective()
        return self.ort_name, ort_options(
            [
                ("ModelFormat", settings.get("model_format")),
                ("MLComputeUnits", settings.get("compute_units")),
                ("RequireStaticInputShapes", settings.get("require_static_input_shapes")),
                ("EnableOnSubgraphs", settings.get("enable_on_subgraphs")),
                ("SpecializationStrategy", self.specialization_strategy),
                (
                    "AllowLowPrecisionAccumulationOnGPU",
                    self.allow_low_precision_accumulation_on_gpu,
                ),
                ("ProfileComputePlan", self.profile_compute_plan),
                ("ModelCacheDirectory", self.model_cache_directory if self.model_cache else None),
            ]
        )
