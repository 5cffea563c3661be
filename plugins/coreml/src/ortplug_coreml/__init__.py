"""ortplug-coreml: ONNX Runtime's CoreML execution provider as an ortplug plugin."""

from .config import COMPUTE_UNITS, COREML_FLAGS, CoreMLProvider
from .plugin import model_cache_key

__all__ = ["COMPUTE_UNITS", "COREML_FLAGS", "CoreMLProvider", "model_cache_key"]
