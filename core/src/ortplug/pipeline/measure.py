"""Measurement, the pipeline's third stage: verified candidates timed interleaved on the same
inputs, within a bounded budget."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from ..session.timing import timed_ms

__all__ = ["BUDGET_S", "HOPELESS", "MAX_ROUNDS", "MIN_ROUNDS", "interleaved_medians"]

MIN_ROUNDS = 3
MAX_ROUNDS = 15
#: Seconds of timed runs after which no new round starts (the warm-up runs are not counted).
BUDGET_S = 1.0
#: A candidate whose warm-up run takes this many times the reference's is not timed further.
HOPELESS = 3.0


def interleaved_medians(runs: Sequence[Callable[[], object]]) -> list[float]:
    """Each run's median time in milliseconds, measured in interleaved rounds; the last run is
    the reference."""
    warm = [timed_ms(run) for run in runs]
    timed = [i for i, ms in enumerate(warm) if ms <= HOPELESS * warm[-1] or i == len(runs) - 1]
    times: list[list[float]] = [[ms] if i not in timed else [] for i, ms in enumerate(warm)]
    started = time.perf_counter()
    for round_ in range(MAX_ROUNDS):
        if round_ >= MIN_ROUNDS and time.perf_counter() - started > BUDGET_S:
            break
        for i in timed:
            times[i].append(timed_ms(runs[i]))
    return [statistics.median(measured) for measured in times]
