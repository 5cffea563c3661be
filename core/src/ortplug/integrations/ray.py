"""``ortplug.integrations.ray``: the old spelling of the Ray add-on (``ortplug-ray``), kept one
release.

Each name resolves to ``ortplug_ray``'s with a ``DeprecationWarning`` naming the new spelling
(``from ortplug_ray import predict``); without the add-on, one line saying what to install.
"""

from __future__ import annotations

from typing import Any

from ..addons import RAY_NAMES, old_spelling

__all__ = list(RAY_NAMES)


def __getattr__(name: str) -> Any:
    return old_spelling(__name__, name, RAY_NAMES)
