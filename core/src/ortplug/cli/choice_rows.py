"""A choice's verification row (JSON-ready), as ``ortplug verify`` prints it, for the core's command
and the add-ons that check what they build."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..checkpoint import ResolvedCheckpoint, select_variant
from ..errors import GivenInputsError
from ..pipeline.build_pipeline import BuildPipeline
from ..providers.configs import CPU_EP
from ..session.validation import InputChecker
from ..verification.given_inputs import given_problem
from ._usage import UsageError

if TYPE_CHECKING:
    from ..session.plan import SessionPlan
    from ..verification.verifier import Verifier

__all__ = ["check_row", "explicit_choices", "row_detail"]


def explicit_choices(
    checkpoint: ResolvedCheckpoint, chain: list[Any], variant: str | None
) -> Iterator[tuple[ResolvedCheckpoint, SessionPlan]]:
    """The chain on the reference weights and on each variant (or on ``variant`` only)."""
    known = [v.name for v in checkpoint.metadata.variants]
    if variant is not None and variant not in known:
        raise UsageError(
            f"--variant: expected one of the variants of {checkpoint.label} "
            f"({', '.join(known) or 'it has none'}), got {variant!r}"
        )
    names = [variant] if variant else [None, *known]
    for name in names:
        candidate = checkpoint if name is None else select_variant(checkpoint, name)
        pipeline = BuildPipeline(candidate)
        yield candidate, pipeline.prepare(pipeline.candidates(chain)[0])


def _require_fitting(session: Any, given: Mapping[str, np.ndarray]) -> None:
    """Raise :class:`~ortplug.errors.GivenInputsError` (``--input: ...`` under
    :func:`given_usage`) when ``given`` does not fit the reference ``session``'s inputs: the
    verifier checks them only when it verifies a candidate, and a model without variants has
    none on a CPU-only host (a wrong shape or dtype was accepted)."""
    problem = given_problem(InputChecker.from_session(session).inputs, given) if given else None
    if problem is not None:
        raise GivenInputsError(problem)


def check_row(
    verifier: Verifier,
    candidate: ResolvedCheckpoint,
    plan: SessionPlan,
    given: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Build the choice and check it: ``pass``, ``fail``, ``reference`` or ``error`` (not
    buildable); ``given`` (``--input``) must fit the reference."""
    row: dict[str, Any] = {
        "variant": candidate.variant,
        "precision": plan.precision or candidate.metadata.precision,
        "chain": [config.kind for config in plan.chain],
    }
    try:
        session = BuildPipeline(candidate).build(plan).session
    except Exception as exc:  # a choice this host cannot build is reported, not fatal
        return {**row, "status": "error", "error": f"{type(exc).__name__}: {exc}"}
    providers = list(session.get_providers())
    if candidate.variant is None and plan.precision is None and providers == [CPU_EP]:
        _require_fitting(session, given or {})
        return {**row, "status": "reference", "providers": providers}
    verdict = verifier.verdict(candidate, plan, session, None if plan.strict else 0.0)
    status = "pass" if verdict.passed else "fail"
    return {
        **row,
        "status": status,
        "providers": providers,
        "verdict": verdict.to_dict(),
        "line": verdict.describe(),
        "coverage": verdict.coverage(),
    }


def row_detail(row: dict[str, Any]) -> str:
    """The row's second line: the verdict, why it could not be built, or that it is the reference."""
    if row["status"] == "error":
        return str(row["error"])
    if row["status"] == "reference":
        return "the CPU provider on the reference weights is the reference"
    return str(row["line"])
