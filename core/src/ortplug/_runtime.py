"""The one place that imports ONNX Runtime, lazily, with an install hint when it is missing."""

from __future__ import annotations

from types import ModuleType

from .errors import RuntimeNotInstalledError

__all__ = ["INSTALL_HINT", "onnxruntime_or_none", "require_onnxruntime"]

INSTALL_HINT = (
    "install exactly one ONNX Runtime for this host, e.g. pip install 'ortplug[cpu]' "
    "(CPU hosts); see the README's install matrix for GPU and Apple hosts"
)


def require_onnxruntime() -> ModuleType:
    """Return the ``onnxruntime`` module or raise an error that says how to install it."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"ONNX Runtime is not installed: {INSTALL_HINT}") from exc
    module: ModuleType = onnxruntime
    return module


def onnxruntime_or_none() -> ModuleType | None:
    """Return the ``onnxruntime`` module when it imports, else ``None`` (for reports)."""
    try:
        return require_onnxruntime()
    except RuntimeNotInstalledError:
        return None
