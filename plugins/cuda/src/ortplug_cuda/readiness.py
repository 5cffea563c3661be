"""Whether the CUDA provider can run on a host, decided from host facts alone (pure, testable)."""

from __future__ import annotations

from typing import Any

import attrs
from ortplug import HostCapabilities

from .config import CudaProvider

__all__ = ["CudaReadiness", "assess_cuda"]

_FIX_RUNTIME = (
    "pip install 'ortplug[cuda]' (one ONNX Runtime GPU wheel with matching nvidia-* libraries)"
)


@attrs.frozen
class CudaReadiness:
    """The verdict: the device to use, or why CUDA cannot run here."""

    device: dict[str, Any] | None
    problem: str | None

    @property
    def ready(self) -> bool:
        """True when a device was found and nothing blocks the provider."""
        return self.problem is None and self.device is not None

    def describe(self, host: HostCapabilities) -> str:
        """One line about the chosen GPU and the libraries that will serve it."""
        device = self.device or {}
        memory = device.get("memory_mib", 0) / 1024
        driver = host.fact("cuda", "driver_version") or "version unknown"
        return (
            f"NVIDIA {device.get('name', 'GPU')} (cc {device.get('compute_capability', '?')}, "
            f"{memory:.0f} GiB), driver {driver} (CUDA {host.fact('cuda', 'driver_cuda_version')}); "
            f"CUDA runtime {host.fact('cuda', 'cuda_runtime_version')}, cuDNN "
            f"{host.fact('cuda', 'cudnn_version')}"
        )


def _major(version: object) -> int | None:
    try:
        return int(str(version).split(".")[0]) if version else None
    except ValueError:
        return None


def assess_cuda(host: HostCapabilities) -> CudaReadiness:
    """Check, in order: driver, visible devices, ORT build, driver vs ORT CUDA, libraries."""
    driver_error = host.fact("cuda", "driver_error")
    if driver_error:
        return CudaReadiness(None, f"no usable NVIDIA driver: {driver_error}")
    devices = host.fact("cuda", "devices", [])
    if not devices:
        visible = host.fact("cuda", "visible_devices")
        hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        return CudaReadiness(None, f"the NVIDIA driver reports no CUDA device{hint}")
    if not host.has_provider(CudaProvider.ort_name):
        return CudaReadiness(
            None,
            f"this ONNX Runtime build ({host.ort_version or 'not installed'}) has no "
            f"CUDAExecutionProvider; {_FIX_RUNTIME}; `ortplug info` also reports two "
            "onnxruntime wheels installed side by side",
        )
    needed = host.fact("cuda", "ort_cuda_version")
    supported = host.fact("cuda", "driver_cuda_version")
    needed_major, supported_major = _major(needed), _major(supported)
    if needed_major and supported_major and supported_major < needed_major:
        older_build = (
            " or install the CUDA 12 build: pip install 'ortplug[cuda12]'"
            if supported_major == 12
            else ""
        )
        return CudaReadiness(
            None,
            f"the NVIDIA driver supports CUDA up to {supported} but onnxruntime "
            f"{host.ort_version} is built for CUDA {needed}: update the driver (CUDA 13 needs "
            f"r580 or newer){older_build}",
        )
    library_error = host.fact("cuda", "library_error")
    if library_error:
        return CudaReadiness(
            None, f"CUDA libraries for onnxruntime do not load ({library_error}); {_FIX_RUNTIME}"
        )
    device = max(devices, key=lambda d: d.get("memory_mib", 0))
    return CudaReadiness(dict(device), None)
