"""``HostCapabilities``: frozen facts about the host, composed from every plugin's probes."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from ._runtime import onnxruntime_or_none

if TYPE_CHECKING:
    from .plugins.manager import PluginHost
    from .plugins.types import HostProbe

__all__ = ["OVERRIDE_PREFIX", "HostCapabilities", "compose_host", "override_variable"]

#: Prefix of the environment variables that force host facts (``ORTPLUG_OVERRIDE_CPU_USABLE_CPUS=2``).
OVERRIDE_PREFIX = "ORTPLUG_OVERRIDE_"


def override_variable(probe: str, fact: str) -> str:
    """The environment variable that forces one probe fact."""
    return f"{OVERRIDE_PREFIX}{probe.upper()}_{fact.upper()}"


def _freeze_facts(value: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in value.items()})


def _normalize_platform(value: str) -> str:
    return {"darwin": "darwin", "linux": "linux", "windows": "win32", "win32": "win32"}.get(
        value.lower(), value.lower()
    )


@attrs.frozen(kw_only=True)
class HostCapabilities:
    """What this host offers: platform, ONNX Runtime build and every plugin's probe facts.

    Build one by hand in tests; :meth:`detect` is the only impure way to get one.
    """

    platform: str = attrs.field(converter=_normalize_platform)
    machine: str
    ort_version: str | None = None
    available_providers: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    facts: Mapping[str, Mapping[str, Any]] = attrs.field(
        factory=dict, converter=_freeze_facts, eq=False, hash=False
    )

    def fact(self, probe: str, name: str, default: Any = None) -> Any:
        """One probe fact, or ``default`` when the probe or fact is absent or ``None``."""
        value = self.facts.get(probe, {}).get(name)
        return default if value is None else value

    def has_provider(self, ort_name: str) -> bool:
        """Whether the installed ONNX Runtime build lists this execution provider."""
        return ort_name in self.available_providers

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``ortplug info --json``."""
        return {
            "platform": self.platform,
            "machine": self.machine,
            "ort_version": self.ort_version,
            "available_providers": list(self.available_providers),
            "facts": {k: dict(v) for k, v in self.facts.items()},
        }

    @classmethod
    def detect(cls, plugins: PluginHost | None = None) -> HostCapabilities:
        """Probe this host once per plugin host (cached), with ``ORTPLUG_OVERRIDE_*`` applied."""
        if plugins is None:
            from .plugins.manager import get_plugin_host

            plugins = get_plugin_host()
        return plugins.host_capabilities()


def _parse_override(raw: str) -> Any:
    """An override is JSON (``2``, ``true``, ``["avx2"]``); anything else is a plain string."""
    if raw == "":
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _base_facts() -> dict[str, Any]:
    ort = onnxruntime_or_none()
    return {
        "platform": sys.platform,
        "machine": platform.machine(),
        "ort_version": getattr(ort, "__version__", None),
        "available_providers": tuple(ort.get_available_providers()) if ort else (),
    }


def _apply_base_overrides(base: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    for name in list(base):
        variable = OVERRIDE_PREFIX + name.upper()
        if variable in environ:
            raw = environ[variable]
            if name == "available_providers":
                base[name] = tuple(p.strip() for p in raw.split(",") if p.strip())
            else:
                base[name] = raw or None
    return base


def _probe_facts(
    probe: HostProbe, environ: Mapping[str, str], detected: Mapping[str, object] | None
) -> dict[str, Any]:
    """Keep a probe's declared facts (missing ones ``None``) and apply its overrides."""
    values = {name: (detected or {}).get(name) for name in probe.facts}
    for name in probe.facts:
        variable = override_variable(probe.name, name)
        if variable in environ:
            values[name] = _parse_override(environ[variable])
    return values


def compose_host(
    probe_results: Iterable[tuple[HostProbe, Mapping[str, object] | None]],
    environ: Mapping[str, str] | None = None,
) -> HostCapabilities:
    """Assemble ``HostCapabilities`` from base facts and probe results, overrides applied."""
    env = os.environ if environ is None else environ
    base = _apply_base_overrides(_base_facts(), env)
    facts = {probe.name: _probe_facts(probe, env, detected) for probe, detected in probe_results}
    return HostCapabilities(facts=facts, **base)
