"""Where this process runs in Ray: the CPUs Ray gave it, its node (nothing outside Ray)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["assigned_cpus", "placement", "running_ray"]


def running_ray() -> Any:
    """The ``ray`` module when this process is part of a running Ray instance, else ``None``.

    A Ray process has imported ``ray``; outside Ray (``ortplug batch`` without ``--ray``) it
    is not imported here (about a second)."""
    ray = sys.modules.get("ray")
    return ray if ray is not None and ray.is_initialized() else None


def assigned_cpus() -> int | None:
    ray = running_ray()
    if ray is None:
        return None
    context = ray.get_runtime_context()
    if context.worker.mode != ray.WORKER_MODE:  # the driver: nothing assigned to follow
        return None
    assigned = context.get_assigned_resources()
    cpus = assigned.get("CPU")
    return max(1, int(cpus)) if cpus else None


def placement() -> tuple[str | None, str | None]:
    """This process's Ray node id and IP, or ``(None, None)`` outside Ray."""
    ray = running_ray()
    if ray is None:
        return None, None
    node = ray.get_runtime_context().get_node_id()
    return str(node), str(ray.util.get_node_ip_address())
