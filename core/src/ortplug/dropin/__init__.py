"""Existing ONNX Runtime code on ortplug: the drop-in ``InferenceSession``, ``patch()``, and the
start-up hook of ``ortplug exec``.

Importing this package imports no ONNX Runtime: :class:`InferenceSession` (which subclasses
ONNX Runtime's class) is loaded on first use.
"""

from __future__ import annotations

import importlib

from .patching import TAKEOVER_RULES, Patch, patch, unpatch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._session import InferenceSession, SessionRecord

__all__ = ["TAKEOVER_RULES", "InferenceSession", "Patch", "SessionRecord", "patch", "unpatch"]


def __getattr__(name: str) -> Any:
    if name in ("InferenceSession", "SessionRecord"):
        value = getattr(importlib.import_module("._session", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
