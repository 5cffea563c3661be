"""The ``verify`` command: the policy's choices (or a chain on every variant) checked against the CPU reference."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..checkpoint import LocalCheckpoint, ResolvedCheckpoint, Tolerance
from ..pipeline.build_pipeline import BuildPipeline
from ..pipeline.report import Candidate
from ..plugin_host.manager import get_plugin_host
from ..progress import progress, show_progress
from ..selection import DefaultProviderPolicy
from ..selection.autotune import candidate_labels, choice_label
from ._json import print_json
from ._providers import resolve_chain
from ._served import served_candidates
from ._usage import UsageError
from .choice_rows import check_row, explicit_choices, row_detail
from .inputs import given_usage, load_inputs

if TYPE_CHECKING:
    from ..session.plan import Choice, SessionPlan

__all__ = ["verify"]


def _policy_choices(
    checkpoint: ResolvedCheckpoint,
) -> Iterator[tuple[ResolvedCheckpoint, SessionPlan]]:
    """The policy's choices (the build pipeline's candidates), each prepared when its turn
    comes, in the policy's own order: the choice a first build measured and recorded comes
    first in a build, and numbered so here it made "choice 2 of 2" "choice 1 of 2" the next
    run; which one ``ortplug run`` serves is marked instead."""
    plugins = get_plugin_host()
    untuned = DefaultProviderPolicy(plugins, autotune=False).explain(
        checkpoint.metadata, plugins.host_capabilities(), checkpoint
    )
    order = candidate_labels(untuned)
    pipeline = BuildPipeline(checkpoint)

    def rank(choice: Choice) -> int:
        kinds = [c.kind for c in choice.selection.chain]
        label = choice_label(choice.variant_name, choice.precision, kinds)
        return order.index(label) if label in order else len(order)

    for choice in sorted(pipeline.candidates(), key=rank):  # sorted is stable
        plan = pipeline.prepare(choice)
        yield plan.variant or checkpoint, plan


def _choice_text(choice: tuple[ResolvedCheckpoint, SessionPlan]) -> str:
    """A choice as the progress line names it: its weights and chain."""
    candidate, plan = choice
    weights = f"variant {candidate.variant}" if candidate.variant else "reference"
    return f"{weights} on [{', '.join(config.kind for config in plan.chain)}]"


@show_progress()  # a bar on a terminal's stderr while the choices are built and checked
def verify(args: argparse.Namespace) -> int:
    """Check the policy's choices (or a chain on every variant); exit 1 when what is used fails."""
    checkpoint = LocalCheckpoint(args.model).resolve()
    if args.variant and not args.providers:
        raise UsageError("--variant: expected with --providers (the policy picks variants itself)")
    tolerance = Tolerance(*args.tolerance) if args.tolerance else None
    given = load_inputs(args.input, checkpoint.metadata.input_names)
    verifier = BuildPipeline(checkpoint, verify=tolerance, given=given).verifier(get_plugin_host())
    if args.providers:
        choices = explicit_choices(checkpoint, resolve_chain(args.providers), args.variant)
    else:
        choices = _policy_choices(checkpoint)
    with given_usage(), progress("verifying choices", unit="choice") as shown:
        rows = [
            check_row(verifier, c, plan, given) for c, plan in shown.each(choices, _choice_text)
        ]
    usable = [i for i, row in enumerate(rows) if row["status"] in ("pass", "reference")]
    first = usable[0] if usable and not args.providers else None
    # what ortplug run serves: a first build times the verified choices, so verification's
    # first pass may lose to the CPU reference (the build records it: the next run serves it too)
    candidates = () if first is None else served_candidates(checkpoint, given)
    served = next((c for c in candidates if c.chosen), None)
    chosen = (
        None
        if served is None
        else next((i for i, row in enumerate(rows) if _same(row, served)), None)
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
        print(f"          {row_detail(row)}")
        if row["status"] == "fail" and row["verdict"]["covered"]:  # a pass's line says it
            print(f"          checked on {row['coverage']}")
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
