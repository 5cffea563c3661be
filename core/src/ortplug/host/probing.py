"""Helpers for host probes that must not endanger the process: a vendor library's query runs in a
child interpreter, and a timeout or crash becomes an ``error`` fact."""

from __future__ import annotations

import json
import os
import site
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "LOADER_PATH_VARIABLES",
    "file_identity",
    "library_search_dirs",
    "probe_environment",
    "run_probe_script",
    "site_package_dirs",
    "system_library_identity",
]


#: Search paths the dynamic loader reads once, at a process's start (``:``- or ``;``-separated).
LOADER_PATH_VARIABLES = ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH")


def library_search_dirs(value: str | None) -> list[str]:
    """The absolute folders of a loader search path such as ``LD_LIBRARY_PATH``: an empty or
    relative entry (the current directory, where a library may be planted) is dropped."""
    entries = (value or "").replace(";", ":").split(":")
    return [entry for entry in entries if os.path.isabs(entry)]


def probe_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (this process's by default) for a probe's child: loader search paths
    reduced to :func:`library_search_dirs` (a variable left with none is removed)."""
    env = dict(os.environ if environ is None else environ)
    if sys.platform == "win32":
        return env
    for name in LOADER_PATH_VARIABLES:
        if name in env:
            kept = library_search_dirs(env.pop(name))
            if kept:
                env[name] = ":".join(kept)
    return env


def _signal_name(number: int) -> str:
    import signal  # deferred: a crashed probe only

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def run_probe_script(
    script: Path, argument: Mapping[str, Any], *, timeout: float = 10.0
) -> dict[str, Any]:
    """Run ``python -I script '<argument as JSON>'`` and return the JSON object it prints last; a
    timeout, a crash or a non-JSON answer gives ``{"error": "<what happened>"}``."""
    import subprocess  # deferred: ~4 ms, paid only when a probe runs (not when its facts are cached)

    command = [sys.executable, "-I", str(script), json.dumps(dict(argument))]
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=probe_environment()
        )
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


def file_identity(paths: Iterable[str | os.PathLike[str]]) -> list[list[object]]:
    """``[path, mtime_ns, size]`` of each path (``[path]`` when absent): for ``HostProbe.identity``.

    A replaced library, driver or wheel folder changes it, so a cached probe runs again.
    """
    identity: list[list[object]] = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            identity.append([str(path)])
            continue
        identity.append([str(path), info.st_mtime_ns, info.st_size])
    return identity


def system_library_identity(variables: Iterable[str] = ()) -> dict[str, object]:
    """What decides which system libraries a probe finds: the loader's cache and search path.

    Plus the named environment variables (``CUDA_VISIBLE_DEVICES``...). Cheap: a few stats.
    """
    watched = ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "PATH", *variables)
    return {
        "loader": file_identity(["/etc/ld.so.cache"]),
        "environment": {name: os.environ.get(name) for name in watched},
    }


def site_package_dirs() -> list[str]:
    """The ``sys.path`` entries that are this interpreter's site-packages folders, absolute: where a
    probe may look for wheels' libraries (never the current directory)."""
    known = [*site.getsitepackages(), *(sysconfig.get_path(k) for k in ("purelib", "platlib"))]
    if site.ENABLE_USER_SITE:
        known.append(site.getusersitepackages())
    real = {os.path.realpath(k) for k in known if k and os.path.isabs(k)}
    return [e for e in sys.path if os.path.isabs(e) and os.path.realpath(e) in real]
