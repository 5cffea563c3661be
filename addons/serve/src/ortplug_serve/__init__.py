"""ortplug-serve: many callers served by one ortplug backend (the throughput hints).

``OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")`` (or
``"cumulative_throughput"``) finds this add-on through the entry-point group ``ortplug.hints``
and hands it the proven build (:class:`ortplug.backend.dispatch.ServingStart`); it serves every
call from then on through a request queue, execution streams and batching
(:func:`~.start.serve`). ``ortplug bench M --callers 1,4,16`` runs its ``bench-callers``
command. ``served(backend)`` says what a throughput build served so far (:mod:`.stats`). The
core's spellings (``ortplug.ServingConfig``, ``ortplug.backend.ServingReport``,
...) resolve to the names here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import DeviceServing, Layout, ServingConfig, ServingReport, Trial
    from .independence import ServingWarning
    from .record import recorded_serving
    from .server import served
    from .start import serve
    from .stats import DeviceStats, ServedStats, StreamStats

__all__ = [
    "DeviceServing",
    "DeviceStats",
    "Layout",
    "ServedStats",
    "ServingConfig",
    "ServingReport",
    "ServingWarning",
    "StreamStats",
    "Trial",
    "recorded_serving",
    "serve",
    "served",
]

#: Where each public name lives, imported on first use: ``ortplug --help`` imports the
#: package for its command (:mod:`.command`), which needs none of them.
_LAZY = {
    "DeviceServing": ".config",
    "Layout": ".config",
    "ServingConfig": ".config",
    "ServingReport": ".config",
    "Trial": ".config",
    "ServingWarning": ".independence",
    "recorded_serving": ".record",
    "serve": ".start",
    "served": ".server",
    "DeviceStats": ".stats",
    "ServedStats": ".stats",
    "StreamStats": ".stats",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
