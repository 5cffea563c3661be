"""Fake sysfs/proc/macOS trees for hardware detection: the files each kind of host has."""

from __future__ import annotations

import json
import plistlib
from pathlib import Path

_CAPTURED = Path(__file__).parent / "data"

NVIDIA_VERSION = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver}  Tue Jul  1 21:25:36 UTC 2025\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)
_AMD_CPU = "vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma\n"
_INTEL_CPU = "vendor_id\t: GenuineIntel\nflags\t\t: fpu sse2 avx avx2 avx512f avx512_vnni\n"
_ARM_CPU = "CPU implementer\t: 0x41\nFeatures\t: fp asimd evtstrm aes crc32 asimddp\n"


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def pci(root: Path, address: str, vendor: int, device: int, pci_class: int) -> None:
    """One PCI function as sysfs shows it."""
    folder = f"sys/bus/pci/devices/{address}"
    _write(root, f"{folder}/vendor", f"0x{vendor:04x}\n")
    _write(root, f"{folder}/device", f"0x{device:04x}\n")
    _write(root, f"{folder}/class", f"0x{pci_class:06x}\n")


def vulkan(root: Path, *icds: str) -> None:
    """The Vulkan loader and ICD files (as Mesa's packages install them)."""
    _write(root, "usr/lib/x86_64-linux-gnu/libvulkan.so.1", "")
    for icd in icds:
        _write(root, f"usr/share/vulkan/icd.d/{icd}", '{"ICD": {"library_path": "x.so"}}')


def bare_cpu(root: Path, cpuinfo: str = _AMD_CPU) -> Path:
    """A Linux host with a CPU, a host bridge and a virtio NIC: nothing to accelerate on."""
    _write(root, "proc/cpuinfo", cpuinfo)
    pci(root, "0000:00:00.0", 0x8086, 0x0D57, 0x060000)
    pci(root, "0000:00:03.0", 0x1AF4, 0x1041, 0x020000)
    return root


def nvidia(root: Path, driver: str | None = "580.65.06") -> Path:
    """An x86 host with one H200 (a 3D controller) and, unless ``driver`` is None, its driver."""
    bare_cpu(root)
    pci(root, "0000:19:00.0", 0x10DE, 0x2335, 0x030200)
    if driver is not None:
        _write(root, "proc/driver/nvidia/version", NVIDIA_VERSION.format(driver=driver))
        _write(root, "proc/driver/nvidia/gpus/0000:19:00.0/information", "Model: \t NVIDIA H200\n")
    return root


def amd_gpu(root: Path) -> Path:
    """A Radeon RX 7900 XTX with Mesa's Vulkan drivers."""
    bare_cpu(root)
    pci(root, "0000:03:00.0", 0x1002, 0x744C, 0x030000)
    vulkan(root, "radeon_icd.x86_64.json", "lvp_icd.x86_64.json")
    _write(root, "sys/class/drm/renderD128/dev", "226:128\n")
    return root


def intel_gpu(root: Path) -> Path:
    """An Intel CPU with its integrated Arc GPU and NPU, Mesa's Vulkan drivers installed."""
    bare_cpu(root, _INTEL_CPU)
    pci(root, "0000:00:02.0", 0x8086, 0x7D55, 0x030000)
    pci(root, "0000:00:0b.0", 0x8086, 0x7D1D, 0x120000)
    vulkan(root, "intel_icd.x86_64.json")
    _write(root, "sys/class/drm/renderD128/dev", "226:128\n")
    return root


def vulkan_only(root: Path) -> Path:
    """An Arm board whose GPU is no PCI device: only a DRM render node and Vulkan show it."""
    _write(root, "proc/cpuinfo", _ARM_CPU)
    vulkan(root, "panfrost_icd.aarch64.json")
    _write(root, "sys/class/drm/renderD128/dev", "226:128\n")
    return root


def mesa_without_gpu(root: Path) -> Path:
    """A CPU host with every Mesa ICD (lavapipe too) installed but no GPU: this CI host."""
    bare_cpu(root)
    vulkan(root, "radeon_icd.x86_64.json", "intel_icd.x86_64.json", "lvp_icd.x86_64.json")
    return root


def apple_silicon(root: Path, version: str = "14.5") -> Path:
    """macOS's version file (no sysfs or proc on a Mac)."""
    path = root / "System/Library/CoreServices/SystemVersion.plist"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(plistlib.dumps({"ProductName": "macOS", "ProductVersion": version}))
    return root


def h200(root: Path) -> Path:
    """The files a real H200 host holds (captured there: ``data/h200_root.json``)."""
    for relative, text in json.loads((_CAPTURED / "h200_root.json").read_text())["files"].items():
        _write(root, relative, text)
    return root
