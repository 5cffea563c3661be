"""ortplug: run ONNX models on the best execution provider a host has, chosen by plugins.

Importing ortplug imports neither onnxruntime nor onnx; the runtime is loaded
when the first session is built.
"""

from __future__ import annotations

from typing import Any

from .backend import InferenceBackend, OnnxBackend
from .checkpoint import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    LocalCheckpoint,
    ResolvedCheckpoint,
)
from .errors import (
    InputValidationError,
    OrtplugPluginWarning,
    PluginConflictError,
    ProviderFallbackWarning,
    ProviderNotRealizedError,
    RuntimeNotInstalledError,
)
from .host import HostCapabilities
from .plugins import (
    HostProbe,
    PluginHost,
    ProviderOffer,
    ProviderType,
    get_plugin_host,
    hookimpl,
)
from .policy import DefaultProviderPolicy, ProviderPolicy, ProviderSelection
from .providers import ProviderConfig, parse_provider
from .session_options import SessionOptionsConfig

__all__ = [
    "CheckpointMetadata",
    "DefaultProviderPolicy",
    "HostCapabilities",
    "HostProbe",
    "InMemoryCheckpoint",
    "InferenceBackend",
    "InputValidationError",
    "LocalCheckpoint",
    "OnnxBackend",
    "OrtplugPluginWarning",
    "PluginConflictError",
    "PluginHost",
    "ProviderConfig",
    "ProviderFallbackWarning",
    "ProviderNotRealizedError",
    "ProviderOffer",
    "ProviderPolicy",
    "ProviderSelection",
    "ProviderType",
    "ResolvedCheckpoint",
    "RuntimeNotInstalledError",
    "SessionOptionsConfig",
    "get_plugin_host",
    "hookimpl",
    "parse_provider",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("ortplug")
    raise AttributeError(f"module 'ortplug' has no attribute {name!r}")
