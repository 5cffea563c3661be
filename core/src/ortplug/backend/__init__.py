"""The inference backends: the protocol and its ONNX Runtime implementation."""

from .onnx_backend import OnnxBackend
from ._validation import InputSpec
from .protocol import InferenceBackend

__all__ = ["InferenceBackend", "InputSpec", "OnnxBackend"]
