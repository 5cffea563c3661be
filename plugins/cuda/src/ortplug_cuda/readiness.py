"""Whether the CUDA provider can run on a host, decided from host facts alone (pure, testable)."""

from __future__ import annotations

from typing import Any

import attrs
from ortplug.plugins import HostCapabilities, pip_install

from .config import CudaProvider
from .probes import cuda_major

__all__ = ["CudaReadiness", "assess_cuda"]


def _fix_runtime() -> str:
    """The install that brings one ONNX Runtime GPU wheel with matching nvidia-* libraries."""
    return (
        f"{pip_install('ortplug[cuda]')} (one ONNX Runtime GPU wheel with matching nvidia-* "
        "libraries)"
    )


@attrs.frozen
class CudaReadiness:
    """The verdict: the device to use, or why CUDA cannot run here and what fixes it."""

    device: dict[str, Any] | None
    problem: str | None
    fix: str = ""

    @property
    def reason(self) -> str:
        """Problem and fix in one line (a decline's reason)."""
        return f"{self.problem}; {self.fix}" if self.fix else str(self.problem)

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


def assess_cuda(host: HostCapabilities) -> CudaReadiness:
    """Check, in order: driver, visible devices, ORT build, driver vs ORT CUDA, libraries."""
    driver_error = host.fact("cuda", "driver_error")
    if driver_error:
        return CudaReadiness(
            None,
            f"no usable NVIDIA driver: {driver_error}",
            "install or repair the NVIDIA driver (nvidia-smi must list the GPU)",
        )
    devices = host.fact("cuda", "devices", [])
    if not devices:
        visible = host.fact("cuda", "visible_devices")
        hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        return CudaReadiness(
            None,
            f"the NVIDIA driver reports no CUDA device{hint}",
            "check CUDA_VISIBLE_DEVICES and nvidia-smi",
        )
    if not host.has_provider(CudaProvider.ort_name):
        return CudaReadiness(
            None,
            f"this ONNX Runtime build ({host.ort_version or 'not installed'}) has no "
            "CUDAExecutionProvider",
            f"{_fix_runtime()}; `ortplug info` also reports two onnxruntime wheels installed "
            "side by side",
        )
    needed = host.fact("cuda", "ort_cuda_version")
    supported = host.fact("cuda", "driver_cuda_version")
    needed_major, supported_major = cuda_major(needed), cuda_major(supported)
    if needed_major and supported_major and supported_major < needed_major:
        older_build = (
            f" or install the CUDA 12 build: {pip_install('ortplug[cuda12]')}"
            if supported_major == 12
            else ""
        )
        return CudaReadiness(
            None,
            f"the NVIDIA driver supports CUDA up to {supported} but onnxruntime "
            f"{host.ort_version} is built for CUDA {needed}",
            f"update the driver (CUDA 13 needs r580 or newer){older_build}",
        )
    library_error = host.fact("cuda", "library_error")
    if library_error:
        return CudaReadiness(
            None, f"CUDA libraries for onnxruntime do not load ({library_error})", _fix_runtime()
        )
    device = max(devices, key=lambda d: d.get("memory_mib", 0))
    return CudaReadiness(dict(device), None)
