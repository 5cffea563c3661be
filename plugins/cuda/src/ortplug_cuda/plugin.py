"""The ``cuda`` plugin's hook implementations (entry point ``cuda = "ortplug_cuda.plugin"``)."""

from __future__ import annotations

from collections.abc import Iterable

import attrs
from ortplug.plugins import (
    CheckpointMetadata,
    DoctorCheck,
    HostCapabilities,
    ProviderConfig,
    ProviderDecline,
    ProviderOffer,
    hookimpl,
    preload_runtime_libraries,
)

from .config import CudaProvider
from .readiness import assess_cuda

__all__ = [
    "FP16_PREFERENCE",
    "PREFERENCE",
    "TF32_PREFERENCE",
    "ortplug_doctor_checks",
    "ortplug_offer_providers",
    "ortplug_prepare_provider",
]

#: Preference of the exact CUDA offer. A preference orders CUDA's own offers only; CUDA's place
#: among the kinds (behind TensorRT, ahead of CoreML and WebGPU) is the manifests' before/after.
PREFERENCE = 0
#: CUDA on an fp16 variant: ahead of CUDA on the fp32 reference.
FP16_PREFERENCE = 1
#: CUDA with TF32 matmuls (Ampere and later): just below exact fp32, verified at tf32's tolerance.
TF32_PREFERENCE = -1
#: The first compute capability with TF32 tensor cores (Ampere).
_TF32_CAPABILITY = (8, 0)


def _has_tf32(device: dict[str, object]) -> bool:
    major, _, minor = str(device.get("compute_capability") or "0.0").partition(".")
    try:
        return (int(major), int(minor or 0)) >= _TF32_CAPABILITY
    except ValueError:
        return False


@hookimpl
def ortplug_offer_providers(
    metadata: CheckpointMetadata, host: HostCapabilities
) -> Iterable[ProviderOffer | ProviderDecline]:
    """CUDA when a usable GPU is found (fp16 variants first); never for int8 (few CUDA int8 kernels).

    The fp32 offer computes in fp32 (``use_tf32=False``: ONNX Runtime's default is TF32 on
    Ampere and later); TF32 is its own candidate at ``precision="tf32"`` on those GPUs.
    """
    readiness = assess_cuda(host)
    if not readiness.ready:
        yield ProviderDecline("cuda", readiness.reason)
        return
    if metadata.precision == "int8":
        yield ProviderDecline(
            "cuda",
            "int8 checkpoint: the CUDA provider has few integer kernels, so quantized nodes "
            "fall back to CPU one by one with copies in between; the CPU provider runs it",
        )
        return
    device = readiness.device or {}
    config = CudaProvider(device_id=int(device.get("index", 0)), use_tf32=False)
    reason = readiness.describe(host)
    if not metadata.static_shapes:
        config = attrs.evolve(config, cudnn_conv_algo_search="DEFAULT")
        reason += (
            "; dynamic shapes: cudnn_conv_algo_search=DEFAULT (EXHAUSTIVE re-benchmarks every "
            "new shape and can end slower than CPU)"
        )
    exact = "; fp32 math" if metadata.precision == "fp32" else ""  # not said of an fp16 model
    yield ProviderOffer(config=config, preference=PREFERENCE, reason=f"{reason}{exact}")
    if metadata.precision == "fp32" and _has_tf32(device):
        yield ProviderOffer(
            config=attrs.evolve(config, use_tf32=True),
            preference=TF32_PREFERENCE,
            reason=f"{reason}; TF32 tensor-core math (10-bit mantissa, fp32 sums)",
            precision="tf32",
        )
    for variant in metadata.variants_for(CudaProvider.ort_name, "fp16"):
        yield ProviderOffer(
            config=config,
            preference=FP16_PREFERENCE,
            reason=f"fp16 variant: half the memory traffic, tensor cores; {reason}",
            variant=variant.name,
        )


@hookimpl
def ortplug_prepare_provider(config: ProviderConfig) -> ProviderConfig | None:
    """Preload the CUDA/cuDNN libraries (once, output captured) before a CUDA session is built."""
    if isinstance(config, CudaProvider) and config.preload_dlls:
        preload_runtime_libraries(config.dll_directory)
    return None


@hookimpl
def ortplug_doctor_checks(host: HostCapabilities) -> Iterable[DoctorCheck]:
    """On a host with an NVIDIA GPU or a CUDA build of ONNX Runtime: can CUDA run, and if not, why."""
    has_gpu = bool(host.fact("cuda", "devices"))
    if not has_gpu and not host.has_provider(CudaProvider.ort_name):
        return  # nothing NVIDIA here: not this plugin's business
    readiness = assess_cuda(host)
    if readiness.ready:
        yield DoctorCheck("cuda", True, readiness.describe(host))
        return
    yield DoctorCheck("cuda", False, str(readiness.problem), readiness.fix)
