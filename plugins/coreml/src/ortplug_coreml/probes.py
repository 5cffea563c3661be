"""The ``coreml`` host probe: macOS version and Apple Silicon (which has a Neural Engine)."""

from __future__ import annotations

import platform
import sys

__all__ = ["COREML_FACTS", "COREML_TYPES", "detect_coreml"]

COREML_FACTS = ("macos_version", "apple_silicon", "neural_engine")
#: What an ``ORTPLUG_OVERRIDE_COREML_*`` value must be (a version may be given as ``14`` or ``"14.5"``).
COREML_TYPES: dict[str, type | tuple[type, ...]] = {
    "macos_version": (str, int, float),
    "apple_silicon": bool,
    "neural_engine": bool,
}


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
