"""Serving many callers: one request queue, batched runs, execution streams on one or more devices.

Every request of a backend built with a throughput hint is put on one queue. Each execution
stream (a session, or a share of one, with its own worker thread) takes the oldest request it
may run, then the queued requests of the same group (:func:`~.rows.group_of`) up to its
device's ``max_batch`` rows (and, while other streams of its device are idle, up to its share
of what is queued, so that they run the rest beside it), waiting at most ``max_delay_s`` after
the first was queued for more to come; it runs them as one and splits the outputs back to
each caller, each in arrays of its own. The first batched runs of each row count are run again
request by request and compared (:class:`~.independence.RowChecks`): each caller gets what its
request gave alone, and a disagreement (or a run whose outputs cannot be split) makes every
request run alone from then on, said once with a :class:`~.independence.ServingWarning`. A
batch that fails is run again request by request, so only the bad request's caller gets the
error. A caller of
:meth:`Server.run` that finds the queue empty and a stream idle, on a device that does not wait
for others to share a run (no queueing delay), runs its request on that stream itself: one
caller, or few, pay no hand-over to a worker thread and back (a tiny model's run is shorter).
Not with several devices: there the queue is what spreads requests over them. A request that
finds nothing queued and nothing running, as the one before it did, runs on the path set for
lone requests (:meth:`Server.serve_lone_requests`: a watched layout's build session), with the
session's own threads: a lone caller is served as the latency hint serves it, not by one
single-thread stream (and the watch, comparing on such traffic, sees the paths alike).

With several devices (``cumulative_throughput``) the streams of every device take from the same
queue, so each takes work in proportion to how fast it runs it. A request that fails alone on
one device is queued again for the others; when it then runs elsewhere, the device it failed on
is dropped (its streams stop) with a :class:`~ortplug.errors.ProviderFallbackWarning`, and the
requests that had no device left get the error they failed with.

``restream()`` replaces a device's streams while serving (a layout whose sessions were built
behind the first requests, or one the watch chose, :mod:`.watch`): the old streams finish their
runs and stop, the queue stays. ``serve_latency()`` moves :meth:`Server.run` to the latency
path: each caller runs its own request on one session on its own thread, no queue, no batching
(what the latency hint does, counted as a stream of its own); ``submit()`` still queues for the
streams.

``served()`` is what it served so far (:class:`~.stats.ServedStats`): each stream's requests,
rows and runs, the queueing delay of its requests, and how full its shared runs were, counted
under the lock that hands a stream its requests (no allocation per request).

``close()`` fails the queued requests with :class:`~ortplug.errors.BackendClosedError`, stops
the runs in progress (ONNX Runtime's terminate flag) and joins every worker thread;
``terminate(True)`` fails the queued requests with :class:`~ortplug.errors.RunTerminatedError`
and stops the runs in progress until ``terminate(False)``.
"""

from __future__ import annotations

import atexit
import threading
import time
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any

import attrs
from ortplug.errors import BackendClosedError, ProviderFallbackWarning, RunTerminatedError

from .independence import RowChecks, ServingWarning, run_alone, shares_problem
from .rows import Batching, NotRowwise, group_of, split_rows, stack_rows
from .stats import DeviceStats, ServedStats, StreamStats

__all__ = ["EXIT_WAIT_S", "LONE_AFTER", "Device", "Server", "Stream", "served"]

#: How long ``close()`` (and the interpreter's exit) waits for a worker still in a run.
EXIT_WAIT_S = 30.0
#: Requests in a row finding nothing queued or running before one runs on the lone requests'
#: path: one caller's traffic, not a moment of many callers' in which every stream is idle.
LONE_AFTER = 2

_LIVE: weakref.WeakSet[Server] = weakref.WeakSet()
_TERMINATED = "the run was stopped by OnnxBackend.terminate(); call reset_terminate() to run again"


def _close_live() -> None:
    for server in list(_LIVE):
        server.close("the interpreter is exiting")


atexit.register(_close_live)


def served(backend: Any) -> ServedStats | None:
    """What ``backend`` (an ``OnnxBackend``) served so far under a throughput hint
    (:meth:`Server.served`); ``None`` when no server of this add-on serves it (the latency
    hint, or a closed backend)."""
    dispatcher = backend.dispatcher
    return dispatcher.served() if isinstance(dispatcher, Server) else None


@attrs.define(eq=False)
class Stream:
    """One execution stream: the session its worker runs, and the run options its runs take
    (what ``terminate()`` reaches)."""

    session: Any
    options: Any
    #: Whether a run is on it now (its worker's, or a caller's that found it idle).
    busy: bool = False
    #: Whether it was replaced (:meth:`Server.restream`): its worker stops after its run.
    retired: bool = False
    #: Whether it is the latency path's (callers run on it themselves, :meth:`Server.serve_latency`).
    latency: bool = False
    #: What it served (:meth:`Server.served`), counted under the server's lock: requests, rows
    #: and runs; queueing delay in all and at most; time in runs; the runs of requests that may
    #: share runs and their rows (up to the batch limit); when it started and stopped serving,
    #: and when its current run began.
    requests: int = 0
    rows: int = 0
    runs: int = 0
    waited_s: float = 0.0
    max_wait_s: float = 0.0
    busy_s: float = 0.0
    shared_runs: int = 0
    filled_rows: int = 0
    since: float = 0.0
    until: float | None = None
    began: float = 0.0
    #: Seconds it served before ``since`` (the latency path's stream serves by turns).
    served_s: float = 0.0


@attrs.define(eq=False)
class Device:
    """One device's streams and batch limits; ``dropped`` says why it serves no more."""

    label: str
    streams: list[Stream]
    max_batch: int
    max_delay_s: float
    dropped: str | None = None
    #: Its streams replaced by :meth:`Server.restream` (``terminate()`` and ``close()`` reach
    #: them; :meth:`Server.served` counts what they served).
    retired: list[Stream] = attrs.field(factory=list)
    #: Requests it served, and runs it made (for the report; a batch run again request by
    #: request counts once).
    requests: int = 0
    runs: int = 0
    #: The latency path's stream, once it served (:meth:`Server.serve_latency`).
    latency: Stream | None = None

    def every_stream(self) -> tuple[Stream, ...]:
        """Its streams, those replaced and the latency path's: all it served on."""
        latency = () if self.latency is None else (self.latency,)
        return (*self.streams, *self.retired, *latency)


def _stream_stats(stream: Stream, now: float) -> StreamStats:
    """``stream``'s counters as they stand at ``now`` (under the server's lock)."""
    seconds = stream.served_s + (now if stream.until is None else stream.until) - stream.since
    return StreamStats(stream.requests, stream.rows, stream.runs, stream.busy_s, seconds,
                       stream.retired, stream.latency)  # fmt: skip


class _Request:
    """One caller's request: its feed, the outputs asked, its group and rows, its future."""

    __slots__ = (
        "avoid",
        "failure",
        "feed",
        "future",
        "group",
        "names",
        "options",
        "queued",
        "rows",
    )

    def __init__(
        self, feed: Mapping[str, Any], names: Sequence[str], options: Any, batching: Batching | None
    ) -> None:
        self.feed = feed
        self.names = names
        self.options = options  # the caller's own run options: it runs alone, with them
        found = group_of(batching, feed, names)
        group, self.rows = found if found is not None else (None, 0)
        self.group = group if options is None else None
        self.future: Future[list[Any]] = Future()
        self.queued = time.monotonic()
        self.avoid: set[Device] = set()  # devices it failed on alone
        self.failure: tuple[Device, BaseException] | None = None


def _settle(request: _Request, outputs: list[Any] | None, error: BaseException | None) -> None:
    """Give the caller its outputs or error (once; a caller that cancelled gets nothing)."""
    try:
        if error is not None:
            request.future.set_exception(error)
        else:
            request.future.set_result(outputs or [])
    except InvalidStateError:
        pass


class Server:
    """The request queue and the worker threads of a backend's streams (module docstring)."""

    def __init__(
        self,
        devices: Sequence[Device],
        batching: Batching | None,
        checks: RowChecks | None = None,
    ) -> None:
        """``checks``: the batched runs trusted so far (``None``: none is re-checked, as in a
        measurement's trials, whose results nobody gets)."""
        self.devices = tuple(devices)
        self._batching = batching
        self._checks = checks
        #: Why requests stopped sharing runs (a batched run differed or could not be split).
        self.unbatched: str | None = None
        #: How it serves (a :class:`~.config.ServingReport`, set by :func:`~.start.serve`).
        self.report: Any = None
        #: Why the sessions of a layout built behind the first requests failed to build (the
        #: streams serving then serve on).
        self.restream_failed: str | None = None
        #: The :class:`~.watch.Watch` comparing its layout with the latency path (set by
        #: :mod:`.start` when one runs), and what it found last, shown with what it served.
        self.watch: Any = None
        self.watched: str | None = None
        #: The latency path while it serves :meth:`run` (:meth:`serve_latency`).
        self._direct: tuple[Device, Stream] | None = None
        #: The latency path a request runs on when nothing else runs, and whether one does now
        #: (:meth:`serve_lone_requests`).
        self._lone: tuple[Device, Stream] | None = None
        self._lone_busy = False
        self._quiet_arrivals = 0  # requests in a row that found nothing queued or running
        self._queue: deque[_Request] = deque()
        self._cond = threading.Condition()
        self._closed: str | None = None
        #: Set once it closes: what a thread of :meth:`behind` waits on between its looks.
        self.stopping = threading.Event()
        self._served_once = threading.Event()  # a request was served, or it closed
        self._terminated = False
        self._threads: list[threading.Thread] = []
        self._since = time.monotonic()
        self._final: ServedStats | None = None  # what it served, kept once closed
        for device in self.devices:
            self._start_workers(device, device.streams)
        _LIVE.add(self)

    def _start_workers(self, device: Device, streams: Sequence[Stream]) -> None:
        now = time.monotonic()
        for stream in streams:
            stream.since = now
        threads = [
            threading.Thread(
                target=self._work,
                args=(device, stream),
                name=f"ortplug-serving-{device.label}-{len(self._threads) + index}",
                daemon=True,
            )
            for index, stream in enumerate(streams)
        ]
        self._threads += threads
        for thread in threads:
            thread.start()

    def restream(self, device: Device, streams: Sequence[Stream]) -> bool:
        """Serve ``device`` on ``streams`` from now on: its streams now finish the run they are
        in and stop (no request is dropped: the queue is shared); ``False`` once closed."""
        with self._cond:
            if self._closed is not None or device.dropped is not None:
                return False
            now = time.monotonic()
            for stream in device.streams:
                stream.retired, stream.until = True, now
            device.retired += device.streams
            device.streams = list(streams)
            for stream in device.streams:
                stream.options.terminate = self._terminated
            self._start_workers(device, device.streams)
            self._cond.notify_all()
        return True

    def serve_latency(self, device: Device, stream: Stream | None) -> bool:
        """Serve :meth:`run` on the latency path from now on: each caller runs its own request
        on ``stream``'s session, on its own thread (``None``: through the queue and ``device``'s
        streams again); ``False`` once closed."""
        with self._cond:
            if self._closed is not None or device.dropped is not None:
                return False
            now = time.monotonic()
            lone = None if self._lone is None else self._lone[1]  # serves on when run() moves off
            was = None if self._direct is None else self._direct[1]
            if was is not None and was is not lone:
                was.served_s += now - was.since
                was.since, was.until, was.retired = now, now, True
            self._direct = None
            if stream is not None:
                self._as_latency_path(device, stream, now)
                self._direct = (device, stream)
        return True

    def _as_latency_path(self, device: Device, stream: Stream, now: float) -> None:
        """Make ``stream`` ``device``'s latency path, serving from ``now`` unless it serves the
        lone requests already (under the lock)."""
        if device.latency is not None and device.latency is not stream:
            device.retired.append(device.latency)
        device.latency = stream
        if self._lone is None or stream is not self._lone[1]:
            stream.since, stream.until = now, None
        stream.latency, stream.retired = True, False
        stream.options.terminate = self._terminated

    def serve_lone_requests(self, device: Device, stream: Stream) -> bool:
        """Run a :meth:`run` request that finds nothing queued and nothing running on
        ``stream``'s session (the latency path, counted as ``device``'s stream of its own);
        ``False`` once closed or with several devices (the queue spreads requests there)."""
        with self._cond:
            if self._closed is not None or device.dropped is not None or len(self.devices) > 1:
                return False
            self._lone = None  # a path given again serves from now
            self._as_latency_path(device, stream, time.monotonic())
            self._lone = (device, stream)
        return True

    def _take_lone(self) -> tuple[Device, Stream] | None:
        """The lone requests' path, taken when this request and the one before found nothing
        queued or running (under the lock): one caller's traffic, not a gap in many callers'."""
        lone = self._lone
        if lone is None or lone[0].dropped is not None:
            return None
        quiet = not (self._lone_busy or self._queue or any(s.busy for s in lone[0].streams))
        self._quiet_arrivals = self._quiet_arrivals + 1 if quiet else 0
        if self._quiet_arrivals < LONE_AFTER:  # a gap between many callers' requests
            return None
        self._lone_busy = True
        return lone

    @property
    def on_latency_path(self) -> bool:
        """Whether :meth:`run` serves on the latency path now."""
        return self._direct is not None

    def behind(self, name: str, work: Callable[[], None]) -> None:
        """Run ``work`` on a thread of its own (building a layout's sessions) that ``close()``
        waits for, as for the workers: no session is left building as the interpreter exits."""
        thread = threading.Thread(target=work, name=name, daemon=True)
        with self._cond:
            if self._closed is not None:
                return
            self._threads.append(thread)
            thread.start()  # under the lock: close() joins only started threads

    def first_served(self) -> bool:
        """Wait until a request was served or it closed; whether it is open: work that would share
        the CPUs with the first request (building a layout's sessions) waits for it."""
        self._served_once.wait()
        return self._closed is None

    def _one_served(self) -> None:
        """A request was served: what waits in :meth:`first_served` may go on."""
        if not self._served_once.is_set():  # set() takes a lock; the check costs every request less
            self._served_once.set()

    def _every_stream(self) -> list[Stream]:
        return [stream for device in self.devices for stream in device.every_stream()]

    def served(self) -> ServedStats:
        """What it served so far, each device's streams (replaced ones too): rows per second,
        queueing delay, batch fill (:mod:`.stats`); once closed, what it served in all."""
        with self._cond:
            return self._final or self._stats()

    def _stats(self) -> ServedStats:
        """The counters as they stand (under the lock)."""
        now = time.monotonic()
        batching = self._batching
        devices = []
        for device in self.devices:
            streams = device.every_stream()
            devices.append(
                DeviceStats(
                    label=device.label,
                    streams=tuple(_stream_stats(stream, now) for stream in streams),
                    waited_s=sum(s.waited_s for s in streams),
                    max_wait_s=max((s.max_wait_s for s in streams), default=0.0),
                    batch_limit=1 if batching is None else batching.rows_limit(device.max_batch),
                    shared_runs=sum(s.shared_runs for s in streams),
                    filled_rows=sum(s.filled_rows for s in streams),
                )
            )
        return ServedStats(now - self._since, tuple(devices), self.watched)

    # -- callers -------------------------------------------------------------------------------

    def submit(
        self, feed: Mapping[str, Any], names: Sequence[str], run_options: Any = None
    ) -> Future[list[Any]]:
        """Queue a request; its future gets the outputs of ``names`` in order, or the error.

        ``run_options`` (ONNX Runtime ``RunOptions`` of the caller's own) make it run alone with
        them.
        """
        request = _Request(feed, names, run_options, self._batching)
        with self._cond:
            stopped = self._stopped()
            if stopped is not None:
                raise stopped
            self._queue.append(request)
            self._cond.notify_all()
        return request.future

    def run(self, names: Sequence[str], feed: Mapping[str, Any]) -> list[Any]:
        """One request, waited for: the backend's run function under a throughput hint; run on
        the caller's thread when a stream is idle and nothing is queued, or on the latency path
        (always, or for a lone request: module docstring)."""
        direct = self._direct
        if direct is not None:
            return self._run_direct(direct[0], direct[1], names, feed)
        request = _Request(feed, names, None, self._batching)
        with self._cond:  # one lock a request: the lone path is counted and taken here too
            stopped = self._stopped()
            if stopped is not None:
                raise stopped
            lone = self._take_lone()
            idle = None if self._queue or lone is not None else self._idle(request)
            if idle is None and lone is None:
                self._queue.append(request)
                self._cond.notify_all()
        if lone is not None:
            try:
                return self._run_direct(lone[0], lone[1], names, feed)
            finally:
                with self._cond:
                    self._lone_busy = False
        if idle is not None:
            device, stream = idle
            try:
                self._serve(device, stream, [request])
            finally:
                self._release(stream)
        return request.future.result()

    def _run_direct(
        self, device: Device, stream: Stream, names: Sequence[str], feed: Mapping[str, Any]
    ) -> list[Any]:
        """One request on the latency path: run on the caller's thread, then counted."""
        stopped = self._stopped()
        if stopped is not None:
            raise stopped
        found = group_of(self._batching, feed, names)
        rows = found[1] if found is not None and found[1] else 1
        began = time.monotonic()
        try:
            return list(stream.session.run(list(names), dict(feed), stream.options))
        except Exception as exc:
            stopped = self._stopped()
            if stopped is not None:
                raise stopped from exc
            raise
        finally:
            ended = time.monotonic()
            with self._cond:
                stream.requests += 1
                stream.rows += rows
                stream.runs += 1
                stream.busy_s += ended - began
                device.requests += 1
                device.runs += 1
            self._one_served()

    def _idle(self, request: _Request) -> tuple[Device, Stream] | None:
        """An idle stream of a device that would run ``request`` at once, taken (under the lock);
        ``None`` with several devices (each device's workers take their share of the queue)."""
        if len(self.devices) > 1:
            return None
        waits = request.group is not None and self._sharing()
        for device in self.devices:
            if device.dropped is not None or (waits and device.max_delay_s > 0):
                continue
            for stream in device.streams:
                if not stream.busy:
                    stream.busy = True
                    request.future.set_running_or_notify_cancel()
                    full = 0
                    if request.group is not None and self._sharing():
                        assert self._batching is not None  # sharing: the model batches
                        full = self._batching.rows_limit(device.max_batch)
                    self._began(device, stream, [request], request.rows or 1, full)
                    return device, stream
        return None

    def _release(self, stream: Stream) -> None:
        """``stream`` is free again: its worker may take what was queued meanwhile."""
        with self._cond:
            stream.busy = False
            stream.busy_s += time.monotonic() - stream.began
            if self._queue:
                self._cond.notify_all()

    def terminate(self, terminate: bool) -> None:
        """Stop the runs in progress and fail the queued requests (and refuse new ones), or
        accept requests again."""
        with self._cond:
            self._terminated = terminate
            pending = list(self._queue) if terminate else []
            if terminate:
                self._queue.clear()
            streams = self._every_stream()
        for stream in streams:
            stream.options.terminate = terminate
        for request in pending:
            _settle(request, None, RunTerminatedError(_TERMINATED))

    def close(self, why: str) -> None:
        """Fail the queued requests with ``why``, stop the runs in progress, join the workers."""
        with self._cond:
            first = self._closed is None
            if first:
                self._closed = why
                self.stopping.set()
                self._served_once.set()
            pending = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
            streams = self._every_stream()
        if first:
            for stream in streams:
                stream.options.terminate = True
        for request in pending:
            _settle(request, None, BackendClosedError(why))
        current = threading.current_thread()
        deadline = time.monotonic() + EXIT_WAIT_S
        for thread in self._threads:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            if self._final is None:
                self._final = self._stats()
        self._direct = self._lone = None
        for device in self.devices:  # the sessions go now, even while the backend is referenced
            device.streams = []
            device.retired = []
            device.latency = None
        _LIVE.discard(self)

    @property
    def alive(self) -> tuple[Device, ...]:
        """The devices still serving."""
        return tuple(device for device in self.devices if device.dropped is None)

    # -- workers -------------------------------------------------------------------------------

    def _sharing(self) -> bool:
        """Whether requests of a group share runs (the model batches, and none differed)."""
        return self._batching is not None and self.unbatched is None

    def _stopped(self) -> BaseException | None:
        """The error every request gets now: closed or terminated (``None``: serving)."""
        if self._closed is not None:
            return BackendClosedError(self._closed)
        if self._terminated:
            return RunTerminatedError(_TERMINATED)
        return None

    def _work(self, device: Device, stream: Stream) -> None:
        while True:
            batch = self._take(device, stream)
            if batch is None:
                return
            try:
                self._serve(device, stream, batch)
            except BaseException as exc:  # a defect here must not leave a caller waiting
                for request in batch:
                    _settle(request, None, exc)
            finally:
                self._release(stream)

    def _first(self, device: Device) -> _Request | None:
        """Pop the oldest request ``device`` may run (cancelled ones are dropped)."""
        queue = self._queue
        index = 0
        while index < len(queue):
            request = queue[index]
            if device in request.avoid:
                index += 1
                continue
            del queue[index]
            if request.future.running() or request.future.set_running_or_notify_cancel():
                return request
        return None

    def _take(self, device: Device, stream: Stream) -> list[_Request] | None:
        """The next batch for ``stream`` of ``device`` (taken: busy); ``None`` when it is to stop."""
        with self._cond:
            while True:
                if self._closed is not None or device.dropped is not None or stream.retired:
                    return None
                first = None if stream.busy else self._first(device)
                if first is not None:
                    break
                self._cond.wait()
            stream.busy = True
            batch = [first]
            batching = self._batching
            rows, full = first.rows or 1, 0
            if first.group is not None and batching is not None and self._sharing():
                limit = full = batching.rows_limit(device.max_batch)
                if batching.static is None:
                    limit = self._share(device, first, limit)
                deadline = first.queued + device.max_delay_s
                rows = first.rows + self._gather(batch, device, limit - first.rows)
                while rows < limit and self._closed is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                    rows += self._gather(batch, device, limit - rows)
            self._began(device, stream, batch, rows, full)
            return batch

    def _began(
        self, device: Device, stream: Stream, batch: list[_Request], rows: int, full: int
    ) -> None:
        """Count a run of ``rows`` that ``stream`` begins now (under the lock): its requests,
        rows, their queueing delay (at most: its first request's, the oldest), and how full it
        is against ``full`` rows (0: its requests share no run)."""
        now = time.monotonic()
        stream.began = now
        waited = 0.0
        for request in batch:
            waited += now - request.queued
        stream.waited_s += waited
        oldest = now - batch[0].queued
        stream.max_wait_s = max(stream.max_wait_s, oldest)
        stream.requests += len(batch)
        stream.rows += rows
        stream.runs += 1
        if full:
            stream.shared_runs += 1
            stream.filled_rows += rows if rows < full else full
        device.requests += len(batch)
        device.runs += 1

    def _share(self, device: Device, first: _Request, limit: int) -> int:
        """The rows a stream takes of what is queued now: its share beside the device's other
        idle streams (a stream that took it all would leave them idle, its run as long as the
        rows of all), at most ``limit`` (its own stream is idle still, so counted)."""
        idle = sum(1 for stream in device.streams if not stream.busy)
        if idle <= 1:
            return limit
        queued = first.rows + sum(
            r.rows for r in self._queue if r.group == first.group and device not in r.avoid
        )
        return min(limit, max(first.rows, -(-queued // idle)))

    def _gather(self, batch: list[_Request], device: Device, room: int) -> int:
        """Move queued requests of ``batch``'s group that fit in ``room`` rows into it."""
        group = batch[0].group
        added = 0
        kept: deque[_Request] = deque()
        for request in self._queue:
            if request.group != group or device in request.avoid or request.rows > room - added:
                kept.append(request)
            elif request.future.running() or request.future.set_running_or_notify_cancel():
                batch.append(request)
                added += request.rows
        self._queue = kept
        return added

    def _serve(self, device: Device, stream: Stream, batch: list[_Request]) -> None:
        batching = self._batching
        first = batch[0]
        if first.group is None or batching is None or len(batch) == 1:
            self._alone(device, stream, first)
            return
        try:
            shares = self._together(stream, batch, batching.static)
        except NotRowwise as exc:
            self._stop_sharing(f"a batched run could not be split ({exc})")
            for request in batch:
                self._alone(device, stream, request)
            return
        except Exception:
            for request in batch:  # the bad request's caller alone gets its error
                self._alone(device, stream, request)
            return
        rows = sum(request.rows for request in batch)
        key = (device.label, first.group, rows)
        checks = self._checks
        if checks is not None:
            problem = checks.shape_problem(key[:2], first.names, shares[0])
            if problem is not None:
                self._stop_sharing(f"{problem}, on {device.label}")
                for request in batch:
                    self._alone(device, stream, request)
                return
            if not checks.trusted(key):
                self._recheck(device, stream, batch, shares, key)
                return
        for request, outputs in zip(batch, shares):
            self._succeeded(request, outputs)

    def _recheck(
        self,
        device: Device,
        stream: Stream,
        batch: list[_Request],
        shares: list[list[Any]],
        key: tuple[str, Any, int],
    ) -> None:
        """Run each request of a batched run not trusted yet alone: its caller gets that; the
        batch's shares must agree with them, else requests share runs no more."""
        static = self._batching.static if self._batching is not None else None
        alone: list[list[Any] | None] = []
        for request in batch:
            try:
                alone.append(run_alone(stream.session, request.names, request.feed, static,
                                       stream.options))  # fmt: skip
            except Exception as exc:
                self._failed(device, request, exc)
                alone.append(None)
        ran = [(share, single) for share, single in zip(shares, alone) if single is not None]
        problem = shares_problem(batch[0].names, [s for s, _ in ran], [a for _, a in ran], key[2])
        if problem is None:
            assert self._checks is not None
            self._checks.passed(key)
        else:
            self._stop_sharing(f"{problem}, on {device.label}")
        for request, outputs in zip(batch, alone):
            if outputs is not None:
                self._succeeded(request, outputs)

    def _stop_sharing(self, why: str) -> None:
        """Requests share runs no more: said once."""
        with self._cond:
            if self.unbatched is not None:
                return
            self.unbatched = why
        warnings.warn(
            f"the throughput hint runs requests one by one from now on: {why}",
            ServingWarning,
            stacklevel=2,
        )

    def _together(
        self, stream: Stream, batch: list[_Request], static: int | None
    ) -> list[list[Any]]:
        """One run of the batch's rows; each request's outputs."""
        stacked = stack_rows([request.feed for request in batch], static)
        ran = next(iter(stacked.values())).shape[0]
        outputs = stream.session.run(list(batch[0].names), stacked, stream.options)
        return split_rows(outputs, [request.rows for request in batch], ran)

    def _alone(self, device: Device, stream: Stream, request: _Request) -> None:
        batching = self._batching
        try:
            if request.group is not None and batching is not None and batching.static:
                outputs = run_alone(stream.session, request.names, request.feed,
                                    batching.static, stream.options)  # fmt: skip
            else:
                options = request.options or stream.options
                outputs = stream.session.run(list(request.names), dict(request.feed), options)
        except Exception as exc:
            self._failed(device, request, exc)
            return
        self._succeeded(request, outputs)

    def _succeeded(self, request: _Request, outputs: list[Any]) -> None:
        if request.failure is not None:  # it failed alone elsewhere and ran here: that device
            failed, error = request.failure
            self._drop(failed, error)
        _settle(request, list(outputs), None)
        self._one_served()

    def _failed(self, device: Device, request: _Request, error: Exception) -> None:
        """A request failed alone: another device tries it, else its caller gets the error."""
        stopped = self._stopped()
        if stopped is not None:
            _settle(request, None, stopped)
            return
        with self._cond:
            request.avoid.add(device)
            others = [d for d in self.alive if d not in request.avoid]
            if others and self._closed is None:
                if request.failure is None:
                    request.failure = (device, error)
                self._queue.appendleft(request)
                self._cond.notify_all()
                return
        _settle(request, None, error)

    def _drop(self, device: Device, error: BaseException) -> None:
        """Serve no more on ``device`` (it failed what another device ran), unless it is the last."""
        with self._cond:
            if device.dropped is not None or len(self.alive) <= 1:
                return
            cause = " ".join(f"{type(error).__name__}: {error}".split())[:300]
            device.dropped = f"failed at run time ({cause}); its requests ran elsewhere"
            alive = set(self.alive)
            stranded = [r for r in self._queue if alive <= r.avoid]
            for request in stranded:
                self._queue.remove(request)
            self._cond.notify_all()
        for request in stranded:
            _settle(request, None, request.failure[1] if request.failure else error)
        others = ", ".join(d.label for d in self.alive)
        warnings.warn(
            f"{device.label} failed at run time ({cause}); serving on {others} from now on "
            "(its requests ran there)",
            ProviderFallbackWarning,
            stacklevel=2,
        )
