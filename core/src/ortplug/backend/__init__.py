"""The inference backends: the protocol and its ONNX Runtime implementation.

``OnnxBackend.from_checkpoint`` hands the checkpoint to the build pipeline
(:mod:`ortplug.pipeline`), which plans and builds sessions through the session layer
(:mod:`ortplug.session`) and proves candidates (:mod:`ortplug.verification`); the backend
serves what the pipeline chose. ``Binding`` and the introspection values load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..session.validation import InputSpec
from .onnx_backend import OnnxBackend
from .protocol import InferenceBackend

if TYPE_CHECKING:
    from ..session.binding import Binding
    from ..session.introspection import MemoryInfo, ModelInfo, ValueInfo
    from ._serving_plan import (
        DeviceServing,
        Layout,
        ServingConfig,
        ServingReport,
        Trial,
    )
    from ._serving_record import recorded_serving
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

_LAZY = {
    "StartupFallback": ".options",
    "Verification": ".options",
    "HINTS": ".hints",
    "HINT_ENTRY": ".hints",
    "DeviceServing": "._serving_plan",
    "Layout": "._serving_plan",
    "ServingConfig": "._serving_plan",
    "ServingReport": "._serving_plan",
    "Trial": "._serving_plan",
    "recorded_serving": "._serving_record",
    "Binding": "..session.binding",
    "MemoryInfo": "..session.introspection",
    "ModelInfo": "..session.introspection",
    "ValueInfo": "..session.introspection",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
