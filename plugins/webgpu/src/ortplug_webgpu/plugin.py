"""The ``webgpu`` plugin's hook implementations (entry point ``webgpu = "ortplug_webgpu.plugin"``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

from ortplug.plugins import (
    CheckpointMetadata,
    DoctorCheck,
    HostCapabilities,
    OptionError,
    ProviderConfig,
    ProviderDecline,
    ProviderOffer,
    ResolvedCheckpoint,
    hookimpl,
)

from .config import WebGpuProvider
from .probes import (
    ALLOW_SOFTWARE_ENV,
    apply_software_opt_in,
    software_allowed,
)
from .readiness import assess_webgpu
from .shader_cache import MESA_CACHE_ENV, shader_cache_path, use_shader_cache

__all__ = [
    "FP16_PREFERENCE",
    "PREFERENCE",
    "ortplug_doctor_checks",
    "ortplug_offer_providers",
    "ortplug_prepare_provider",
]

#: Preference of the WebGPU offer; it orders WebGPU's own offers only. WebGPU goes behind CUDA
#: and CoreML (its manifest's "after": a native provider of the same GPU is faster).
PREFERENCE = 0
#: WebGPU on an fp16 variant (shader-f16 halves memory traffic): ahead of WebGPU on the fp32 reference.
FP16_PREFERENCE = 1
# The ``onnxruntime-ep-webgpu`` library is declared in ortplug.json; the EP reads its software
# switch when the core first registers the library, so the opt-in is applied at import (a
# declared plugin is imported before its kind is built and the library registered).
apply_software_opt_in()


@hookimpl
def ortplug_offer_providers(
    metadata: CheckpointMetadata, host: HostCapabilities
) -> Iterable[ProviderOffer | ProviderDecline]:
    """WebGPU on a GPU adapter Dawn runs on, for fp32/fp16 (fp16 variants first); software only when opted in."""
    allow = software_allowed()
    readiness = assess_webgpu(host, allow_software=allow)
    if not readiness.ready:
        yield ProviderDecline("webgpu", readiness.reason)
        return
    if metadata.precision == "int8":
        yield ProviderDecline(
            "webgpu",
            "int8 checkpoint: the WebGPU provider has few integer kernels, so quantized nodes "
            "fall back to CPU one by one with copies in between; the CPU provider runs it",
        )
        return
    if metadata.precision == "bf16":
        yield ProviderDecline("webgpu", "bf16 checkpoint: WebGPU has no bfloat16 kernels")
        return
    reason = f"Dawn runs on {readiness.describe()}"
    if readiness.software:
        reason += (
            f" (software adapter, opted in with {ALLOW_SOFTWARE_ENV}=1: 40-50x slower than "
            "the CPU provider, for testing)"
        )
    yield ProviderOffer(config=WebGpuProvider(), preference=PREFERENCE, reason=reason)
    for variant in metadata.variants_for(WebGpuProvider.ort_name, "fp16"):
        yield ProviderOffer(
            config=WebGpuProvider(),
            preference=FP16_PREFERENCE,
            reason=f"fp16 variant; {reason}",
            variant=variant.name,
        )


@hookimpl
def ortplug_prepare_provider(
    config: ProviderConfig, checkpoint: ResolvedCheckpoint
) -> ProviderConfig | None:
    """Software opt-in and Mesa's shader cache for this process; graph capture needs static shapes."""
    if not isinstance(config, WebGpuProvider):
        return None
    if config.enable_graph_capture and not checkpoint.metadata.static_shapes:
        raise OptionError(
            f"enable_graph_capture: expected a checkpoint with static input shapes, "
            f"{checkpoint.label} has dynamic ones (captured GPU work replays fixed shapes)"
        )
    apply_software_opt_in()
    with contextlib.suppress(OSError):  # no cache: shaders compile in each process; see doctor
        use_shader_cache()
    return None


def _shader_cache_check() -> DoctorCheck:
    """Mesa's shader cache folder (the user's, or ortplug's keyed one) can be created and written."""
    try:
        folder = shader_cache_path()  # not use_shader_cache: a diagnosis neither records nor evicts
        folder.mkdir(parents=True, exist_ok=True)
        problem = None if os.access(folder, os.W_OK) else f"{folder} is not writable"
    except OSError as exc:
        problem = str(exc)
    if problem is None:
        return DoctorCheck("webgpu shader cache", True, f"Mesa's shader cache in {folder}")
    return DoctorCheck(
        "webgpu shader cache",
        False,
        problem,
        f"set ORTPLUG_CACHE_DIR (or {MESA_CACHE_ENV}) to a writable directory; without it "
        "every process compiles its shaders again (seconds per model on lavapipe)",
    )


@hookimpl
def ortplug_doctor_checks(host: HostCapabilities) -> Iterable[DoctorCheck]:
    """Vulkan loader present, an adapter Dawn runs on, and a writable shader cache."""
    allow = software_allowed()
    readiness = assess_webgpu(host, allow_software=allow)
    if host.fact("webgpu", "backend", "Vulkan") == "Vulkan":
        loader = host.fact("webgpu", "vulkan_loader")
        if not loader:
            yield DoctorCheck("webgpu vulkan loader", False, str(readiness.problem), readiness.fix)
            return
        yield DoctorCheck("webgpu vulkan loader", True, f"{loader} loads")
    if readiness.software and not allow:
        yield DoctorCheck(
            "webgpu adapter",
            True,
            f"only a software adapter, {readiness.describe()}: the policy skips it unless "
            f"{ALLOW_SOFTWARE_ENV}=1",
        )
    elif not readiness.ready:
        yield DoctorCheck("webgpu adapter", False, str(readiness.problem), readiness.fix)
    else:
        yield DoctorCheck("webgpu adapter", True, f"Dawn runs on {readiness.describe()}")
    if host.platform == "linux":
        yield _shader_cache_check()
