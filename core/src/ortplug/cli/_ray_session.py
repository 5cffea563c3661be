"""The Ray instance ``ortplug batch --ray`` runs on: joined or started, quiet, failing in one line.

``ray.init()`` joins the cluster named by ``RAY_ADDRESS`` or recorded by
``ray start`` in ``<temp>/ray/ray_current_cluster``, and starts a local
instance when there is neither. A recorded cluster that no longer runs (the
file outlives a crash or a reboot) makes ``ray.init()`` wait for minutes, so
the address is tried first and a dead one is an error naming where it came
from and what to do.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["ray_session"]

#: How long the recorded cluster may take to accept a connection before it counts as gone.
_CONNECT_TIMEOUT_S = 3.0


def _address_file() -> Path:
    """Where ``ray start`` records its cluster (Ray's own rule for its temp folder)."""
    base = os.environ.get("RAY_TMPDIR") or (
        os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None
    )
    if not base:
        base = "/tmp" if sys.platform.startswith(("linux", "darwin")) else tempfile.gettempdir()
    return Path(base) / "ray" / "ray_current_cluster"


def _cluster_to_join() -> tuple[str, str] | None:
    """The address ``ray.init()`` will join, where it came from and the fix; ``None``: local."""
    named = os.environ.get("RAY_ADDRESS", "")
    if named and named not in ("auto", "local"):
        return named, "from RAY_ADDRESS): start that cluster, or unset RAY_ADDRESS"
    if named == "local":
        return None
    recorded = _address_file()
    try:
        address = recorded.read_text().strip()
    except OSError:
        return None
    origin = (
        f"recorded in {recorded} by `ray start`): start that cluster, forget it with `ray stop`, "
        "or set RAY_ADDRESS=local"
    )
    return (address, origin) if address else None


def _host_port(address: str) -> tuple[str, int] | None:
    """``host:port`` out of an address (``ray://`` included); ``None`` for anything else."""
    host, _, port = address.rsplit("://", maxsplit=1)[-1].rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else None


def _check_cluster_answers() -> None:
    """Fail in one line, naming the fix, when the cluster to join does not accept connections."""
    target = _cluster_to_join()
    if target is None:
        return
    address, origin = target
    endpoint = _host_port(address)
    if endpoint is None:
        return  # not host:port: Ray says what is wrong with it
    try:
        socket.create_connection(endpoint, timeout=_CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RuntimeError(f"no Ray cluster answers at {address} ({reason}; {origin}") from None


@contextlib.contextmanager
def _stderr_to(log: Path) -> Iterator[None]:
    """Send what Ray's processes print to ``log`` (file descriptor 2), so errors stay one line."""
    sys.stderr.flush()
    saved = os.dup(2)
    with log.open("ab") as handle:
        os.dup2(handle.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def ray_session() -> Iterator[Any]:
    """Ray, joined or started (see the module docstring), quiet unless ORTPLUG_DEBUG.

    A failure comes out as the ortplug error a worker raised (one line), or as
    Ray's first line with the log file that holds the rest.
    """
    from ..integrations.ray import require_ray, worker_error

    ray = require_ray()
    debug = bool(os.environ.get("ORTPLUG_DEBUG"))
    log = Path(tempfile.gettempdir()) / f"ortplug-batch-ray-{os.getpid()}.log"
    if not ray.is_initialized():
        _check_cluster_answers()
    with contextlib.ExitStack() as stack:
        if not debug:
            stack.enter_context(_stderr_to(log))
        try:
            if not ray.is_initialized():
                level = logging.INFO if debug else logging.ERROR
                ray.init(include_dashboard=False, log_to_driver=debug, logging_level=level)
            context = ray.data.DataContext.get_current()
            context.raise_original_map_exception = True  # the worker's BatchError, not a wrapper
            context.enable_progress_bars = debug
            context.execution_options.preserve_order = True
            yield ray
        except Exception as exc:
            if debug:
                raise
            found = worker_error(exc)
            if found is not None:
                raise found from None
            first = next(iter(str(exc).strip().splitlines()), "")
            raise RuntimeError(
                f"Ray Data failed: {type(exc).__name__}: {first} (Ray's output: {log})"
            ) from None
