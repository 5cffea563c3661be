"""The inference backends: the protocol and its ONNX Runtime implementation.

``Binding`` and the introspection values load on first use (they are not
needed to build and run a backend).

``OnnxBackend.from_checkpoint`` runs one pipeline (``build_pipeline``: the order and the
decisions) whose stages have workers: candidates and prepare (``plan``), build
(``_session``), verify (``verifier``), measure (``_measure``); ``_startup`` runs the
proving stages in the background behind a CPU session (the switch's state in ``_switch_state``,
shared with the checks on real traffic, ``_real_traffic``). A throughput hint
adds a serving stage (``_serving_start``): devices, batching and streams, measured
(``_serving_measure``) and recorded (``_serving_record``), served by ``_serving``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .onnx_backend import OnnxBackend
from .protocol import InferenceBackend
from .validation import InputSpec

if TYPE_CHECKING:
    from ._hints import HINT_ENTRY, HINTS
    from ._serving_plan import (
        DeviceServing,
        Layout,
        ServingConfig,
        ServingReport,
        Trial,
    )
    from ._serving_record import recorded_serving
    from .binding import Binding
    from .introspection import MemoryInfo, ModelInfo, ValueInfo

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
    "Trial",
    "ValueInfo",
    "recorded_serving",
]

_LAZY = {
    "HINTS": "._hints",
    "HINT_ENTRY": "._hints",
    "DeviceServing": "._serving_plan",
    "Layout": "._serving_plan",
    "ServingConfig": "._serving_plan",
    "ServingReport": "._serving_plan",
    "Trial": "._serving_plan",
    "recorded_serving": "._serving_record",
    "Binding": ".binding",
    "MemoryInfo": ".introspection",
    "ModelInfo": ".introspection",
    "ValueInfo": ".introspection",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
