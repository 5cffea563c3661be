"""``ortplug.integrations.ray``: the old spelling of the Ray add-on (``ortplug-ray``), kept one
release with a ``DeprecationWarning``."""

from __future__ import annotations

from typing import Any

from ..addons import RAY_NAMES, old_spelling

__all__ = list(RAY_NAMES)


def __getattr__(name: str) -> Any:
    return old_spelling(__name__, name, RAY_NAMES)
