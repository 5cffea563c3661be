"""The host's hardware, read from plain files under a root: no plugin, no vendor library, no child
process."""

from __future__ import annotations

import os
import platform as _platform
import plistlib
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ..host.capabilities import base_fact
from ..plugins.declaration import FactRead, PluginDeclaration
from ..printable import printable
from ..settings import Settings, settings

__all__ = [
    "HARDWARE_ROOT_ENV",
    "READ_LIMIT",
    "Hardware",
    "PciDevice",
    "detect_hardware",
    "fact_reads",
]

#: Where the files are read from instead of ``/`` (a fake sysfs/proc tree).
HARDWARE_ROOT_ENV = "ORTPLUG_OVERRIDE_HARDWARE_ROOT"
#: The most read of one file: far more than the lines used (``/proc/cpuinfo``'s first
#: processor, one sysfs value), so a huge or endless file costs no more than this.
READ_LIMIT = 1 << 20
#: Opening a FIFO for reading waits for a writer unless non-blocking; a terminal never becomes
#: this process's controlling one.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)

_VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x106B: "Apple", 0x1AF4: "virtio"}
_DISPLAY_CLASS = 0x03  # PCI base class: VGA, XGA and 3D controllers
_ACCELERATOR_CLASS = 0x12  # PCI base class: processing accelerators (NPUs)
_ICD_DIRS = ("usr/share/vulkan/icd.d", "etc/vulkan/icd.d", "usr/local/share/vulkan/icd.d")
#: A fact read from files: its name (``probe.fact``) and how it is read.
FactSource = tuple[str, FactRead]


def fact_reads(declarations: Iterable[PluginDeclaration]) -> tuple[FactSource, ...]:
    """The facts ``declarations``' probes say how to read from files, ``probe.fact`` each (the
    first declaration of a name wins)."""
    found: dict[str, FactRead] = {}
    for declaration in declarations:
        for probe in declaration.probes:
            for fact, read in probe.read.items():
                found.setdefault(f"{probe.name}.{fact}", read)
    return tuple(found.items())


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
    macos_version: str | None = None
    vulkan_icds: tuple[str, ...] = ()
    cpu_vendor: str | None = None
    cpu_flags: frozenset[str] = frozenset()
    #: The facts read from files as the manifests say (``{"cuda.driver_version": "580.65.06"}``).
    facts: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    #: Each such fact's label for people and whether it is a version (else: a file that exists).
    labels: Mapping[str, tuple[str, bool]] = attrs.field(factory=dict, hash=False, eq=False)

    def gpus(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.pci if d.is_gpu)

    def fact(self, name: str) -> str | None:
        """A fact read from files (``probe.fact``), ``None`` when it was not seen."""
        return self.facts.get(name)

    def said(self, name: str) -> str:
        """A fact seen, for people: ``NVIDIA driver 580.65.06``, ``Vulkan loader``."""
        label, version = self.labels.get(name, (name, True))
        return f"{label} {self.facts[name]}" if version else label

    def label(self, name: str) -> str:
        """A fact's label for people (its name when its manifest gives none)."""
        return self.labels.get(name, (name, True))[0]

    def describe(self) -> str:
        """One line for people: ``NVIDIA H200, NVIDIA driver 580.65.06, AuthenticAMD CPU``."""
        parts = [d.describe() for d in self.pci if d.is_gpu or d.is_accelerator]
        parts += [] if parts else list(self.render_nodes)
        parts += [self.said(name) for name in self.facts if name in self.labels]
        if self.macos_version:
            parts.append(f"macOS {self.macos_version}")
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
            "facts": dict(self.facts),
            "macos_version": self.macos_version,
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


def _macos_version(root: Path) -> str | None:
    data = _read_bytes(root / "System/Library/CoreServices/SystemVersion.plist")
    try:
        version = plistlib.loads(data).get("ProductVersion") if data is not None else None
    except (plistlib.InvalidFileException, ValueError, AttributeError, RecursionError):
        return None
    return printable(str(version)) if version else None


def _vulkan_icds(root: Path) -> tuple[str, ...]:
    """The Vulkan driver manifests (ICDs) installed: what a Vulkan loader would find."""
    folders = [root / folder for folder in _ICD_DIRS if (root / folder).is_dir()]
    icds = sorted(printable(p.name) for folder in folders for p in folder.glob("*.json"))
    return tuple(dict.fromkeys(icds))


def _read_fact(root: Path, read: FactRead) -> str | None:
    """A fact as ``read`` says: the first of its paths that exists, or its pattern's group in
    the first whose text matches (paths under ``root``); ``None`` when none does."""
    for path in read.paths:
        target = root / os.path.expanduser(path).lstrip("/")
        if read.pattern is None:
            if target.exists():
                return printable(path)
            continue
        match = re.search(read.pattern, _read(target) or "")
        if match:
            return printable(match.group(1))
    return None


def _cpu(root: Path) -> tuple[str | None, frozenset[str]]:
    text = _read(root / "proc/cpuinfo") or ""
    vendor = re.search(r"^(?:vendor_id|CPU implementer)\s*:\s*(\S+)", text, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text, re.M)
    listed = flags.group(1).split() if flags else ()
    return (printable(vendor.group(1)) if vendor else None), frozenset(map(printable, listed))


def detect_hardware(
    root: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    reads: Iterable[FactSource] | None = None,
) -> Hardware:
    """Read the host's hardware from files under ``root`` (default: the override variable's
    folder, else ``/``), and the facts ``reads`` names as the manifests say; unreadable: unseen."""
    current = settings() if environ is None else Settings.from_environ(environ, strict=False)
    base = Path(root) if root is not None else current.hardware_root or Path("/")
    env = current.overrides
    if reads is None:
        from ..plugin_host.first_party import example_declarations, first_party_declarations

        reads = fact_reads([*first_party_declarations(), *example_declarations()])
    given = dict(reads)
    facts = {name: value for name, read in given.items() if (value := _read_fact(base, read))}
    labels = {name: (read.label or name, read.pattern is not None) for name, read in given.items()}
    vendor, flags = _cpu(base)
    return Hardware(
        platform=base_fact("platform", sys.platform, env),
        machine=base_fact("machine", _platform.machine(), env),
        pci=_pci_devices(base),
        render_nodes=_render_nodes(base),
        macos_version=_macos_version(base),
        vulkan_icds=_vulkan_icds(base),
        cpu_vendor=vendor,
        cpu_flags=flags,
        facts=facts,
        labels=labels,
    )
