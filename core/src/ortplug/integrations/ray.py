"""``ortplug.integrations.ray``: the old spelling of the Ray add-on (``ortplug-ray``), kept one
release.

Each name resolves to ``ortplug_ray``'s with a ``DeprecationWarning`` naming the new spelling
(``from ortplug_ray import predict``); without the add-on, one line saying what to install.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..addons import addon_name

#: The names the Ray add-on has (``ortplug_ray.__all__``), spelled here for one more release.
_MOVED = (
    "BackendConfig",
    "BatchError",
    "CheckpointLike",
    "OnnxPredictor",
    "PortableCheckpoint",
    "RayNotInstalledError",
    "actor_resources",
    "default_batch_size",
    "predict",
    "require_ray",
    "worker_error",
)
__all__ = list(_MOVED)


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = addon_name(__name__, name)
    warnings.warn(
        f"{__name__}.{name} moved to the Ray add-on: write `from ortplug_ray import {name}` "
        f"(the old spelling goes in the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
