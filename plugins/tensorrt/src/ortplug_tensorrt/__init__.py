"""ortplug-tensorrt: ONNX Runtime's TensorRT execution provider as an ortplug plugin."""

from .config import TensorrtProvider
from .engine_cache import engine_cache_key
from .shapes import format_profile, parse_profile, profiles_from_ranges

__all__ = [
    "TensorrtProvider",
    "engine_cache_key",
    "format_profile",
    "parse_profile",
    "profiles_from_ranges",
]
