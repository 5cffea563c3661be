"""A "CUDA session" that runs 95% on CPU is a fallback too: the accelerator-share check."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from ..errors import OptionError, ProviderFallbackWarning, ProviderNotRealizedError
from ..log import user_stacklevel
from ..providers.configs import CPU_EP

if TYPE_CHECKING:
    from .report import ProviderReport

__all__ = ["enforce_share", "node_counts"]


def node_counts(session: Any) -> dict[str, int]:
    """How many graph nodes each provider of ``session`` took; raises when ONNX Runtime did not
    record the placement (the config entry ``session.record_ep_graph_assignment_info``)."""
    counts: dict[str, int] = {}
    for subgraph in session.get_provider_graph_assignment_info():
        counts[subgraph.ep_name] = counts.get(subgraph.ep_name, 0) + len(subgraph.get_nodes())
    return counts


def enforce_share(report: ProviderReport, minimum: float, *, strict: bool) -> None:
    """Raise (strict) or warn (graceful) when accelerators took less than ``minimum`` of the nodes."""
    if not isinstance(minimum, (int, float)) or isinstance(minimum, bool) or not 0 <= minimum <= 1:
        raise OptionError(f"min_accelerator_share: expected a number from 0 to 1, got {minimum!r}")
    accelerators = [name for name in report.requested if name != CPU_EP]
    share = report.accelerator_share
    if not accelerators or share is None or share >= minimum:
        return
    placed = ", ".join(f"{name} {count}" for name, count in report.nodes.items())
    cause = (
        f"the accelerators took {share:.0%} of the graph's nodes ({placed}), below "
        f"min_accelerator_share={minimum:g}"
    )
    if strict:
        raise ProviderNotRealizedError(report.requested, report.realized, accelerators, cause)
    stacklevel = user_stacklevel()
    warnings.warn(f"mostly on CPU: {cause}", ProviderFallbackWarning, stacklevel=stacklevel)
