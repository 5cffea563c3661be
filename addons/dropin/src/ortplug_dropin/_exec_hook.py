"""What ``ortplug exec``'s start-up hook does in the program: patch, and report at exit.

Read from the environment ``ortplug exec`` sets: ``ORTPLUG_EXEC_TAKEOVER`` (the takeover rule)
and ``ORTPLUG_EXEC_REPORT`` (the process id of the program ``ortplug exec`` started; any value
asks for the report, and that process says so also when it built no session).
"""

from __future__ import annotations

import os
import sys

from .patching import Patch, patch

__all__ = ["start"]


def start() -> None:
    """Apply the patch (before ONNX Runtime's import) and register the exit report."""
    try:
        current = patch(os.environ.get("ORTPLUG_EXEC_TAKEOVER", "cpu"))
    except ValueError as exc:
        sys.stderr.write(f"ortplug exec: {exc}; not patched\n")
        return
    report = os.environ.get("ORTPLUG_EXEC_REPORT")
    if report:
        import atexit

        atexit.register(_report, current, report == str(os.getpid()))


def _report(current: Patch, started: bool) -> None:
    """One line per session built: model, chain, why (on stderr, where the program's output isn't)."""
    lines = [f"ortplug: session {record.line()}" for record in current.sessions]
    if not lines and started:
        lines = ["ortplug: no ONNX Runtime session was built"]
    for line in lines:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
