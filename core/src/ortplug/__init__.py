"""ortplug: run ONNX models on the best execution provider a host has, chosen by plugins.

Importing ortplug imports neither onnxruntime nor onnx; the runtime is loaded
when the first session is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._runtime import RuntimeDistribution, installed_runtimes, preload_runtime_libraries
from .backend import InferenceBackend, OnnxBackend
from .checkpoint import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    LocalCheckpoint,
    ResolvedCheckpoint,
)
from .errors import (
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
    RunTerminatedError,
    RuntimeNotInstalledError,
)
from .host import HostCapabilities, HostProbe
from .plugins import (
    DoctorCheck,
    MetadataKey,
    PluginHost,
    ProviderDecline,
    ProviderOffer,
    ProviderType,
    get_plugin_host,
    hookimpl,
    parse_provider,
)
from .providers import ProviderConfig
from .run_options import RunOptionsConfig
from .selection import (
    DefaultProviderPolicy,
    ProviderPolicy,
    ProviderSelection,
    SelectingPolicy,
    SelectionRequest,
)
from .session_options import FreeDimensionOverride, SessionOptionsConfig

if TYPE_CHECKING:
    from .backend import Binding, MemoryInfo, ModelInfo, ValueInfo
    from .environment import configure

__all__ = [
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
    "InputValidationError",
    "LocalCheckpoint",
    "MetadataKey",
    "MemoryInfo",
    "ModelInfo",
    "ModelLoadError",
    "NoProviderError",
    "OnnxBackend",
    "OptionError",
    "OrtplugError",
    "OrtplugPluginWarning",
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
    "RunOptionsConfig",
    "RunTerminatedError",
    "RuntimeDistribution",
    "RuntimeNotInstalledError",
    "SelectingPolicy",
    "SelectionRequest",
    "SessionOptionsConfig",
    "ValueInfo",
    "configure",
    "get_plugin_host",
    "hookimpl",
    "installed_runtimes",
    "parse_provider",
    "preload_runtime_libraries",
]


# Loaded on first use: not needed to build and run a backend.
_LAZY = {
    "Binding": ".backend",
    "MemoryInfo": ".backend",
    "ModelInfo": ".backend",
    "ValueInfo": ".backend",
    "configure": ".environment",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("ortplug")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ortplug' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
