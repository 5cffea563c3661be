"""The Ray instance ``ortplug batch --ray`` runs on: joined or started, quiet, failing in one line.

``ray.init()`` joins the cluster named by ``RAY_ADDRESS`` or recorded by
``ray start`` in ``<temp>/ray/ray_current_cluster``, and starts a local
instance when there is neither. A recorded cluster that no longer runs (the
file outlives a crash or a reboot) makes ``ray.init()`` wait for minutes, and
an empty record one Ray cannot parse, so the address is tried first: one that
is none, or where nothing answers, is an error naming where it came from and
what to do.
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
from typing import Any, NamedTuple

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


class _Target(NamedTuple):
    """The cluster ``ray.init()`` will join: its address, where that came from, and the fixes."""

    address: str
    origin: str
    #: What to do when nothing answers there, after "start that cluster".
    if_dead: str
    #: What to do when the address is not one.
    if_invalid: str


def _cluster_to_join() -> _Target | None:
    """The cluster ``ray.init()`` will join; ``None`` when it starts a local instance."""
    named = os.environ.get("RAY_ADDRESS", "")
    if named == "local":
        return None
    if named and named != "auto":
        return _Target(
            named, "from RAY_ADDRESS", "or set RAY_ADDRESS=local", "fix it or set RAY_ADDRESS=local"
        )
    recorded = _address_file()
    try:
        address = recorded.read_text().strip()
    except OSError:
        return None
    return _Target(
        address,
        f"recorded in {recorded} by `ray start`",
        f"delete {recorded} (`ray stop` does too, stopping every Ray process here), "
        "or set RAY_ADDRESS=local",
        f"delete {recorded} or set RAY_ADDRESS=local",
    )


def _host_port(address: str) -> tuple[str, int] | None:
    """``host:port`` out of an address (``ray://`` included); ``None`` for anything else."""
    host, _, port = address.rsplit("://", maxsplit=1)[-1].rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else None


def _check_cluster_answers() -> None:
    """Fail in one line, naming the fix, when the cluster to join is no address or does not answer."""
    target = _cluster_to_join()
    if target is None:
        return
    endpoint = _host_port(target.address)
    if endpoint is None:
        if "://" in target.address:
            return  # a client scheme (``anyscale://...``) that Ray resolves itself
        raise RuntimeError(
            f"{target.address!r} ({target.origin}) is not a Ray address (host:port or "
            f"ray://host:port): {target.if_invalid}"
        )
    try:
        socket.create_connection(endpoint, timeout=_CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RuntimeError(
            f"no Ray cluster answers at {target.address} ({reason}; {target.origin}): "
            f"start that cluster, {target.if_dead}"
        ) from None


@contextlib.contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """Send what Ray prints to ``log``, so errors stay one line and stdout holds the command's answer:
    its processes' file descriptor 2, and the driver's ``sys.stdout`` (where it prints the raylet's
    warnings, whatever ``log_to_driver`` says)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with log.open("ab") as handle:
        os.dup2(handle.fileno(), 2)
    try:
        with log.open("a") as text, contextlib.redirect_stdout(text):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def ray_session() -> Iterator[Any]:
    """Ray, joined or started (see the module docstring), quiet unless ORTPLUG_DEBUG.

    A failure comes out as the ortplug error a worker raised (one line), or as
    Ray's first line with the log file that holds the rest (removed after a run that worked).
    """
    from ortplug.settings import settings

    from .errors import require_ray, worker_error

    ray = require_ray()
    debug = settings().debug
    log = Path(tempfile.gettempdir()) / f"ortplug-batch-ray-{os.getpid()}.log"
    if not ray.is_initialized():
        _check_cluster_answers()
    stage = "Ray did not start"
    with contextlib.ExitStack() as stack:
        if not debug:
            stack.enter_context(_output_to(log))
        try:
            if not ray.is_initialized():
                level = logging.INFO if debug else logging.ERROR
                ray.init(include_dashboard=False, log_to_driver=debug, logging_level=level)
                stack.callback(ray.shutdown)  # before stdout is back: its printer stops first
            stage = "Ray Data failed"
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
            kept = f" (Ray's output: {log})" if _has_output(log) else ""
            raise RuntimeError(f"{stage}: {type(exc).__name__}: {first}{kept}") from None
    log.unlink(missing_ok=True)  # a run that worked leaves nothing behind


def _has_output(log: Path) -> bool:
    """Whether Ray wrote anything to ``log`` (an empty one is removed, not pointed at)."""
    try:
        if log.stat().st_size:
            return True
        log.unlink()
    except OSError:
        pass
    return False
