"""The ``verify`` and ``variants`` commands: outputs checked against the CPU reference; variants built."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import Any

from ..backend._plan import SessionPlan, plan_next, plan_session
from ..backend.report import Candidate
from ..backend._session import create_planned
from ..backend._verified import Verifier
from ..checkpoint import LocalCheckpoint, ResolvedCheckpoint, Tolerance, select_variant
from ..host.environment import configure
from ..plugins.manager import get_plugin_host
from ..providers.configs import CPU_EP
from ..verification.precision_variants import write_variants
from ._json import print_json
from ._providers import resolve_chain
from ._served import served_candidates
from ._usage import UsageError

__all__ = ["variants", "verify"]


def _policy_choices(
    checkpoint: ResolvedCheckpoint,
) -> Iterator[tuple[ResolvedCheckpoint, SessionPlan]]:
    """The policy's choices, best first: its plan, then each fallback verification would take."""
    plan: SessionPlan | None = plan_session(checkpoint, None, None, None, None)
    while plan is not None:
        yield plan.variant or checkpoint, plan
        plan = plan_next(checkpoint, plan, None)


def _explicit_choices(
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
        yield candidate, plan_session(candidate, chain, None, None, None)


def _row(verifier: Verifier, candidate: ResolvedCheckpoint, plan: SessionPlan) -> dict[str, Any]:
    """Build the choice and check it: ``pass``, ``fail``, ``reference`` or ``error`` (not buildable)."""
    row: dict[str, Any] = {
        "variant": candidate.variant,
        "precision": plan.precision or candidate.metadata.precision,
        "chain": [config.kind for config in plan.chain],
    }
    try:
        session = create_planned(candidate, plan, plan.options).session
    except Exception as exc:  # a choice this host cannot build is reported, not fatal
        return {**row, "status": "error", "error": f"{type(exc).__name__}: {exc}"}
    providers = list(session.get_providers())
    if candidate.variant is None and plan.precision is None and providers == [CPU_EP]:
        return {**row, "status": "reference", "providers": providers}
    verdict = verifier.verdict(candidate, plan, session, None if plan.strict else 0.0)
    status = "pass" if verdict.passed else "fail"
    return {
        **row,
        "status": status,
        "providers": providers,
        "verdict": verdict.to_dict(),
        "line": verdict.describe(),
    }


def _detail(row: dict[str, Any]) -> str:
    if row["status"] == "error":
        return str(row["error"])
    if row["status"] == "reference":
        return "the CPU provider on the reference weights is the reference"
    return str(row["line"])


def verify(args: argparse.Namespace) -> int:
    """Check the policy's choices (or a chain on every variant); exit 1 when what is used fails."""
    checkpoint = LocalCheckpoint(args.model).resolve()
    if args.variant and not args.providers:
        raise UsageError("--variant: expected with --providers (the policy picks variants itself)")
    tolerance = Tolerance(*args.tolerance) if args.tolerance else None
    verifier = Verifier(checkpoint, get_plugin_host(), tolerance)
    if args.providers:
        choices = _explicit_choices(checkpoint, resolve_chain(args.providers), args.variant)
    else:
        choices = _policy_choices(checkpoint)
    rows = [_row(verifier, candidate, plan) for candidate, plan in choices]
    usable = [i for i, row in enumerate(rows) if row["status"] in ("pass", "reference")]
    first = usable[0] if usable and not args.providers else None
    # what ortplug run serves: a first build times the verified choices, so verification's
    # first pass may lose to the CPU reference (the build records it: the next run serves it too)
    candidates = () if first is None else served_candidates(checkpoint)
    served = next((c for c in candidates if c.chosen), None)
    chosen = None if served is None else next(
        (i for i, row in enumerate(rows) if _same(row, served)), None
    )
    if args.providers:  # the chain is used on every weights checked: each must build and pass
        failed = any(row["status"] in ("fail", "error") for row in rows)
    else:
        failed = chosen is None
    if args.json:
        print_json(
            {
                "model": str(args.model),
                "inputs": verifier.inputs_origin,
                "choices": rows,
                "chosen": chosen,
                "first_passed": first,
                "served": None if served is None else served.to_dict(),
            }
        )
        return 1 if failed else 0
    for index, row in enumerate(rows):
        weights = f"variant {row['variant']}" if row["variant"] else "reference"
        mark = "  <- chosen" if index == chosen else ""
        print(
            f"{row['status'].upper():<9} {weights} ({row['precision']}) on [{', '.join(row['chain'])}]{mark}"
        )
        print(f"          {_detail(row)}")
    if not args.providers:
        print(f"chosen: {_chosen_line(rows, first, served, candidates, chosen)}")
    return 1 if failed else 0


def _same(row: dict[str, Any], candidate: Candidate) -> bool:
    """Whether ``row`` checked the choice ``candidate`` is (weights, precision and chain)."""
    return (row["variant"], row["precision"], row["chain"]) == (
        candidate.variant,
        candidate.precision,
        list(candidate.chain),
    )


def _chosen_line(
    rows: list[dict[str, Any]],
    first: int | None,
    served: Candidate | None,
    candidates: tuple[Candidate, ...],
    chosen: int | None,
) -> str:
    """Which choice ``ortplug run`` serves, and why when it is not verification's first pass."""
    if first is None:
        return "none passed"
    if served is None:
        return f"none: ortplug run fails here ({candidates[0].reason})"
    if chosen is None:
        return f"none of these: ortplug run serves {served.describe()}"
    line = f"choice {chosen + 1} of {len(rows)}, what ortplug run serves here"
    if chosen == first:
        return line
    overruled = next((c for c in candidates if _same(rows[first], c)), None)
    why = overruled.describe() if overruled is not None else "the build did not weigh it"
    return f"{line}; choice {first + 1} passed verification first, but ortplug run does not serve it: {why}"


def variants(args: argparse.Namespace) -> int:
    """Build the requested variants beside the model and list them in its metadata manifest."""
    precisions = [name for name in ("int8", "fp16") if getattr(args, name)]
    if not precisions:
        raise UsageError("expected --int8 and/or --fp16 (the precisions to build)")
    if not os.environ.get("ORTPLUG_DEBUG"):  # the tools' calibration sessions log advice
        configure(log_severity_level=3)  # at WARNING: errors only, one line each
    checkpoint = LocalCheckpoint(args.model).resolve()
    metadata = write_variants(checkpoint, precisions)
    weights = args.model
    rows = [
        {
            **variant.to_dict(),
            "bytes": (weights.parent / variant.file).stat().st_size,
            "tolerance": variant.effective_tolerance.to_dict(),
        }
        for variant in metadata.variants
    ]
    manifest = weights.with_name(weights.stem + ".metadata.json")
    if args.json:
        print_json({"model": str(weights), "manifest": str(manifest), "variants": rows})
        return 0
    print(f"model     {weights} ({weights.stat().st_size} bytes, fp32 reference)")
    for row in rows:
        tolerance = Tolerance(**row["tolerance"]).describe()
        print(f"variant   {row['name']:<6} {row['file']} ({row['bytes']} bytes, {tolerance})")
    print(f"manifest  {manifest} (check them: ortplug verify {weights})")
    return 0
