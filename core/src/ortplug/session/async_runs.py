"""``run_async`` and ``arun`` on a session (on a thread of ortplug's where ORT has no intra-op
pool), and the callbacks ONNX Runtime's threads are still in, waited for at exit."""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["EXIT_WAIT_S", "RunCallback", "awaited", "finished", "run_async", "started", "wait"]

#: How long the interpreter waits at exit for callbacks still running.
EXIT_WAIT_S = 30.0

_idle = threading.Condition()
_running = 0
_hooked = False


def started() -> None:
    """A run was handed to ONNX Runtime; its callback will come."""
    global _running, _hooked
    with _idle:
        _running += 1
        if not _hooked:
            atexit.register(wait, EXIT_WAIT_S)
            _hooked = True


def finished() -> None:
    """A callback returned (or its run was never started)."""
    global _running
    with _idle:
        _running -= 1
        if not _running:
            _idle.notify_all()


def wait(timeout: float | None = None) -> bool:
    """Wait until no callback is running; ``False`` when ``timeout`` passed first."""
    with _idle:
        return _idle.wait_for(lambda: not _running, timeout)


#: Called with the outputs, or with the error that stopped the run; exactly one is ``None``.
RunCallback = Callable[[Mapping[str, Any] | None, BaseException | None], None]


def run_async(
    session: Any,
    names: Sequence[str],
    feed: Mapping[str, Any],
    run_options: Any,
    callback: RunCallback,
    explained: Callable[[BaseException], BaseException],
    ended: Callable[[], None],
) -> None:
    """Start ``session``'s run on ONNX Runtime's thread pool (on a thread of ortplug's for a
    session without one); ``callback`` gets the outputs by name or ``explained`` of ORT's error,
    after ``ended``. Raises what starting the run raised."""

    def settle(outputs: Mapping[str, Any] | None, error: BaseException | None) -> None:
        try:
            ended()
            if error is not None:
                callback(None, explained(error))
            else:
                callback(outputs, None)
        finally:
            finished()

    def done(results: Any, _user_data: Any, error: str) -> None:
        if error:
            settle(None, RuntimeError(error))
        else:
            settle(dict(zip(names, results)), None)

    started()
    try:
        if _has_intra_op_pool(session):
            session.run_async(list(names), feed, done, None, run_options)
        else:
            run = (session, names, feed, run_options, settle)
            threading.Thread(target=_run_on_thread, args=run, name="ortplug-run-async").start()
    except Exception:
        finished()
        ended()
        raise


def _has_intra_op_pool(session: Any) -> bool:
    """Whether ONNX Runtime gave ``session`` an intra-op thread pool (it makes none for one
    thread: its own count, or the default's one per core on a one-core host)."""
    threads = session.get_session_options().intra_op_num_threads
    return (threads or os.cpu_count() or 1) > 1


def _run_on_thread(
    session: Any,
    names: Sequence[str],
    feed: Mapping[str, Any],
    run_options: Any,
    settle: Callable[[Mapping[str, Any] | None, BaseException | None], None],
) -> None:
    """One run of ``session`` on the calling thread, its outputs or its error settled."""
    try:
        results = session.run(list(names), feed, run_options)
    except Exception as error:
        settle(None, error)
    else:
        settle(dict(zip(names, results)), None)


async def awaited(start: Callable[[RunCallback], None]) -> Mapping[str, Any]:
    """``await`` a run that ``start(callback)`` begins; the event loop stays free meanwhile."""
    import asyncio  # deferred: ~20 ms that synchronous users never need

    loop = asyncio.get_running_loop()
    future: asyncio.Future[Mapping[str, Any]] = loop.create_future()

    def settle(result: Mapping[str, Any] | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result or {})

    def callback(result: Mapping[str, Any] | None, error: BaseException | None) -> None:
        loop.call_soon_threadsafe(settle, result, error)

    start(callback)
    return await future
