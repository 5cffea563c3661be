"""ortplug-cuda: ONNX Runtime's CUDA execution provider as an ortplug plugin."""

from .config import CONV_ALGO_SEARCH, CudaProvider
from .probes import nvidia_library_dirs
from .readiness import CudaReadiness, assess_cuda

__all__ = [
    "CONV_ALGO_SEARCH",
    "CudaProvider",
    "CudaReadiness",
    "assess_cuda",
    "nvidia_library_dirs",
]
