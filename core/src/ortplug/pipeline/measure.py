"""Measurement, the pipeline's third stage: verified candidates timed side by side on the same inputs.

Runs are interleaved (one run of each candidate per round), so a slow spell of
the host falls on every candidate alike, and each candidate's median is kept.
The cost is bounded: the candidates were run by verification already (shaders,
kernels and engines are compiled), so one warm-up run each, which is timed; a
candidate whose warm-up took ``HOPELESS`` times the reference's (the last run)
is not timed further (its warm-up is its time); then rounds until ``MAX_ROUNDS``
or until ``BUDGET_S`` of timed runs have passed (at least ``MIN_ROUNDS``).
"""

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
