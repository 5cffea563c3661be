"""The inference backends: the protocol and its ONNX Runtime implementation, serving what the build
pipeline chose; the serving values are the serving add-on's (:func:`ortplug.addons.addon_name`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..session.validation import InputSpec
from .onnx_backend import OnnxBackend
from .protocol import InferenceBackend

if TYPE_CHECKING:
    from ..session.binding import Binding
    from ..session.introspection import MemoryInfo, ModelInfo, ValueInfo
    from .hints import HINT_ENTRY, HINTS
    from .options import StartupFallback, Verification

__all__ = [
    "HINTS",
    "HINT_ENTRY",
    "Binding",
    "DeviceServing",
    "InferenceBackend",
    "InputSpec",
    "Layout",
    "MemoryInfo",
    "ModelInfo",
    "OnnxBackend",
    "ServingConfig",
    "ServingReport",
    "StartupFallback",
    "Trial",
    "ValueInfo",
    "Verification",
    "recorded_serving",
]

#: Names an add-on distribution has (resolved by :func:`ortplug.addons.addon_name`).
_ADDON = "add-on"
_LAZY = {
    "StartupFallback": ".options",
    "Verification": ".options",
    "HINTS": ".hints",
    "HINT_ENTRY": ".hints",
    "DeviceServing": _ADDON,
    "Layout": _ADDON,
    "ServingConfig": _ADDON,
    "ServingReport": _ADDON,
    "Trial": _ADDON,
    "recorded_serving": _ADDON,
    "Binding": "..session.binding",
    "MemoryInfo": "..session.introspection",
    "ModelInfo": "..session.introspection",
    "ValueInfo": "..session.introspection",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == _ADDON:
        from ..addons import addon_name

        return addon_name(__name__, name)
    return getattr(importlib.import_module(module, __name__), name)
