"""Real requests run again on a second session in a background thread, and judged there (the
shadow and the spot check of :mod:`.real_traffic`)."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import math
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

__all__ = ["AliasedOutputs", "Judge", "Request", "TrafficCheck"]

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
    aliased: bool = False  # its outputs were the memory of a later request's

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


class AliasedOutputs(Exception):
    """What a check judges instead of outputs when a served request's outputs were the memory
    of the next run's (a provider that reuses its output buffers under the caller)."""


def _arrays(values: Sequence[Any]) -> list[np.ndarray]:
    return [v for v in values if isinstance(v, np.ndarray) and v.size and v.dtype != object]


def _shared(kept: Sequence[np.ndarray], results: Sequence[Any]) -> bool:
    """Whether an output of ``results`` is the memory of one of ``kept``."""
    return any(np.may_share_memory(k, r) for k in kept for r in _arrays(results))


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
    """Runs requests served elsewhere again on ``session`` in a daemon thread and hands each, with
    its outputs, to ``judge``: the n-th offered is taken with ``max(rate, W / (W + n - 1))``
    (``decay`` W), at most ``capacity`` waiting, within ``cpu_share`` of a CPU once decayed."""

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
        decay: int = 0,
    ) -> None:
        self._session = session
        self._judge = judge
        self._queue: queue.Queue[Request | None] = queue.Queue(capacity)
        self._rate = rate
        self._decay = decay
        self._offered = 0  # requests offered (approximate under many callers: a share's input)
        #: Requests offered from which the share is ``rate`` (no counting beyond: nothing per call).
        self._decayed_at = math.ceil(decay / rate - decay + 1) if decay and rate > 0 else 0
        self._kept: tuple[list[np.ndarray], Request] | None = None  # the last one taken
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

    def tap(
        self,
        names: Sequence[str],
        feed: Any,
        results: Sequence[Any],
        served: object,
        *,
        owned: bool = False,
    ) -> None:
        """Offer one served request: taken when sampled (:meth:`share`), the queue has room and
        the budget allows; never blocks. The outputs of the last one taken must not be the memory
        of the next request's (judged as :class:`AliasedOutputs` when they are; ``owned``: the
        outputs are the caller's own arrays, ``run_into``'s, which it may pass again)."""
        kept = self._kept
        if kept is not None and not owned:
            self._kept = None  # compared with the next request only: nothing more per call
            if _shared(kept[0], results):
                with contextlib.suppress(queue.Full):
                    self._queue.put_nowait(attrs.evolve(kept[1], aliased=True))
        rate = self._rate
        if self._offered < self._decayed_at:  # right after the start: a higher share
            self._offered += 1
            rate = self.share(self._offered)
        if rate < 1.0 and self._draw() >= rate:
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
        self._kept = None if owned else (_arrays(results), request)
        with contextlib.suppress(queue.Full):  # another caller's request took the last place
            self._queue.put_nowait(request)

    def tapping(
        self,
        callback: Callable[[Mapping[str, Any] | None, BaseException | None], None],
        names: Sequence[str],
        feed: Any,
        served: object,
    ) -> Callable[[Mapping[str, Any] | None, BaseException | None], None]:
        """``callback`` (an asynchronous run's: outputs or an error) with its outputs offered first."""

        def tapped(outputs: Mapping[str, Any] | None, error: BaseException | None) -> None:
            if outputs is not None:
                self.tap(names, feed, [outputs[name] for name in names], served)
            callback(outputs, error)

        return tapped

    def share(self, offered: int) -> float:
        """The share of requests taken at the ``offered``-th: ``decay / (decay + offered)`` at
        first (every one, at the first), down to ``rate``."""
        if not self._decay:
            return self._rate
        return max(self._rate, self._decay / (self._decay + offered - 1))

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
        previous: list[np.ndarray] | None = None  # the last run's outputs here
        try:
            while not self._stopped.is_set():
                request = self._queue.get()
                if request is None or self._stopped.is_set():
                    return
                started = time.monotonic()
                outcome: Mapping[str, Any] | Exception
                try:
                    if request.aliased:
                        raise AliasedOutputs(
                            f"the outputs of {request.describe()} were the memory a later run "
                            "returned its outputs in (a caller that kept them saw them overwritten)"
                        )
                    names = list(request.names)
                    results = self._session.run(names, dict(request.feed), self._options)
                    outcome = dict(zip(names, results))
                    if previous is not None and _shared(previous, results):
                        raise AliasedOutputs(
                            f"the outputs of the run before {request.describe()} were the memory "
                            "its run returned its outputs in"
                        )
                    previous = _arrays(results)
                except Exception as exc:
                    outcome = exc
                if self._stopped.is_set():
                    return
                if self._cpu_share is not None and self._offered >= self._decayed_at:
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
