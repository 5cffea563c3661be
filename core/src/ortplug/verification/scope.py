"""Which candidates verification checks: one decision, read without importing the verifier."""

from __future__ import annotations

from typing import Any

from ..checkpoint import ResolvedCheckpoint, Tolerance
from ..providers.configs import CPU_EP
from ..session.plan import SessionPlan

__all__ = ["needs_check"]


def needs_check(
    plan: SessionPlan, candidate: ResolvedCheckpoint, session: Any, verify: bool | Tolerance | None
) -> bool:
    """Whether ``session`` is checked: anything but the CPU provider on the reference weights at
    their precision, unless ``verify=False``."""
    if verify is False:
        return False
    reference = plan.on_reference and candidate.variant is None
    return not reference or list(session.get_providers()) != [CPU_EP]
