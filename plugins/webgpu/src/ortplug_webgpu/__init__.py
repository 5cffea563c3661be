"""ortplug-webgpu: ONNX Runtime's WebGPU execution provider (``onnxruntime-ep-webgpu``) as an ortplug plugin."""

from .config import (
    BUFFER_CACHE_MODES,
    DAWN_BACKENDS,
    LAYOUTS,
    POWER_PREFERENCES,
    VALIDATION_MODES,
    WebGpuProvider,
)
from .probes import ALLOW_SOFTWARE_ENV, describe_adapter, detect_webgpu, software_allowed
from .readiness import WebGpuReadiness, assess_webgpu
from .shader_cache import shader_cache_path, use_shader_cache

__all__ = [
    "ALLOW_SOFTWARE_ENV",
    "BUFFER_CACHE_MODES",
    "DAWN_BACKENDS",
    "LAYOUTS",
    "POWER_PREFERENCES",
    "VALIDATION_MODES",
    "WebGpuProvider",
    "WebGpuReadiness",
    "assess_webgpu",
    "describe_adapter",
    "detect_webgpu",
    "shader_cache_path",
    "software_allowed",
    "use_shader_cache",
]
