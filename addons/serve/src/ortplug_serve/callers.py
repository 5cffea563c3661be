"""Concurrent callers of a run, timed: requests per second and latency percentiles.

What ``ortplug bench --callers`` and ``benchmarks/bench_throughput.py`` measure: ``callers``
threads, released together, each calling ``run()`` over and over (a closed loop: a caller sends
its next request when the last one returned) until a deadline. A side's slices of several
interleaved rounds are pooled (:meth:`Served.pooled`), so a machine whose load changes during
the benchmark weighs on every side alike.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence

import attrs

__all__ = ["Served", "drive"]


@attrs.frozen
class Served:
    """What ``callers`` concurrent callers were served: requests, seconds, each request's
    latency (seconds, sorted), and the CPU seconds this process used meanwhile."""

    callers: int
    requests: int
    seconds: float
    latencies: tuple[float, ...]
    cpu_seconds: float = 0.0

    @property
    def cpus_used(self) -> float:
        """How many CPUs this process kept busy on average (its CPU time over the wall time):
        on a machine busy with other work, more runnable threads get a larger share of it."""
        return self.cpu_seconds / self.seconds if self.seconds > 0 else 0.0

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    def percentile_ms(self, share: float) -> float:
        """The latency under which ``share`` (0..1) of the requests returned, in milliseconds."""
        if not self.latencies:
            return math.nan
        index = min(len(self.latencies) - 1, max(0, math.ceil(share * len(self.latencies)) - 1))
        return self.latencies[index] * 1e3

    @property
    def p50_ms(self) -> float:
        return self.percentile_ms(0.50)

    @property
    def p99_ms(self) -> float:
        return self.percentile_ms(0.99)

    @classmethod
    def pooled(cls, slices: Sequence[Served]) -> Served:
        """Slices of one side (same callers) as one: requests and seconds summed."""
        latencies = sorted(latency for part in slices for latency in part.latencies)
        return cls(
            slices[0].callers,
            sum(part.requests for part in slices),
            sum(part.seconds for part in slices),
            tuple(latencies),
            sum(part.cpu_seconds for part in slices),
        )


def drive(run: Callable[[], object], callers: int, seconds: float) -> Served:
    """``callers`` threads calling ``run()`` for ``seconds``; a call that raises stops the
    benchmark with its error (after every caller stopped)."""
    start = threading.Barrier(callers + 1)
    latencies: list[list[float]] = [[] for _ in range(callers)]
    errors: list[BaseException] = []
    stop = threading.Event()
    clock = time.perf_counter

    def call(slot: int) -> None:
        mine = latencies[slot]
        start.wait()
        try:
            while not stop.is_set():
                began = clock()
                run()
                mine.append(clock() - began)
        except BaseException as exc:  # reported once every caller stopped
            errors.append(exc)
            stop.set()

    threads = [
        threading.Thread(target=call, args=(slot,), name=f"ortplug-caller-{slot}", daemon=True)
        for slot in range(callers)
    ]
    for thread in threads:
        thread.start()
    start.wait()
    began, cpu = clock(), time.process_time()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed, cpu = clock() - began, time.process_time() - cpu
    if errors:
        raise errors[0]
    served = sorted(latency for mine in latencies for latency in mine)
    return Served(callers, len(served), elapsed, tuple(served), cpu)
