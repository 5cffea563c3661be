"""The inference backends: the protocol and its ONNX Runtime implementation."""

from ._validation import InputSpec
from .binding import Binding
from .introspection import MemoryInfo, ModelInfo, ValueInfo
from .onnx_backend import OnnxBackend
from .protocol import InferenceBackend

__all__ = [
    "Binding",
    "InferenceBackend",
    "InputSpec",
    "MemoryInfo",
    "ModelInfo",
    "OnnxBackend",
    "ValueInfo",
]
