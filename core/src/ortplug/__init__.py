"""ortplug: run ONNX models on the best execution provider a host has, chosen by plugins.

Importing ortplug costs next to nothing: each public name is loaded on first
use (PEP 562), numpy with the backend, ONNX Runtime when the first session is
built, the plugins when a policy or a registry first needs them.
"""

from __future__ import annotations

import importlib

#: ``typing.TYPE_CHECKING`` without importing :mod:`typing` (~9 ms at every ``import ortplug``).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .backend import (
        Binding,
        InferenceBackend,
        MemoryInfo,
        ModelInfo,
        OnnxBackend,
        StartupFallback,
        ValueInfo,
        Verification,
    )
    from .checkpoint import (
        CheckpointMetadata,
        InMemoryCheckpoint,
        LocalCheckpoint,
        ResolvedCheckpoint,
        Tolerance,
    )
    from .errors import (
        AddonNotInstalledError,
        BackendClosedError,
        BuildTimeoutError,
        CheckpointError,
        InputValidationError,
        ModelLoadError,
        NoProviderError,
        OptionError,
        OrtplugError,
        OrtplugPluginWarning,
        PluginConflictError,
        PluginError,
        ProviderFallbackWarning,
        ProviderNotRealizedError,
        RunFailedError,
        RunTerminatedError,
        RuntimeNotInstalledError,
        VerificationError,
        VerificationWarning,
    )
    from .host.capabilities import HostCapabilities, HostProbe
    from .host.environment import configure
    from .host.runtime import RuntimeDistribution, installed_runtimes, preload_runtime_libraries
    from .plugin_host.manager import PluginHost, get_plugin_host, parse_provider
    from .plugins import (
        DoctorCheck,
        MetadataKey,
        ProviderDecline,
        ProviderOffer,
        ProviderType,
        hookimpl,
    )
    from .providers.configs import ProviderConfig
    from .providers.run_options import RunOptionsConfig
    from .providers.session_options import FreeDimensionOverride, SessionOptionsConfig
    from .selection import (
        DefaultProviderPolicy,
        ProviderPolicy,
        ProviderSelection,
        SelectingPolicy,
        SelectionRequest,
    )

__all__ = [
    "AddonNotInstalledError",
    "BackendClosedError",
    "Binding",
    "BuildTimeoutError",
    "CheckpointError",
    "CheckpointMetadata",
    "DefaultProviderPolicy",
    "DoctorCheck",
    "FreeDimensionOverride",
    "HostCapabilities",
    "HostProbe",
    "InMemoryCheckpoint",
    "InferenceBackend",
    "InferenceSession",
    "InputValidationError",
    "LocalCheckpoint",
    "MemoryInfo",
    "MetadataKey",
    "ModelInfo",
    "ModelLoadError",
    "NoProviderError",
    "OnnxBackend",
    "OptionError",
    "OrtplugError",
    "OrtplugPluginWarning",
    "Patch",
    "PluginConflictError",
    "PluginError",
    "PluginHost",
    "ProviderConfig",
    "ProviderDecline",
    "ProviderFallbackWarning",
    "ProviderNotRealizedError",
    "ProviderOffer",
    "ProviderPolicy",
    "ProviderSelection",
    "ProviderType",
    "ResolvedCheckpoint",
    "RunFailedError",
    "RunOptionsConfig",
    "RunTerminatedError",
    "RuntimeDistribution",
    "RuntimeNotInstalledError",
    "SelectingPolicy",
    "SelectionRequest",
    "ServingConfig",
    "SessionOptionsConfig",
    "StartupFallback",
    "Tolerance",
    "ValueInfo",
    "Verification",
    "VerificationError",
    "VerificationWarning",
    "configure",
    "get_plugin_host",
    "hookimpl",
    "installed_runtimes",
    "parse_provider",
    "patch",
    "preload_runtime_libraries",
    "unpatch",
]


#: Names an add-on distribution has (resolved by :func:`ortplug.addons.addon_name`).
_ADDON = "add-on"
#: Where each public name lives; imported on first access.
_LAZY = {
    "BackendClosedError": ".errors",
    "Binding": ".backend",
    "BuildTimeoutError": ".errors",
    "CheckpointError": ".errors",
    "CheckpointMetadata": ".checkpoint",
    "configure": ".host.environment",
    "DefaultProviderPolicy": ".selection",
    "DoctorCheck": ".plugins",
    "FreeDimensionOverride": ".providers.session_options",
    "get_plugin_host": ".plugin_host.manager",
    "hookimpl": ".plugins",
    "HostCapabilities": ".host.capabilities",
    "HostProbe": ".host.capabilities",
    "InferenceBackend": ".backend",
    "InMemoryCheckpoint": ".checkpoint",
    "InputValidationError": ".errors",
    "installed_runtimes": ".host.runtime",
    "LocalCheckpoint": ".checkpoint",
    "MemoryInfo": ".backend",
    "MetadataKey": ".plugins",
    "ModelInfo": ".backend",
    "ModelLoadError": ".errors",
    "NoProviderError": ".errors",
    "OnnxBackend": ".backend",
    "OptionError": ".errors",
    "OrtplugError": ".errors",
    "OrtplugPluginWarning": ".errors",
    "parse_provider": ".plugin_host.manager",
    "PluginConflictError": ".errors",
    "PluginError": ".errors",
    "PluginHost": ".plugin_host.manager",
    "preload_runtime_libraries": ".host.runtime",
    "ProviderConfig": ".providers.configs",
    "ProviderDecline": ".plugins",
    "ProviderFallbackWarning": ".errors",
    "ProviderNotRealizedError": ".errors",
    "ProviderOffer": ".plugins",
    "ProviderPolicy": ".selection",
    "ProviderSelection": ".selection",
    "ProviderType": ".plugins",
    "ResolvedCheckpoint": ".checkpoint",
    "RunOptionsConfig": ".providers.run_options",
    "RunFailedError": ".errors",
    "AddonNotInstalledError": ".errors",
    "RunTerminatedError": ".errors",
    "RuntimeDistribution": ".host.runtime",
    "RuntimeNotInstalledError": ".errors",
    "SelectingPolicy": ".selection",
    "SelectionRequest": ".selection",
    "ServingConfig": _ADDON,
    "SessionOptionsConfig": ".providers.session_options",
    "Tolerance": ".checkpoint",
    "ValueInfo": ".backend",
    "Verification": ".backend",
    "StartupFallback": ".backend",
    "VerificationError": ".errors",
    "VerificationWarning": ".errors",
    "InferenceSession": _ADDON,
    "Patch": _ADDON,
    "patch": _ADDON,
    "unpatch": _ADDON,
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("ortplug")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ortplug' has no attribute {name!r}")
    if module == _ADDON:
        from .addons import addon_name

        value = addon_name(__name__, name)
    else:
        value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
