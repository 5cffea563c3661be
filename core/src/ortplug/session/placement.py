"""Where a session's graph nodes landed: the counts per provider and the accelerators' share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..providers.configs import CPU_EP

__all__ = ["accelerator_share", "node_counts", "recorded_node_counts"]


def node_counts(session: Any) -> dict[str, int]:
    """How many graph nodes each provider of ``session`` took; raises when ONNX Runtime did not
    record the placement (the config entry ``session.record_ep_graph_assignment_info``)."""
    counts: dict[str, int] = {}
    for subgraph in session.get_provider_graph_assignment_info():
        counts[subgraph.ep_name] = counts.get(subgraph.ep_name, 0) + len(subgraph.get_nodes())
    return counts


def accelerator_share(counts: Mapping[str, int]) -> float | None:
    """The share of graph nodes that did not land on the CPU provider (``None``: no node counted)."""
    total = sum(counts.values())
    return 1 - counts.get(CPU_EP, 0) / total if total else None


def recorded_node_counts(session: Any) -> dict[str, int]:
    """:func:`node_counts`, or one ``RuntimeError`` saying how to have the placement recorded."""
    try:
        return node_counts(session)
    except Exception as exc:
        raise RuntimeError(
            "node assignment was not recorded for this session: build it with "
            "OnnxBackend.from_checkpoint (or set the session config entry "
            f"'session.record_ep_graph_assignment_info' to '1') ({type(exc).__name__}: {exc})"
        ) from exc
