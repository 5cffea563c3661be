"""``ortplug.integrations.ray``: the old spelling of the Ray add-on (``ortplug-ray``), kept one
release.

Each name resolves to ``ortplug_ray``'s with a ``DeprecationWarning`` naming the new spelling
(``from ortplug_ray import predict``); without the add-on, one line saying what to install.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..addons import RAY_NAMES, addon_name

__all__ = list(RAY_NAMES)


def __getattr__(name: str) -> Any:
    if name not in RAY_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = addon_name(__name__, name)
    warnings.warn(
        f"{__name__}.{name} moved to the Ray add-on: write `from ortplug_ray import {name}` "
        f"(the old spelling goes in the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
