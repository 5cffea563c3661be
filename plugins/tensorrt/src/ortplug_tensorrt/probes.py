"""The ``tensorrt`` host probe: whether libnvinfer loads, and its version.

The library is loaded in a child interpreter (``_trtquery.py``) with a
timeout. GPU facts (devices, compute capability) come from the ``cuda`` probe
of ortplug-cuda, which ``ortplug[tensorrt]`` installs too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ortplug.plugins import run_probe_script, site_package_dirs

__all__ = [
    "NVINFER_MAJOR",
    "detect_tensorrt",
    "tensorrt_library_dirs",
]

#: The libnvinfer ABI major the ONNX Runtime GPU wheels (1.19 and later) link against.
NVINFER_MAJOR = 10

_QUERY_SCRIPT = Path(__file__).with_name("_trtquery.py")


def tensorrt_library_dirs(search_path: Iterable[str] | None = None) -> list[str]:
    """Absolute folders of installed ``tensorrt-cu*-libs`` wheels (``tensorrt_libs``), in search order.

    By default only site-packages folders are searched; relative entries of
    ``search_path`` are skipped (they would resolve against the current directory).
    """
    entries = site_package_dirs() if search_path is None else search_path
    folders = (Path(entry, "tensorrt_libs") for entry in entries if os.path.isabs(entry))
    return list(dict.fromkeys(str(folder) for folder in folders if folder.is_dir()))


def detect_tensorrt() -> dict[str, Any]:
    """Load libnvinfer in a child process and report its version or why it does not load."""
    answer = run_probe_script(
        _QUERY_SCRIPT,
        {"major": NVINFER_MAJOR, "library_dirs": tensorrt_library_dirs()},
        timeout=15.0,
    )
    if "error" in answer:
        answer = {"library_error": answer.pop("error")}
    return answer
