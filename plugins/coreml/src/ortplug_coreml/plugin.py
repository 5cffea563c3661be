"""The ``coreml`` plugin's hook implementations (entry point ``coreml = "ortplug_coreml.plugin"``)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import attrs
from ortplug.plugins import (
    CacheError,
    CheckpointMetadata,
    HostCapabilities,
    OrtplugCacheWarning,
    ProviderConfig,
    ProviderDecline,
    ProviderOffer,
    ResolvedCheckpoint,
    cache_dir,
    cache_key,
    hookimpl,
    pip_install,
    plain_options,
)

from .config import CoreMLProvider

__all__ = [
    "FP16_PREFERENCE",
    "LOW_PRECISION_PREFERENCE",
    "PREFERENCE",
    "model_cache_key",
    "ortplug_offer_providers",
    "ortplug_prepare_provider",
]

#: Preference of the exact CoreML offer; it orders CoreML's own offers only (its place among the
#: kinds is the manifests' before/after).
PREFERENCE = 0
#: CoreML on an fp16 variant: the GPU and Neural Engine compute in fp16, so it is the faster pick.
FP16_PREFERENCE = 1
#: CoreML with fp16 accumulation on the GPU (AllowLowPrecisionAccumulationOnGPU) on an fp32
#: checkpoint: just below exact, verified at fp16's tolerance.
LOW_PRECISION_PREFERENCE = -1
#: MLProgram needs Core ML 5, which ships with macOS 12.
_MIN_MACOS = (12,)


def _version(text: object) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in str(text).split("."))
    except ValueError:
        return ()


def _blocker(metadata: CheckpointMetadata, host: HostCapabilities) -> str | None:
    """Why the policy should not pick CoreML for this checkpoint here, or ``None``."""
    if host.platform != "darwin":
        return "CoreML runs on macOS only"
    if not host.has_provider(CoreMLProvider.ort_name):
        return (
            f"this ONNX Runtime build ({host.ort_version or 'not installed'}) has no "
            f"CoreMLExecutionProvider; {pip_install('ortplug[coreml]')}"
        )
    version = host.fact("coreml", "macos_version")
    if version and _version(version) < _MIN_MACOS:
        return f"macOS {version}: CoreML MLProgram needs macOS 12 or newer"
    if not host.fact("coreml", "apple_silicon", False):
        return (
            "Intel Mac: no Neural Engine, and CoreML on Intel GPUs rarely beats the CPU "
            "provider; request ['coreml', 'cpu'] explicitly to try it"
        )
    if metadata.precision == "int8":
        return "int8 checkpoint: CoreML cannot run QDQ integer graphs on the GPU or Neural Engine"
    if metadata.precision == "bf16":
        return "bf16 checkpoint: CoreML has no bfloat16 kernels"
    if not metadata.static_shapes:
        return (
            "dynamic input shapes: CoreML partitions with dynamic shapes fail at run time or "
            "run slower than CPU; give static shapes in the checkpoint metadata"
        )
    return None


@hookimpl
def ortplug_offer_providers(
    metadata: CheckpointMetadata, host: HostCapabilities
) -> Iterable[ProviderOffer | ProviderDecline]:
    """Static fp32/fp16 checkpoints on Apple Silicon: MLProgram on CPU and GPU (fp16 variants first).

    The GPU accumulates in fp32 unless asked otherwise; fp16 accumulation on an fp32
    checkpoint is its own candidate at ``precision="fp16"``.
    """
    blocker = _blocker(metadata, host)
    if blocker:
        yield ProviderDecline("coreml", blocker)
        return
    config = CoreMLProvider(
        model_format="MLProgram", compute_units="CPUAndGPU", require_static_input_shapes=True
    )
    reason = (
        f"Apple Silicon, macOS {host.fact('coreml', 'macos_version')}: {metadata.precision} "
        "static-shape checkpoint on CoreML MLProgram, CPUAndGPU (ALL would add Neural Engine "
        "compiles that can take minutes)"
    )
    yield ProviderOffer(config=config, preference=PREFERENCE, reason=reason)
    if metadata.precision == "fp32":
        yield ProviderOffer(
            config=attrs.evolve(config, allow_low_precision_accumulation_on_gpu=True),
            preference=LOW_PRECISION_PREFERENCE,
            reason=f"{reason}; fp16 accumulation on the GPU (AllowLowPrecisionAccumulationOnGPU)",
            precision="fp16",
        )
    for variant in metadata.variants_for(CoreMLProvider.ort_name, "fp16"):
        yield ProviderOffer(
            config=config,
            preference=FP16_PREFERENCE,
            reason=f"fp16 variant: CoreML's GPU computes in fp16; {reason}",
            variant=variant.name,
        )


def model_cache_key(
    config: CoreMLProvider, checkpoint: ResolvedCheckpoint, host: HostCapabilities
) -> str:
    """Model hash + ONNX Runtime + macOS versions + options: changed weights get a new cache."""
    options = plain_options(config, exclude=("model_cache", "model_cache_directory"))
    return cache_key(
        "coreml-model",
        checkpoint.fingerprint(),
        host.ort_version,
        host.fact("coreml", "macos_version"),
        options,
    )


@hookimpl
def ortplug_prepare_provider(
    config: ProviderConfig, checkpoint: ResolvedCheckpoint, host: HostCapabilities
) -> ProviderConfig | None:
    """Static-shape checkpoints require static shapes; compiled models go to a keyed cache dir."""
    if not isinstance(config, CoreMLProvider):
        return None
    prepared = config
    if prepared.require_static_input_shapes is None and checkpoint.metadata.static_shapes:
        prepared = attrs.evolve(prepared, require_static_input_shapes=True)
    if prepared.model_cache and prepared.model_cache_directory is None:
        try:
            folder = cache_dir("coreml", model_cache_key(prepared, checkpoint, host))
        except CacheError as exc:  # the cache only saves compile time: run without it
            warnings.warn(
                f"CoreML compiles {checkpoint.label} again for every session: {exc}",
                OrtplugCacheWarning,
                stacklevel=2,
            )
            prepared = attrs.evolve(prepared, model_cache=False)
        else:
            from ortplug.plugins import describe_cache_folder  # only when a model is compiled

            describe_cache_folder(
                folder, kind="CoreML model", checkpoint=checkpoint, ort_version=host.ort_version
            )
            prepared = attrs.evolve(prepared, model_cache_directory=str(folder))
    return prepared if prepared != config else None
