"""Wall-clock medians for ``ortplug bench`` and the smoke checks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["median_ms"]


def median_ms(run: Callable[[], object], calls: int) -> float:
    """The median of ``calls`` timed calls of ``run``, in milliseconds."""
    timings = []
    for _ in range(calls):
        started = time.perf_counter()
        run()
        timings.append((time.perf_counter() - started) * 1e3)
    return statistics.median(timings)
