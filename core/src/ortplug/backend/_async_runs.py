"""``run_async`` callbacks that ONNX Runtime's threads are still in, waited for at exit.

A callback runs Python on an ONNX Runtime thread. When the interpreter exits while one is
still running (a fire-and-forget ``run_async``, or the tail of the callback that settled an
``await backend.arun(...)``), that thread is unwound inside ONNX Runtime, which aborts the
process ("FATAL: exception not rethrown", exit 134). So the interpreter waits for them at exit.
"""

from __future__ import annotations

import atexit
import threading

__all__ = ["EXIT_WAIT_S", "finished", "started", "wait"]

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
