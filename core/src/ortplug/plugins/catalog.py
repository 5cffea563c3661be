"""The catalog of known providers: for each, the hardware it is for, how to see that hardware
with plain file reads (:mod:`ortplug.hardware`), and what to pip-install for it.

Data, not code: the built-in entries below are read by the same loader as a user's file
(``ORTPLUG_CATALOG=/path/catalog.json``, entries of the same name replace built-in ones). Only
``info`` and ``doctor`` import this module, never a build. A file is ``{"providers": [ENTRY,
...]}``; an ENTRY is::

    {"name": "cuda",                      # the plugin's entry-point name
     "distribution": "ortplug-cuda",      # what pip installs
     "hardware": "NVIDIA GPU",            # what it is for, for people
     "detect": [{"pci_vendor": "0x10de", "pci_class": "0x03"}, {"nvidia_driver": true}],
     "install": [{"cuda_min": 13, "extra": "cuda", "runtime": "onnxruntime-gpu==1.31.1"}, ...],
     "unless": ["cuda"],                  # not wanted where these entries already apply
     "optional": false}                   # true: named, never installed by doctor --fix

``detect`` holds when any of its conditions does, a condition when all its keys do (an empty
list: every host); see :data:`CONDITION_KEYS`. ``install`` options are tried in order, the first
whose ``cuda_min`` the NVIDIA driver reaches applies; each may name a core ``extra``, the
``runtime`` wheel with its version rule, more ``packages`` and an ``index_url``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..errors import OptionError
from ..hardware import Hardware

__all__ = [
    "CATALOG_ENV",
    "CONDITION_KEYS",
    "BUILTIN_CATALOG",
    "CatalogEntry",
    "Condition",
    "InstallOption",
    "Requirement",
    "load_catalog",
    "parse_catalog",
]

#: A JSON file of catalog entries of one's own (an internal index, a pinned version set).
CATALOG_ENV = "ORTPLUG_CATALOG"

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[A-Za-z0-9_,.\s-]*\])?\s*(.*)$")
_SPEC = re.compile(r"^\s*(==|!=|>=|<=|>|<)\s*([0-9]+(?:\.[0-9]+)*)\s*$")
_COMPARE: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
}


def _release(version: str) -> tuple[int, ...]:
    """``"1.31.1"`` -> ``(1, 31, 1)``, trailing zeros dropped (``1.24`` == ``1.24.0``)."""
    parts = [int(p) for p in re.findall(r"\d+", version.split("+")[0].split("-")[0])[:4]]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


@attrs.frozen
class Requirement:
    """A pip requirement (``onnxruntime-gpu[cuda,cudnn]==1.31.1``): its text, the distribution's
    name as pip compares names, and its version rules."""

    text: str
    name: str
    rules: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, text: str) -> Requirement:
        """Parse ``text``; :class:`OptionError` when it is not ``NAME[EXTRAS] RULE,RULE``."""
        match = _REQUIREMENT.match(text)
        if not match:
            raise OptionError(f"expected a requirement like 'onnxruntime>=1.22', got {text!r}")
        rules = []
        for part in filter(None, (p.strip() for p in match.group(3).split(","))):
            rule = _SPEC.match(part)
            if not rule:
                raise OptionError(
                    f"expected version rules like '>=1.22' or '==1.31.1' in {text!r}, got {part!r}"
                )
            rules.append((rule.group(1), rule.group(2)))
        return cls(text, re.sub(r"[-_.]+", "-", match.group(1)).lower(), tuple(rules))

    def satisfied_by(self, version: str) -> bool:
        """Whether an installed ``version`` meets every version rule."""
        return all(_COMPARE[op](_release(version), _release(v)) for op, v in self.rules)


@attrs.frozen(kw_only=True)
class Condition:
    """What one kind of host shows; every key given must hold (see :data:`CONDITION_KEYS`)."""

    platform: tuple[str, ...] = ()
    machine: tuple[str, ...] = ()
    pci_vendor: int | None = None
    pci_class: int | None = None
    gpu: bool = False
    nvidia_driver: bool = False
    macos_min: str | None = None
    vulkan_loader: bool = False
    cpu_vendor: tuple[str, ...] = ()
    cpu_flags: tuple[str, ...] = ()

    def seen(self, hw: Hardware) -> str | None:
        """What of ``hw`` makes this condition hold (``"NVIDIA H200 (driver 580.65, CUDA 13)"``),
        or ``None`` when it does not."""
        said: list[str] = []
        if self.platform and hw.platform not in self.platform:
            return None
        if self.machine and hw.machine not in self.machine:
            return None
        if self.pci_vendor is not None or self.pci_class is not None:
            devices = [
                d
                for d in hw.pci
                if self.pci_vendor in (None, d.vendor)
                and self.pci_class in (None, d.pci_class >> 16)
            ]
            if not devices:
                return None
            said.append(" + ".join(d.describe() for d in devices))
        if self.gpu:
            gpus = hw.gpus()
            if not gpus and not hw.render_nodes:
                return None
            if self.pci_vendor is None:
                named = [g.describe() for g in gpus] or [f"GPU ({', '.join(hw.render_nodes)})"]
                said.append(" + ".join(named))
        if self.nvidia_driver and hw.nvidia_driver is None:
            return None
        if self.macos_min is not None:
            if hw.macos_version is None or _release(hw.macos_version) < _release(self.macos_min):
                return None
            said.append(f"macOS {hw.macos_version} on {hw.machine}")
        if self.vulkan_loader:
            if hw.vulkan_loader is None:
                return None
            said.append("with a Vulkan loader")
        if self.cpu_vendor and hw.cpu_vendor not in self.cpu_vendor:
            return None
        if self.cpu_flags and not set(self.cpu_flags) <= hw.cpu_flags:
            return None
        if self.cpu_vendor or self.cpu_flags:
            flags = f" ({', '.join(self.cpu_flags)})" if self.cpu_flags else ""
            said.append(f"{hw.cpu_vendor} CPU{flags}")
        if hw.nvidia_driver and (self.nvidia_driver or self.pci_vendor == 0x10DE):
            said.append(f"(driver {hw.nvidia_driver}, CUDA {hw.cuda_major or 'below 11'})")
        return " ".join(said) or "this host"


@attrs.frozen(kw_only=True)
class InstallOption:
    """What to install for an entry: a core extra, the runtime wheel, more packages, an index."""

    extra: str | None = None
    runtime: Requirement | None = None
    packages: tuple[str, ...] = ()
    index_url: str | None = None
    cuda_min: int | None = None


@attrs.frozen(kw_only=True)
class CatalogEntry:
    """One known provider: its plugin, the hardware it is for and what to install for it."""

    name: str
    distribution: str
    hardware: str
    detect: tuple[Condition, ...] = ()
    install: tuple[InstallOption, ...] = ()
    unless: tuple[str, ...] = ()
    optional: bool = False

    def seen(self, hw: Hardware) -> str | None:
        """What on ``hw`` this entry is for, or ``None`` when the host has none of it."""
        if not self.detect:
            return self.hardware
        return next((s for c in self.detect if (s := c.seen(hw)) is not None), None)

    def option_for(self, cuda_major: int | None) -> InstallOption | None:
        """The first install option the driver's CUDA major allows (the first one when no
        driver was seen: it needs installing anyway), ``None`` when the driver is too old."""
        if cuda_major is None:
            return self.install[0] if self.install else None
        return next((o for o in self.install if (o.cuda_min or 0) <= cuda_major), None)


_CUDA13_RUNTIME = "onnxruntime-gpu[cuda,cudnn]==1.31.1"
_CUDA12_RUNTIME = "onnxruntime-gpu[cuda,cudnn]==1.26.0"  # the last CUDA 12 build on PyPI

# The first-party plugins (README's install matrix), most specific first: the first entry that
# applies and names a runtime wheel decides the runtime. Its runtime rules are the core's extras
# (core/pyproject.toml; a test keeps both the same).
BUILTIN_CATALOG: dict[str, Any] = {
    "providers": [
        {
            "name": "tensorrt",
            "distribution": "ortplug-tensorrt",
            "hardware": "NVIDIA GPU, TensorRT (opt-in: ORTPLUG_TENSORRT=1)",
            "detect": [{"pci_vendor": "0x10de", "pci_class": "0x03"}, {"nvidia_driver": True}],
            "install": [
                {
                    "cuda_min": 13,
                    "extra": "tensorrt",
                    "runtime": _CUDA13_RUNTIME,
                    "index_url": "https://pypi.nvidia.com",
                }
            ],
            "optional": True,
        },
        {
            "name": "cuda",
            "distribution": "ortplug-cuda",
            "hardware": "NVIDIA GPU",
            "detect": [{"pci_vendor": "0x10de", "pci_class": "0x03"}, {"nvidia_driver": True}],
            "install": [
                {"cuda_min": 13, "extra": "cuda", "runtime": _CUDA13_RUNTIME},
                {"cuda_min": 12, "extra": "cuda12", "runtime": _CUDA12_RUNTIME},
            ],
        },
        {
            "name": "coreml",
            "distribution": "ortplug-coreml",
            "hardware": "Apple Silicon (CoreML: GPU and Neural Engine)",
            "detect": [{"platform": ["darwin"], "machine": ["arm64"], "macos_min": "12"}],
            "install": [{"extra": "coreml", "runtime": "onnxruntime>=1.22"}],
        },
        {
            "name": "webgpu",
            "distribution": "ortplug-webgpu",
            "hardware": "a GPU through Vulkan (WebGPU)",
            "detect": [{"platform": ["linux"], "gpu": True, "vulkan_loader": True}],
            "install": [{"extra": "webgpu", "runtime": "onnxruntime>=1.24.4"}],
            "unless": ["cuda", "coreml"],
        },
        {
            "name": "openvino",
            "distribution": "ortplug-openvino",
            "hardware": "Intel CPU, GPU or NPU (OpenVINO; the example plugin)",
            "detect": [
                {"pci_vendor": "0x8086", "pci_class": "0x03"},
                {"pci_vendor": "0x8086", "pci_class": "0x12"},
                {"cpu_vendor": ["GenuineIntel"]},
            ],
            "install": [{}],
            "optional": True,
        },
        {
            "name": "cpu",
            "distribution": "ortplug-cpu",
            "hardware": "a CPU",
            "detect": [],
            "install": [{"extra": "cpu", "runtime": "onnxruntime>=1.22"}],
        },
    ]
}

#: The keys a ``detect`` condition may have, with what each expects.
CONDITION_KEYS = {
    "platform": "a list of sys.platform values, e.g. ['linux']",
    "machine": "a list of architectures, e.g. ['arm64']",
    "pci_vendor": "a PCI vendor id, e.g. '0x10de'",
    "pci_class": "a PCI base class, e.g. '0x03' (display)",
    "gpu": "true: a display-class PCI device or a DRM render node",
    "nvidia_driver": "true: /proc/driver/nvidia/version is readable",
    "macos_min": "a macOS version, e.g. '12'",
    "vulkan_loader": "true: libvulkan is installed",
    "cpu_vendor": "a list of CPU vendors, e.g. ['GenuineIntel']",
    "cpu_flags": "a list of CPU flags that must all be present, e.g. ['avx512f']",
}
_ENTRY_KEYS = ("name", "distribution", "hardware", "detect", "install", "unless", "optional")
_OPTION_KEYS = ("extra", "runtime", "packages", "index_url", "cuda_min")


def _keys(where: str, value: object, allowed: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise OptionError(f"{where}: expected an object, got {type(value).__name__}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        expected = ", ".join(allowed)
        raise OptionError(f"{where}: unknown key {unknown[0]!r}; expected one of {expected}")
    return value


def _typed(where: str, value: object, kind: type, expected: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise OptionError(f"{where}: expected {expected}, got {value!r}")
    return value


def _strings(where: str, value: object) -> tuple[str, ...]:
    items = _typed(where, value, list, "a list of strings")
    return tuple(_typed(f"{where}[{i}]", v, str, "a string") for i, v in enumerate(items))


def _hex_id(where: str, value: object) -> int:
    text = _typed(where, value, str, "a hex id like '0x10de'")
    try:
        return int(text, 16)
    except ValueError:
        raise OptionError(f"{where}: expected a hex id like '0x10de', got {value!r}") from None


def _condition(where: str, raw: object) -> Condition:
    data = _keys(where, raw, tuple(CONDITION_KEYS))
    fields: dict[str, Any] = {}
    for key, value in data.items():
        at = f"{where}.{key}"
        if key in ("platform", "machine", "cpu_vendor", "cpu_flags"):
            fields[key] = _strings(at, value)
        elif key in ("pci_vendor", "pci_class"):
            fields[key] = _hex_id(at, value)
        elif key == "macos_min":
            fields[key] = _typed(at, value, str, "a version like '12'")
        else:
            fields[key] = _typed(at, value, bool, "true or false")
    return Condition(**fields)


def _requirement(where: str, value: object) -> Requirement:
    text = _typed(where, value, str, "a requirement like 'onnxruntime>=1.22'")
    try:
        return Requirement.parse(text)
    except OptionError as exc:
        raise OptionError(f"{where}: {exc}") from None


def _option(where: str, raw: object) -> InstallOption:
    data = _keys(where, raw, _OPTION_KEYS)
    fields: dict[str, Any] = {}
    for key, value in data.items():
        at = f"{where}.{key}"
        if key == "runtime":
            fields[key] = _requirement(at, value)
        elif key == "packages":
            items = enumerate(_strings(at, value))
            fields[key] = tuple(_requirement(f"{at}[{i}]", v).text for i, v in items)
        elif key == "cuda_min":
            fields[key] = _typed(at, value, int, "a CUDA major like 12")
        else:
            fields[key] = _typed(at, value, str, "a string")
    return InstallOption(**fields)


def _entry(where: str, raw: object) -> CatalogEntry:
    data = _keys(where, raw, _ENTRY_KEYS)
    for key in ("name", "distribution", "hardware"):
        if key not in data:
            raise OptionError(f"{where}: missing key {key!r}")
        _typed(f"{where}.{key}", data[key], str, "a string")
    if not _NAME.match(data["name"]):
        raise OptionError(f"{where}.name: expected a plugin name like 'cuda', got {data['name']!r}")
    detect = _typed(f"{where}.detect", data.get("detect", []), list, "a list of conditions")
    install = _typed(f"{where}.install", data.get("install", []), list, "a list of options")
    return CatalogEntry(
        name=data["name"],
        distribution=data["distribution"],
        hardware=data["hardware"],
        detect=tuple(_condition(f"{where}.detect[{i}]", c) for i, c in enumerate(detect)),
        install=tuple(_option(f"{where}.install[{i}]", o) for i, o in enumerate(install)),
        unless=_strings(f"{where}.unless", data.get("unless", [])),
        optional=_typed(f"{where}.optional", data.get("optional", False), bool, "true or false"),
    )


def parse_catalog(data: object, source: str = "catalog") -> tuple[CatalogEntry, ...]:
    """Entries from a catalog document; a bad one raises :class:`OptionError` naming ``source``,
    the entry and the key."""
    providers = _keys(source, data, ("providers",)).get("providers")
    entries = _typed(f"{source}: providers", providers, list, "a list of entries")
    return tuple(_entry(f"{source}: providers[{i}]", raw) for i, raw in enumerate(entries))


def _read_file(path: str) -> object:
    where = f"{CATALOG_ENV}={path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or exc
        raise OptionError(f"{where}: cannot read the catalog file ({reason})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise OptionError(f"{where}: expected a JSON catalog, got invalid JSON ({exc})") from None


def load_catalog(environ: Mapping[str, str] | None = None) -> tuple[CatalogEntry, ...]:
    """The built-in entries, each replaced in place by the ``$ORTPLUG_CATALOG`` entry of its
    name; the file's other entries come first (a file's own providers are the more specific)."""
    env = os.environ if environ is None else environ
    entries = parse_catalog(BUILTIN_CATALOG, "built-in catalog")
    path = env.get(CATALOG_ENV)
    if not path:
        return entries
    own = parse_catalog(_read_file(path), f"{CATALOG_ENV}={path}")
    by_name = {e.name: e for e in own}
    known = {e.name for e in entries}
    return tuple(e for e in own if e.name not in known) + tuple(
        by_name.get(e.name, e) for e in entries
    )
