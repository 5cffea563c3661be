"""The host's hardware, read from plain files: no plugin, no vendor library, no child process.

Only ``info``, ``doctor`` and ``doctor --fix`` call :func:`detect_hardware` (a build never
does). Every file is read under a root (``/`` by default), so a test or a person can point it
at a fake sysfs/proc tree with ``ORTPLUG_OVERRIDE_HARDWARE_ROOT``; platform and architecture
follow ``ORTPLUG_OVERRIDE_PLATFORM`` / ``ORTPLUG_OVERRIDE_MACHINE`` as the host facts do. Only
plain files are read, at most :data:`READ_LIMIT` bytes of each, and every name is kept
printable: such a root may hold anything.
"""

from __future__ import annotations

import os
import platform as _platform
import plistlib
import re
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..host.capabilities import base_fact
from ..printable import printable
from ..settings import Settings, settings

__all__ = [
    "HARDWARE_ROOT_ENV",
    "READ_LIMIT",
    "Hardware",
    "PciDevice",
    "cuda_major_for_driver",
    "detect_hardware",
    "driver_for_cuda",
]

#: Where the files are read from instead of ``/`` (a fake sysfs/proc tree).
HARDWARE_ROOT_ENV = "ORTPLUG_OVERRIDE_HARDWARE_ROOT"
#: The most read of one file: far more than the lines used (``/proc/cpuinfo``'s first
#: processor, one sysfs value), so a huge or endless file costs no more than this.
READ_LIMIT = 1 << 20
#: Opening a FIFO for reading waits for a writer unless non-blocking; a terminal never becomes
#: this process's controlling one.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)

#: NVIDIA's minimum Linux driver per CUDA major (CUDA Toolkit release notes, table 2: minor
#: version compatibility): a driver runs every CUDA release of the newest major it reaches.
_DRIVER_FOR_CUDA = ((580, 13), (525, 12), (450, 11))

_VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x106B: "Apple", 0x1AF4: "virtio"}
_DISPLAY_CLASS = 0x03  # PCI base class: VGA, XGA and 3D controllers
_ACCELERATOR_CLASS = 0x12  # PCI base class: processing accelerators (NPUs)
_VULKAN_LOADERS = (
    "usr/lib/x86_64-linux-gnu/libvulkan.so.1",
    "usr/lib/aarch64-linux-gnu/libvulkan.so.1",
    "usr/lib64/libvulkan.so.1",
    "usr/lib/libvulkan.so.1",
    "usr/local/lib/libvulkan.so.1",
    "usr/local/lib/libvulkan.1.dylib",
    "opt/homebrew/lib/libvulkan.1.dylib",
)
_ICD_DIRS = ("usr/share/vulkan/icd.d", "etc/vulkan/icd.d", "usr/local/share/vulkan/icd.d")
_NVIDIA_DRIVER = re.compile(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d+)\.(\d+)(?:\.(\d+))?")


def cuda_major_for_driver(driver: str | None) -> int | None:
    """The newest CUDA major an NVIDIA driver (``"580.65.06"``) runs, ``None`` when unknown."""
    try:
        branch = int(str(driver).split(".")[0])
    except ValueError:
        return None
    return next((major for floor, major in _DRIVER_FOR_CUDA if branch >= floor), None)


def driver_for_cuda(major: int) -> int | None:
    """The oldest NVIDIA driver branch that runs CUDA ``major`` (580 for 13), ``None`` if unknown."""
    return next((floor for floor, known in _DRIVER_FOR_CUDA if known == major), None)


@attrs.frozen
class PciDevice:
    """One PCI function: vendor and device ids, the 24-bit class code, and a name when known."""

    vendor: int
    device: int
    pci_class: int
    name: str = ""

    @property
    def vendor_name(self) -> str:
        return _VENDORS.get(self.vendor, f"vendor 0x{self.vendor:04x}")

    @property
    def is_gpu(self) -> bool:
        return self.pci_class >> 16 == _DISPLAY_CLASS

    @property
    def is_accelerator(self) -> bool:
        return self.pci_class >> 16 == _ACCELERATOR_CLASS

    def describe(self) -> str:
        """``NVIDIA H200``, or ``NVIDIA GPU 0x2335`` when no name is known."""
        kind = "GPU" if self.is_gpu else "accelerator" if self.is_accelerator else "device"
        return self.name or f"{self.vendor_name} {kind} 0x{self.device:04x}"


@attrs.frozen(kw_only=True)
class Hardware:
    """What :func:`detect_hardware` saw; every field empty or ``None`` where nothing was seen."""

    platform: str
    machine: str
    pci: tuple[PciDevice, ...] = ()
    render_nodes: tuple[str, ...] = ()
    nvidia_driver: str | None = None
    macos_version: str | None = None
    vulkan_loader: str | None = None
    vulkan_icds: tuple[str, ...] = ()
    cpu_vendor: str | None = None
    cpu_flags: frozenset[str] = frozenset()

    @property
    def cuda_major(self) -> int | None:
        """The newest CUDA major the NVIDIA driver runs (``None``: no driver seen)."""
        return cuda_major_for_driver(self.nvidia_driver)

    def gpus(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.pci if d.is_gpu)

    def describe(self) -> str:
        """One line for people: ``NVIDIA H200, driver 580.65.06 (CUDA 13); AuthenticAMD CPU``."""
        parts = [d.describe() for d in self.pci if d.is_gpu or d.is_accelerator]
        parts += [] if parts else list(self.render_nodes)
        if self.nvidia_driver:
            parts.append(f"NVIDIA driver {self.nvidia_driver} (CUDA {self.cuda_major or '<11'})")
        if self.macos_version:
            parts.append(f"macOS {self.macos_version}")
        if self.vulkan_loader:
            parts.append("Vulkan loader")
        parts.append(f"{self.cpu_vendor or self.machine} CPU")
        return f"{self.platform} {self.machine}: " + ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``--json``."""
        return {
            "platform": self.platform,
            "machine": self.machine,
            "gpus": [d.describe() for d in self.gpus()],
            "accelerators": [d.describe() for d in self.pci if d.is_accelerator],
            "render_nodes": list(self.render_nodes),
            "nvidia_driver": self.nvidia_driver,
            "cuda_major": self.cuda_major,
            "macos_version": self.macos_version,
            "vulkan_loader": self.vulkan_loader,
            "vulkan_icds": list(self.vulkan_icds),
            "cpu_vendor": self.cpu_vendor,
            "cpu_flags": sorted(self.cpu_flags),
        }


def _read_bytes(path: Path) -> bytes | None:
    """A plain file's first :data:`READ_LIMIT` bytes; ``None`` when it is missing, unreadable
    or no plain file (a FIFO would block, ``/dev/zero`` never ends, a folder raises)."""
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:  # a folder opens too (reading it raises): checked before any read, always closed
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            return file.read(READ_LIMIT)
    except OSError:
        return None
    finally:
        os.close(descriptor)


def _read(path: Path) -> str | None:
    data = _read_bytes(path)
    return None if data is None else data.decode("utf-8", errors="replace")


def _hex(text: str | None) -> int | None:
    try:
        return int(text.strip(), 16) if text else None
    except ValueError:
        return None


def _nvidia_names(root: Path) -> dict[str, str]:
    """GPU model names the NVIDIA driver lists, by PCI address (``/proc/driver/nvidia/gpus``)."""
    names = {}
    folder = root / "proc/driver/nvidia/gpus"
    for entry in sorted(folder.iterdir()) if folder.is_dir() else ():
        match = re.search(r"^Model:\s*(.+)$", _read(entry / "information") or "", re.M)
        if match:
            names[entry.name.lower()] = printable(match.group(1).strip())
    return names


def _pci_devices(root: Path) -> tuple[PciDevice, ...]:
    folder = root / "sys/bus/pci/devices"
    names = _nvidia_names(root)
    found = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else ():
        vendor, device, pci_class = (_hex(_read(entry / f)) for f in ("vendor", "device", "class"))
        if vendor is not None and device is not None and pci_class is not None:
            name = names.get(entry.name.lower(), "")
            found.append(PciDevice(vendor, device, pci_class, name))
    return tuple(found)


def _render_nodes(root: Path) -> tuple[str, ...]:
    """DRM render nodes (``/sys/class/drm/renderD128``): GPUs, including those not on PCI."""
    folder = root / "sys/class/drm"
    if not folder.is_dir():
        return ()
    nodes = (printable(p.name) for p in folder.iterdir() if p.name.startswith("renderD"))
    return tuple(sorted(nodes))


def _nvidia_driver(root: Path) -> str | None:
    match = _NVIDIA_DRIVER.search(_read(root / "proc/driver/nvidia/version") or "")
    return ".".join(g for g in match.groups() if g) if match else None


def _macos_version(root: Path) -> str | None:
    data = _read_bytes(root / "System/Library/CoreServices/SystemVersion.plist")
    try:
        version = plistlib.loads(data).get("ProductVersion") if data is not None else None
    except (plistlib.InvalidFileException, ValueError, AttributeError, RecursionError):
        return None
    return printable(str(version)) if version else None


def _vulkan(root: Path) -> tuple[str | None, tuple[str, ...]]:
    loader = next((name for name in _VULKAN_LOADERS if (root / name).exists()), None)
    folders = [root / folder for folder in _ICD_DIRS if (root / folder).is_dir()]
    icds = sorted(printable(p.name) for folder in folders for p in folder.glob("*.json"))
    return (f"/{loader}" if loader else None), tuple(dict.fromkeys(icds))


def _cpu(root: Path) -> tuple[str | None, frozenset[str]]:
    text = _read(root / "proc/cpuinfo") or ""
    vendor = re.search(r"^(?:vendor_id|CPU implementer)\s*:\s*(\S+)", text, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text, re.M)
    listed = flags.group(1).split() if flags else ()
    return (printable(vendor.group(1)) if vendor else None), frozenset(map(printable, listed))


def detect_hardware(
    root: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Hardware:
    """Read the host's hardware from files under ``root`` (default: the override variable's
    folder, else ``/``); files that are missing or unreadable are simply not seen."""
    current = settings() if environ is None else Settings.from_environ(environ, strict=False)
    base = Path(root) if root is not None else current.hardware_root or Path("/")
    env = current.overrides
    loader, icds = _vulkan(base)
    vendor, flags = _cpu(base)
    return Hardware(
        platform=base_fact("platform", sys.platform, env),
        machine=base_fact("machine", _platform.machine(), env),
        pci=_pci_devices(base),
        render_nodes=_render_nodes(base),
        nvidia_driver=_nvidia_driver(base),
        macos_version=_macos_version(base),
        vulkan_loader=loader,
        vulkan_icds=icds,
        cpu_vendor=vendor,
        cpu_flags=flags,
    )
