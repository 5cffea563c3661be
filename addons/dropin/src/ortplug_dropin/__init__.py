"""Existing ONNX Runtime code on ortplug: the drop-in ``InferenceSession``, ``patch()``, and
``ortplug exec`` with its start-up hook (``pip install 'ortplug[dropin]'``).

An app's session serves the model file it gave: a precision variant its manifest lists serves
in its place only when the user opted in (:data:`VARIANTS_ENTRY`, :data:`VARIANTS_VARIABLE`,
``ortplug exec --allow-variants``), said on stderr.

Importing this package imports no ONNX Runtime: :class:`InferenceSession` (which subclasses
ONNX Runtime's class) is loaded on first use.
"""

from __future__ import annotations

import importlib

from ._variants import VARIANTS_ENTRY, VARIANTS_VARIABLE
from .patching import TAKEOVER_RULES, Patch, patch, unpatch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._session import InferenceSession, SessionRecord

__all__ = [
    "TAKEOVER_RULES",
    "VARIANTS_ENTRY",
    "VARIANTS_VARIABLE",
    "InferenceSession",
    "Patch",
    "SessionRecord",
    "patch",
    "unpatch",
]


def __getattr__(name: str) -> Any:
    if name in ("InferenceSession", "SessionRecord"):
        value = getattr(importlib.import_module("._session", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
