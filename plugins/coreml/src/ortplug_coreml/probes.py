"""The ``coreml`` host probe: macOS version and Apple Silicon (which has a Neural Engine)."""

from __future__ import annotations

import platform
import sys

__all__ = ["detect_coreml"]


def detect_coreml() -> dict[str, object]:
    """Read the macOS version and CPU architecture; all ``None``/``False`` off macOS."""
    if sys.platform != "darwin":
        return {"macos_version": None, "apple_silicon": False, "neural_engine": False}
    arm = platform.machine() == "arm64"
    return {
        "macos_version": platform.mac_ver()[0] or None,
        # Every Apple Silicon Mac (M1 and later) has a Neural Engine; Intel Macs have none.
        "apple_silicon": arm,
        "neural_engine": arm,
    }
