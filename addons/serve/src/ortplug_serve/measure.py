"""Measuring how to serve many callers: layouts tried on the model, on this host, side by side.

Each trial serves :data:`CALLERS` callers that send the model's generated inputs over and over
through a real :class:`~.server.Server` and counts the requests served, in slices of
:data:`SLICE_S` seconds and at least :data:`SLICE_REQUESTS` requests (at most
:data:`MAX_SLICE_S` seconds). A layout's rate is its requests over its seconds, pooled over
its slices, and the slices of layouts compared are interleaved, so that a machine whose load
changes meanwhile (other processes) weighs on each alike. No slice starts once
:data:`BUDGET_S` seconds of trials have passed, except round 1's first pass: about 1.5
seconds for a tiny model, plus the sessions' builds. In order:

1. each stream layout without batching, once forwards and once backwards (on the CPU: the
   CPUs split into single-thread streams first, the layout the others must beat, since runs
   of a single thread waste none of it waiting on others; then one stream with the session's
   own threads, then streams of 2, 4... threads; on an accelerator: 1 and 2 streams);
2. on the fastest layout, each change beside it (a slice of the change, one of the fastest,
   one of the change): batches of up to :data:`FIRST_BATCH` rows, then (when that won)
   :data:`SECOND_BATCH` rows, then a queueing delay of :data:`DELAY_MS` ms.

Batches are only tried once the model's rows were proven independent
(:func:`~.independence.rows_checked`), and on an accelerator only up to the rows verification
ran (:data:`~ortplug.verification.probes.BATCH_SIZES`). The trials' servers re-check nothing
(their callers send one feed over and over, and nobody gets their outputs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from ortplug.progress import Progress, progress
from ortplug.verification.probes import BATCH_SIZES

from .config import Layout, ServingConfig, Trial
from .rows import Batching
from .server import Device, Server, Stream

__all__ = [
    "BUDGET_S",
    "CALLERS",
    "DELAY_MS",
    "FIRST_BATCH",
    "MAX_SLICE_S",
    "SECOND_BATCH",
    "SLICE_REQUESTS",
    "SLICE_S",
    "WIN_MARGIN",
    "batch_limit",
    "best_of",
    "candidate_layouts",
    "default_layout",
    "measure",
]

#: Seconds of trials after which no new slice starts (round 1's first pass always runs).
BUDGET_S = 2.0
#: Seconds each slice serves its callers at least, and at most (a slow model's slice ends there).
SLICE_S = 0.08
MAX_SLICE_S = 0.5
#: Requests a slice serves at least (within ``MAX_SLICE_S``): two per caller.
SLICE_REQUESTS = 16
#: Concurrent callers of each trial.
CALLERS = 8
FIRST_BATCH = 8
SECOND_BATCH = 32
DELAY_MS = 2.0
#: A trial replaces the best one only when it serves this many times its requests per second.
WIN_MARGIN = 1.05


def _splits(cpus: int, own_threads: bool) -> list[tuple[int, int | None]]:
    """(streams, threads each) on ``cpus`` CPUs: single-thread streams, one stream with the
    session's own threads (or ``cpus`` threads, without ``own_threads``), then streams of 2,
    4... threads (at most 4 sessions unless they share one)."""
    whole: tuple[int, int | None] = (1, None if own_threads else cpus)
    layouts: list[tuple[int, int | None]] = [(cpus, 1), whole] if cpus > 1 else [whole]
    threads = 2
    while threads < cpus:
        streams = cpus // threads
        if streams <= 4:
            layouts.append((streams, threads))
        threads *= 2
    return layouts


def candidate_layouts(
    given: ServingConfig, *, cpu: bool, cpus: int, batch_limit: int, own_threads: bool = True
) -> list[Layout]:
    """Round 1's layouts for a device (``batch_limit``: the most rows a run may take; 1: none;
    ``own_threads``: whether one stream may run with the session's own threads, which a CPU
    budget smaller than the process's forbids)."""
    if given.streams is not None or given.threads_per_stream is not None:
        streams = given.streams or (
            max(1, cpus // given.threads_per_stream) if cpu and given.threads_per_stream else 1
        )
        threads = given.threads_per_stream
        if cpu and threads is None and (streams > 1 or not own_threads):
            threads = max(1, cpus // streams)
        pairs: list[tuple[int, int | None]] = [(streams, threads)]
    elif cpu:
        pairs = _splits(cpus, own_threads)
    else:
        pairs = [(1, None), (2, None)]
    batch = min(given.max_batch or 1, batch_limit)
    delay = given.max_delay_ms if given.max_delay_ms is not None else 0.0
    return [Layout(s, t, batch, delay) for s, t in pairs]


def default_layout(given: ServingConfig, *, cpu: bool, cpus: int, batch_limit: int) -> Layout:
    """The layout when nothing is measured: the CPUs split in single-thread streams (one
    stream on an accelerator), batches of up to :data:`FIRST_BATCH` rows, no delay."""
    streams = given.streams or (cpus if cpu else 1)
    threads = given.threads_per_stream or (max(1, cpus // streams) if cpu else None)
    batch = min(given.max_batch or FIRST_BATCH, batch_limit)
    delay = given.max_delay_ms if given.max_delay_ms is not None else 0.0
    return Layout(streams, threads, batch, delay)


def batch_limit(batching: Batching | None, *, cpu: bool) -> int:
    """The most rows a run may take on a device: 1 without batching; on an accelerator, the
    most verification ran."""
    if batching is None:
        return 1
    return SECOND_BATCH if cpu else max(BATCH_SIZES)


def _serve_for(
    streams: list[Stream],
    layout: Layout,
    batching: Batching | None,
    feed: Mapping[str, Any],
    names: Sequence[str],
) -> tuple[int, float]:
    """Requests ``streams`` served :data:`CALLERS` callers in one slice, and its seconds."""
    device = Device("trial", streams, layout.max_batch, layout.max_delay_ms / 1e3)
    server = Server([device], batching)
    stop = threading.Event()
    counts = [0] * CALLERS
    errors: list[BaseException] = []

    def call(slot: int) -> None:
        try:
            while not stop.is_set():
                server.run(names, dict(feed))
                counts[slot] += 1
        except BaseException as exc:  # the trial fails; the others stand
            errors.append(exc)

    try:
        callers = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(CALLERS)]
        started = time.perf_counter()
        for caller in callers:
            caller.start()
        stop.wait(SLICE_S)
        while sum(counts) < SLICE_REQUESTS and time.perf_counter() - started < MAX_SLICE_S:
            if errors or stop.wait(0.01):
                break
        stop.set()
        for caller in callers:
            caller.join()
        elapsed = time.perf_counter() - started
    finally:
        server.close("the trial ended")
    if errors:
        raise errors[0]
    return sum(counts), elapsed


def _warm(
    streams: list[Stream], feed: Mapping[str, Any], names: Sequence[str], warm: set[int]
) -> None:
    """One run on each session of ``streams`` not in ``warm`` (ids), added: a session's first
    run is not what it serves at."""
    for stream in streams:
        if id(stream.session) not in warm:
            stream.session.run(list(names), dict(feed), stream.options)
            warm.add(id(stream.session))


class _Pooled:
    """Each layout's requests and seconds over its slices, in the order first measured."""

    def __init__(
        self,
        streams_for: Callable[[Layout], list[Stream]],
        batching: Batching | None,
        feed: Mapping[str, Any],
        names: Sequence[str],
        shown: Progress,
    ) -> None:
        self._streams_for, self._shown = streams_for, shown
        self._batching, self._feed, self._names = batching, feed, names
        self._served: dict[Layout, list[float]] = {}
        self._warm: set[int] = set()  # the sessions run once already (StreamBuilder reuses them)
        self._deadline = time.perf_counter() + BUDGET_S

    @property
    def spent(self) -> bool:
        return time.perf_counter() > self._deadline

    def slice(self, layout: Layout) -> None:
        """Serve one slice on ``layout``; its requests and seconds are pooled."""
        self._shown.note(layout.describe())
        streams = self._streams_for(layout)
        _warm(streams, self._feed, self._names, self._warm)
        requests, seconds = _serve_for(streams, layout, self._batching, self._feed, self._names)
        self._shown.advance()
        pooled = self._served.setdefault(layout, [0.0, 0.0])
        pooled[0] += requests
        pooled[1] += seconds

    def trials(self) -> list[Trial]:
        return [Trial(layout, requests / seconds) for layout, (requests, seconds) in
                self._served.items()]  # fmt: skip

    def best(self) -> Layout:
        return best_of(self.trials()).layout

    def beside(self, change: Layout) -> bool:
        """Slices of ``change``, the best so far, and ``change`` again (unless the budget is
        spent); whether ``change`` is the best now."""
        best = self.best()
        for layout in (change, best, change):
            if self.spent:
                return False
            self.slice(layout)
        return self.best() == change


def measure(
    streams_for: Callable[[Layout], list[Stream]],
    candidates: Sequence[Layout],
    batching: Batching | None,
    feed: Mapping[str, Any],
    names: Sequence[str],
    *,
    batch_limit: int,
    free: ServingConfig,
) -> list[Trial]:
    """Run round 1 on ``candidates``, then round 2 on the best (the fields ``free`` leaves
    ``None`` are the ones round 2 may change); every layout's trial, in the order first served
    (:func:`best_of` picks the one that serves)."""
    with progress("measuring serving layouts", unit="slice") as shown:  # a bar where asked
        return _measured(_Pooled(streams_for, batching, feed, names, shown), candidates,
                         batch_limit=batch_limit, free=free)  # fmt: skip


def _measured(
    pooled: _Pooled, candidates: Sequence[Layout], *, batch_limit: int, free: ServingConfig
) -> list[Trial]:
    """:func:`measure`'s rounds on ``pooled``."""
    for layout in candidates:
        pooled.slice(layout)
    for layout in reversed(candidates if len(candidates) > 1 else ()):
        if pooled.spent:
            break
        pooled.slice(layout)
    best = pooled.best()
    batches = free.max_batch is None and batch_limit > 1 and best.max_batch == 1
    first = attrs.evolve(best, max_batch=min(FIRST_BATCH, batch_limit))
    if batches and pooled.beside(first) and batch_limit >= SECOND_BATCH:
        pooled.beside(attrs.evolve(pooled.best(), max_batch=SECOND_BATCH))
    best = pooled.best()
    if best.max_batch > 1 and free.max_delay_ms is None:
        pooled.beside(attrs.evolve(best, max_delay_ms=DELAY_MS))
    return pooled.trials()


def best_of(trials: Sequence[Trial]) -> Trial:
    """The trial that served the most requests per second; a later (less plain) one must serve
    :data:`WIN_MARGIN` times the earlier best's to take its place."""
    best = trials[0]
    for trial in trials[1:]:
        if trial.requests_per_s > WIN_MARGIN * best.requests_per_s:
            best = trial
    return best
