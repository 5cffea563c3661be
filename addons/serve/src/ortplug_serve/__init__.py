"""ortplug-serve: many callers served by one ortplug backend (the throughput hints).

``OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")`` (or
``"cumulative_throughput"``) finds this add-on through the entry-point group ``ortplug.hints``
and hands it the proven build (:class:`ortplug.backend.dispatch.ServingStart`); it serves every
call from then on through a request queue, execution streams and batching
(:func:`~.start.serve`). ``ortplug bench M --callers 1,4,16`` runs its ``bench-callers``
command. The core's spellings (``ortplug.ServingConfig``, ``ortplug.backend.ServingReport``,
...) resolve to the names here.
"""

from __future__ import annotations

from .config import DeviceServing, Layout, ServingConfig, ServingReport, Trial
from .independence import ServingWarning
from .record import recorded_serving
from .start import serve

__all__ = [
    "DeviceServing",
    "Layout",
    "ServingConfig",
    "ServingReport",
    "ServingWarning",
    "Trial",
    "recorded_serving",
    "serve",
]
