"""The inference backends: the protocol and its ONNX Runtime implementation."""

from ._validation import InputSpec
from .onnx_backend import OnnxBackend
from .protocol import InferenceBackend

__all__ = ["InferenceBackend", "InputSpec", "OnnxBackend"]
