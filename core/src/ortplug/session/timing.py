"""Wall-clock timings: one call, and medians for ``ortplug bench`` and the smoke checks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["median_ms", "timed_ms"]


def timed_ms(run: Callable[[], object]) -> float:
    """How long one call of ``run`` took, in milliseconds."""
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1e3


def median_ms(run: Callable[[], object], calls: int) -> float:
    """The median of ``calls`` timed calls of ``run``, in milliseconds."""
    return statistics.median(timed_ms(run) for _ in range(calls))
