"""Measurement, the pipeline's third stage: verified candidates timed side by side on the same inputs.

Runs are interleaved (one run of each candidate per round), so a slow spell of
the host falls on every candidate alike, and each candidate's median is kept.
The cost is bounded: two warm-up runs each, then rounds until ``MAX_ROUNDS``
or until ``BUDGET_S`` of timed runs have passed (at least ``MIN_ROUNDS``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

__all__ = ["BUDGET_S", "MAX_ROUNDS", "MIN_ROUNDS", "interleaved_medians"]

WARM_UP_RUNS = 2
MIN_ROUNDS = 3
MAX_ROUNDS = 15
#: Seconds of timed runs after which no new round starts (the warm-up runs are not counted).
BUDGET_S = 1.0


def interleaved_medians(runs: Sequence[Callable[[], object]]) -> list[float]:
    """Each run's median time in milliseconds, measured in interleaved rounds."""
    for run in runs:
        for _ in range(WARM_UP_RUNS):
            run()
    times: list[list[float]] = [[] for _ in runs]
    started = time.perf_counter()
    for round_ in range(MAX_ROUNDS):
        if round_ >= MIN_ROUNDS and time.perf_counter() - started > BUDGET_S:
            break
        for run, measured in zip(runs, times):
            begin = time.perf_counter()
            run()
            measured.append((time.perf_counter() - begin) * 1e3)
    return [statistics.median(measured) for measured in times]
