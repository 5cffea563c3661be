"""Real requests run again on a second session in a background thread, and judged there.

A startup fallback uses it twice (:mod:`._real_traffic`): a verified candidate is
*shadowed* while the CPU reference serves (each request it keeps up with runs on the
candidate too), and once the candidate serves, a sampled share of its requests is
*spot-checked* on the CPU reference. The caller never waits for either: a request and
the outputs it got are copied into a bounded queue (not at all when the queue is full,
or while a CPU budget rests the thread) and judged in a daemon thread.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import queue
import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..host.runtime import require_onnxruntime

__all__ = ["Judge", "Request", "TrafficCheck"]

#: How long stopping waits for the thread (its run in flight is terminated first).
_JOIN_S = 10.0


@attrs.frozen
class Request:
    """One real request as it was served: the outputs asked for, a copy of its feed and of the
    outputs it got, what served it (the backend's plan then), and its number among those checked."""

    names: tuple[str, ...]
    feed: Mapping[str, Any]
    outputs: Mapping[str, Any]
    served: object
    number: int

    def describe(self) -> str:
        """``request 3 (x (2, 8) float32)``: which request, and the shapes it fed."""
        fed = ", ".join(f"{name} {_shape(value)}" for name, value in self.feed.items())
        return f"request {self.number} ({fed})"


def _shape(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.shape} {value.dtype}"
    if isinstance(value, list):
        return f"a sequence of {len(value)}"
    if isinstance(value, dict):
        return f"a map of {len(value)}"
    return type(value).__name__


#: Called in the thread with a request and the second session's outputs on it (or what its run
#: raised); returns whether to go on checking.
Judge = Callable[[Request, "Mapping[str, Any] | Exception"], bool]


def _done(_request: Request, _outcome: Mapping[str, Any] | Exception) -> bool:
    """The judge of a check that ended (its own judge, and all it holds, are released)."""
    return False


class _Uncopyable(Exception):
    """A value of a request that cannot be copied (an OrtValue): the request is not checked."""


def _copied(value: Any) -> Any:
    """A copy the caller cannot change under the check (inputs reused, outputs edited in place)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, tuple)):
        return [_copied(item) for item in value]
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if value is None or isinstance(value, (bool, int, float, str, np.generic)):
        return value
    raise _Uncopyable(type(value).__name__)


#: Checks whose thread may be running: stopped and waited for at exit (native code still
#: running in a thread when the process ends aborts it).
_LIVE: weakref.WeakSet[TrafficCheck] = weakref.WeakSet()


def _stop_all() -> None:
    checks = list(_LIVE)
    for check in checks:
        check.stop(wait=False)
    deadline = time.monotonic() + _JOIN_S
    for check in checks:
        check.join(max(0.0, deadline - time.monotonic()))


atexit.register(_stop_all)


class TrafficCheck:
    """Runs requests served elsewhere again on ``session`` in a daemon thread and hands each,
    with its outputs, to ``judge``.

    ``rate`` is the share of requests offered that are taken (1: every one the queue has room
    for), ``capacity`` how many may wait, and ``cpu_share`` (``None``: no budget) the share of
    the thread's time it may spend running: after a run of ``t`` seconds nothing is taken for
    ``t * (1 / cpu_share - 1)`` seconds. ``ended`` is called once, in the thread, when it stops.
    """

    def __init__(
        self,
        session: Any,
        judge: Judge,
        *,
        name: str,
        capacity: int,
        rate: float = 1.0,
        cpu_share: float | None = None,
        ended: Callable[[], None] | None = None,
    ) -> None:
        self._session = session
        self._judge = judge
        self._queue: queue.Queue[Request | None] = queue.Queue(capacity)
        self._rate = rate
        self._draw = random.Random().random
        self._cpu_share = cpu_share
        self._resume_at = 0.0
        self._numbers = itertools.count(1)
        self._stopped = threading.Event()
        self._ended = ended
        self._options = require_onnxruntime().RunOptions()
        self._options.log_severity_level = 4  # a run that fails is judged, not logged
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        _LIVE.add(self)
        self._thread.start()

    @property
    def stopped(self) -> bool:
        """Whether the check stopped (or was asked to)."""
        return self._stopped.is_set()

    def wrap(
        self, run: Callable[[list[str], Any], list[Any]], served: object
    ) -> Callable[[list[str], Any], list[Any]]:
        """``run`` (a session's run of output names and a feed), each of its requests offered."""
        tap = self.tap

        def tapped(names: list[str], feed: Any) -> list[Any]:
            results = run(names, feed)
            tap(names, feed, results, served)
            return results

        return tapped

    def tap(self, names: Sequence[str], feed: Any, results: Sequence[Any], served: object) -> None:
        """Offer one served request: taken when sampled, the queue has room and the budget
        allows; never blocks."""
        if self._rate < 1.0 and self._draw() >= self._rate:
            return
        if self._stopped.is_set() or self._queue.full() or time.monotonic() < self._resume_at:
            return
        try:
            request = Request(
                tuple(names),
                _copied(dict(feed)),
                dict(zip(names, _copied(list(results)))),
                served,
                next(self._numbers),
            )
        except _Uncopyable:
            return
        with contextlib.suppress(queue.Full):  # another caller's request took the last place
            self._queue.put_nowait(request)

    def stop(self, *, wait: bool = True) -> None:
        """Stop checking (a run in flight is terminated); wait for the thread unless ``wait`` is
        false or this is the thread."""
        self._stopped.set()
        self._options.terminate = True
        with contextlib.suppress(queue.Full):  # the thread is busy: it sees the stop after its run
            self._queue.put_nowait(None)
        if wait:
            self.join(_JOIN_S)

    def join(self, timeout: float) -> None:
        """Wait for the thread to end (at most ``timeout`` seconds; not from the thread itself)."""
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _work(self) -> None:
        try:
            while not self._stopped.is_set():
                request = self._queue.get()
                if request is None or self._stopped.is_set():
                    return
                started = time.monotonic()
                outcome: Mapping[str, Any] | Exception
                try:
                    names = list(request.names)
                    results = self._session.run(names, dict(request.feed), self._options)
                    outcome = dict(zip(names, results))
                except Exception as exc:
                    outcome = exc
                if self._stopped.is_set():
                    return
                if self._cpu_share is not None:
                    rest = (time.monotonic() - started) * (1.0 / self._cpu_share - 1.0)
                    self._resume_at = time.monotonic() + rest
                if not self._judge(request, outcome):
                    return
        finally:
            self._stopped.set()
            self._session = None  # the second session, and what the judge holds, are released
            self._judge = _done
            ended, self._ended = self._ended, None
            if ended is not None:
                ended()
