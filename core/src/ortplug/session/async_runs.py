"""``run_async`` and ``arun`` on a session, and the callbacks ONNX Runtime's threads are still in,
waited for at exit (one unwound inside ORT aborts the process, exit 134)."""

from __future__ import annotations

import atexit
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
    """Start ``session``'s run on ONNX Runtime's thread pool; ``callback`` gets the outputs by
    name or ``explained`` of ORT's error, after ``ended``. Raises what starting the run raised."""

    def done(results: Any, _user_data: Any, error: str) -> None:
        try:
            ended()
            if error:
                callback(None, explained(RuntimeError(error)))
            else:
                callback(dict(zip(names, results)), None)
        finally:
            finished()

    started()
    try:
        session.run_async(list(names), feed, done, None, run_options)
    except Exception:
        finished()
        ended()
        raise


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
