"""The inference backends: the protocol and its ONNX Runtime implementation.

``Binding`` and the introspection values load on first use (they are not
needed to build and run a backend).

``OnnxBackend.from_checkpoint`` is one pipeline, a module per stage: candidates
(``_plan``: the policy's choices, planned), verify (``_verified``), measure
(``_measure``), serve (``_proven`` runs the stages and picks; ``_session`` builds,
``_startup`` runs the pipeline in the background behind a CPU session).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._validation import InputSpec
from .onnx_backend import OnnxBackend
from .protocol import InferenceBackend

if TYPE_CHECKING:
    from .binding import Binding
    from .introspection import MemoryInfo, ModelInfo, ValueInfo

__all__ = [
    "Binding",
    "InferenceBackend",
    "InputSpec",
    "MemoryInfo",
    "ModelInfo",
    "OnnxBackend",
    "ValueInfo",
]

_LAZY = {
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
