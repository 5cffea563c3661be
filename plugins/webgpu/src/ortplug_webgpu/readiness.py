"""Whether WebGPU can run on a host, decided from the ``webgpu`` probe's facts alone (pure, testable)."""

from __future__ import annotations

from typing import Any

import attrs
from ortplug.plugins import HostCapabilities

from .probes import ALLOW_SOFTWARE_ENV, describe_adapter

__all__ = ["WebGpuReadiness", "assess_webgpu"]

_FIX_DRIVER = (
    "install the GPU's Vulkan driver (mesa-vulkan-drivers, or the vendor's); on a host "
    "without a GPU, Mesa's lavapipe (plugins/webgpu/scripts/setup_lavapipe.sh) with "
    f"{ALLOW_SOFTWARE_ENV}=1"
)
_FIX_MESA = (
    "; Debian bookworm's own Mesa 22.3 lacks Vulkan features Dawn needs, bookworm-backports' "
    "Mesa 25 works (plugins/webgpu/scripts/setup_lavapipe.sh)"
)


@attrs.frozen
class WebGpuReadiness:
    """The verdict: the adapter Dawn uses, or why WebGPU cannot run here and what fixes it."""

    adapter: dict[str, Any] | None
    problem: str | None
    fix: str = ""
    software: bool = False

    @property
    def ready(self) -> bool:
        """True when Dawn ran a session on the adapter and nothing blocks it."""
        return self.problem is None and self.adapter is not None

    @property
    def reason(self) -> str:
        """Problem and fix in one line (a decline's reason)."""
        return f"{self.problem}; {self.fix}" if self.fix else str(self.problem)

    def describe(self) -> str:
        """The adapter in a few words."""
        return describe_adapter(self.adapter)


def _loader_fix(host: HostCapabilities) -> str:
    if host.platform == "linux":
        return (
            "install the Vulkan loader and a driver: apt-get install libvulkan1 "
            "mesa-vulkan-drivers (or your distribution's vulkan-loader and GPU driver)"
        )
    return "install a Vulkan runtime (the Vulkan SDK or the GPU driver)"


def assess_webgpu(host: HostCapabilities, *, allow_software: bool) -> WebGpuReadiness:
    """Check, in order: probe answered, Vulkan loader, an adapter, software opt-in, Dawn ran."""
    if "webgpu" not in host.facts:
        return WebGpuReadiness(None, "no webgpu facts: the webgpu probe did not run")
    error = host.fact("webgpu", "error")
    backend = host.fact("webgpu", "backend", "Vulkan")
    if backend == "Vulkan" and not host.fact("webgpu", "vulkan_loader"):
        detail = error or "the webgpu probe found no Vulkan loader"
        return WebGpuReadiness(None, f"no Vulkan loader: {detail}", _loader_fix(host))
    adapters = host.fact("webgpu", "adapters", [])
    if not adapters:
        detail = error or "none found"
        return WebGpuReadiness(None, f"no {backend} adapter for Dawn: {detail}", _FIX_DRIVER)
    adapter = host.fact("webgpu", "adapter") or adapters[0]
    software = bool(host.fact("webgpu", "software", adapter.get("type") == "cpu"))
    if software and not allow_software:
        return WebGpuReadiness(
            adapter,
            f"only a software adapter: {describe_adapter(adapter)}; it runs models 40-50x "
            "slower than the CPU provider",
            f"set {ALLOW_SOFTWARE_ENV}=1 to use it anyway (CI hosts without a GPU)",
            software=True,
        )
    usable = host.fact("webgpu", "usable")
    if usable is None:
        return WebGpuReadiness(
            adapter,
            f"not checked whether Dawn runs on {describe_adapter(adapter)}: the webgpu probe ran "
            f"before {ALLOW_SOFTWARE_ENV}=1 was set",
            "set it before ortplug first looks at the host in this process",
            software=software,
        )
    if not usable:
        detail = error or f"Dawn could not use {describe_adapter(adapter)}"
        mesa = "Mesa" in str(adapter.get("driver_info", ""))
        fix = "update the Vulkan driver" + (_FIX_MESA if mesa else "")
        return WebGpuReadiness(adapter, detail, fix, software=software)
    return WebGpuReadiness(dict(adapter), None, software=software)
