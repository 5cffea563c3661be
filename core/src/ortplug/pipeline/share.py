"""A "CUDA session" that runs 95% on CPU is a fallback too: the accelerator-share check."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from ..errors import OptionError, ProviderFallbackWarning, ProviderNotRealizedError
from ..log import user_stacklevel
from ..providers.configs import CPU_EP

if TYPE_CHECKING:
    from .report import ProviderReport

__all__ = ["enforce_share"]


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
