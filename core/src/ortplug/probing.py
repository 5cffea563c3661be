"""Helpers for host probes that must not endanger the process: run a query in a child interpreter.

Loading a vendor's native library (a GPU driver, an inference SDK) can hang
or crash. Probes that need one run a stdlib-only script with
:func:`run_probe_script`; a timeout, a crash or garbage output becomes an
``error`` fact instead of taking the host down.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["run_probe_script"]


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def run_probe_script(
    script: Path, argument: Mapping[str, Any], *, timeout: float = 10.0
) -> dict[str, Any]:
    """Run ``python -I script '<argument as JSON>'`` and return the JSON object it prints last.

    Never raises for the child's failures: a timeout, a crash or a non-JSON
    answer gives ``{"error": "<what happened>"}``.
    """
    command = [sys.executable, "-I", str(script), json.dumps(dict(argument))]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"{script.name} did not answer within {timeout:g} s"}
    except OSError as exc:
        return {"error": f"{script.name} could not start: {exc}"}
    if completed.returncode < 0:
        return {"error": f"{script.name} crashed ({_signal_name(-completed.returncode)})"}
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        detail = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"{script.name} exited with status {completed.returncode}: {detail}"}
    try:
        answer = json.loads(lines[-1])
    except ValueError:
        return {"error": f"{script.name} printed no JSON answer: {lines[-1][:200]!r}"}
    if not isinstance(answer, dict):
        return {"error": f"{script.name} answered {type(answer).__name__}, expected an object"}
    return answer
