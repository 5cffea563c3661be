"""The ``cuda`` host probe: NVIDIA driver, devices, and whether the CUDA/cuDNN libraries load.

The driver and libraries are queried in a child interpreter (``_nvquery.py``)
with a timeout, so a broken driver cannot hang or crash the host process.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ortplug.plugins import run_probe_script, site_package_dirs

__all__ = [
    "cuda_major",
    "detect_cuda",
    "nvidia_library_dirs",
    "ort_cuda_version",
]

_QUERY_SCRIPT = Path(__file__).with_name("_nvquery.py")
_QUERY_TIMEOUT_S = 15.0

# Library folders of the nvidia-* wheels (CUDA 12 per-component layout, CUDA 13 combined one).
_WHEEL_LIBRARY_DIRS = (
    "nvidia/cu13/lib",
    "nvidia/cuda_runtime/lib",
    "nvidia/cudnn/lib",
    "nvidia/cublas/lib",
)


def nvidia_library_dirs(search_path: Iterable[str] | None = None) -> list[str]:
    """Absolute folders of installed nvidia-* wheels that hold CUDA/cuDNN libraries, in search order.

    By default only site-packages folders are searched; relative entries of
    ``search_path`` are skipped (they would resolve against the current directory).
    """
    found = []
    for entry in site_package_dirs() if search_path is None else search_path:
        if not os.path.isabs(entry):
            continue
        for relative in _WHEEL_LIBRARY_DIRS:
            folder = Path(entry, relative)
            if folder.is_dir():
                found.append(str(folder))
    return list(dict.fromkeys(found))


def ort_cuda_version() -> str | None:
    """The CUDA version the installed ONNX Runtime was built for (``None``: a CPU-only build)."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return getattr(onnxruntime, "cuda_version", "") or None


def cuda_major(version: object) -> int | None:
    """The major of a version like ``"12.4"`` (``None`` when absent or not a version)."""
    try:
        return int(str(version).split(".")[0]) if version else None
    except ValueError:
        return None


def detect_cuda() -> dict[str, Any]:
    """Query the driver and (for a CUDA build of ONNX Runtime) the libraries it will load."""
    ort_cuda = ort_cuda_version()
    answer = run_probe_script(
        _QUERY_SCRIPT,
        {"cuda_major": cuda_major(ort_cuda), "library_dirs": nvidia_library_dirs()},
        timeout=_QUERY_TIMEOUT_S,
    )
    if "error" in answer:  # the child itself failed: say so as a driver problem
        answer = {"driver_error": answer.pop("error")}
    answer.setdefault("device_count", 0)
    answer["visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    answer["ort_cuda_version"] = ort_cuda
    return answer
