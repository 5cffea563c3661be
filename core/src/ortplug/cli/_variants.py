"""The ``verify`` and ``variants`` commands: outputs checked against the CPU reference; variants built."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..checkpoint import LocalCheckpoint, ResolvedCheckpoint, Tolerance, select_variant
from ..errors import GivenInputsError, VerificationWarning
from ..host.environment import configure
from ..pipeline.build_pipeline import BuildPipeline
from ..pipeline.report import Candidate
from ..plugin_host.manager import get_plugin_host
from ..progress import progress, show_progress
from ..providers.configs import CPU_EP
from ..selection import DefaultProviderPolicy
from ..selection.autotune import candidate_labels, choice_label
from ..session.validation import InputChecker
from ..settings import settings
from ..verification.given_inputs import given_problem
from ..verification.precision_variants import CALIBRATION_BATCHES, write_buildable_variants
from ._json import print_json
from ._providers import resolve_chain
from ._served import served_candidates
from ._usage import UsageError
from .inputs import given_usage, load_inputs

if TYPE_CHECKING:
    from ..session.plan import Choice, SessionPlan
    from ..verification.verifier import Verifier

__all__ = ["variants", "verify"]


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


def _row(
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


def _choice_text(choice: tuple[ResolvedCheckpoint, SessionPlan]) -> str:
    """A choice as the progress line names it: its weights and chain."""
    candidate, plan = choice
    weights = f"variant {candidate.variant}" if candidate.variant else "reference"
    return f"{weights} on [{', '.join(config.kind for config in plan.chain)}]"


def _detail(row: dict[str, Any]) -> str:
    if row["status"] == "error":
        return str(row["error"])
    if row["status"] == "reference":
        return "the CPU provider on the reference weights is the reference"
    return str(row["line"])


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
        choices = _explicit_choices(checkpoint, resolve_chain(args.providers), args.variant)
    else:
        choices = _policy_choices(checkpoint)
    with given_usage(), progress("verifying choices", unit="choice") as shown:
        rows = [_row(verifier, c, plan, given) for c, plan in shown.each(choices, _choice_text)]
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
        print(f"          {_detail(row)}")
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


def variants(args: argparse.Namespace) -> int:
    """Build the requested variants beside the model, list them in its metadata manifest, and
    verify each on the CPU provider as ``ortplug verify`` does (one that fails is kept, with a
    warning: ``ortplug run`` serves a variant only where it passes)."""
    precisions = [name for name in ("int8", "fp16") if getattr(args, name)]
    if not precisions:
        raise UsageError("expected --int8 and/or --fp16 (the precisions to build)")
    if not settings().debug:  # the tools' calibration sessions log advice
        configure(log_severity_level=3)  # at WARNING: errors only, one line each
    checkpoint = LocalCheckpoint(args.model).resolve()
    with show_progress(), progress("variants", 1 + len(precisions)) as shown:  # on a terminal
        shown.note(f"building {' and '.join(precisions)}")
        metadata, refused = write_buildable_variants(checkpoint, precisions)
        shown.advance(1 + len(refused))
        precisions = [name for name in precisions if name not in refused]  # the others written
        written = LocalCheckpoint(args.model).resolve()
        verifier = BuildPipeline(written).verifier(get_plugin_host())
        checks = {
            name: _check_written(verifier, written, name)
            for name in shown.each(precisions, lambda name: f"verifying {name} on the CPU")
        }
    # calibration takes the checkpoint's samples and generates the rest, as verification does
    calibration = verifier.inputs_origin if "int8" in precisions else None
    weights = args.model
    rows = [
        {
            **variant.to_dict(),
            "bytes": (weights.parent / variant.file).stat().st_size,
            "tolerance": variant.effective_tolerance.to_dict(),
            "verification": checks.get(variant.name),
        }
        for variant in metadata.variants
    ]
    manifest = weights.with_name(weights.stem + ".metadata.json")
    if args.json:
        print_json(
            {
                "model": str(weights),
                "manifest": str(manifest),
                "calibration_inputs": calibration,
                "variants": rows,
                "not_written": refused,
            }
        )
    else:
        _print_variants(weights, manifest, calibration, rows, refused)
    sys.stdout.flush()  # the warnings follow what was written
    for name, check in checks.items():
        _warn_unserved(name, check, calibration if name == "int8" else None)
    return 0


def _print_variants(
    weights: Path,
    manifest: Path,
    calibration: str | None,
    rows: list[dict[str, Any]],
    refused: Mapping[str, str],
) -> None:
    """``variants``' lines: the model, what int8 calibrated on, each variant and its verdict,
    and each precision asked for that was not written, with why."""
    print(f"model     {weights} ({weights.stat().st_size} bytes, fp32 reference)")
    if calibration is not None:
        print(f"calibrate int8 on {_calibration_text(calibration)}")
    for row in rows:
        tolerance = Tolerance(**row["tolerance"]).describe()
        print(f"variant   {row['name']:<6} {row['file']} ({row['bytes']} bytes, {tolerance})")
        check = row["verification"]
        if check is not None:
            print(f"verdict   {row['name']:<6} {_verdict_text(check)}")
    for name, why in refused.items():
        print(f"skipped   {name:<6} {why.removeprefix(f'{name} variant of {weights}: ')}")
    print(f"manifest  {manifest} (check them on this host's providers: ortplug verify {weights})")


def _check_written(verifier: Verifier, written: ResolvedCheckpoint, name: str) -> dict[str, Any]:
    """The variant just written, verified on the CPU provider (``ortplug verify --providers cpu
    --variant NAME``'s row: every host has the CPU provider)."""
    ((candidate, plan),) = _explicit_choices(written, ["cpu"], name)
    return _row(verifier, candidate, plan)


def _calibration_text(origin: str) -> str:
    """What int8 calibration ran on, by :attr:`Verifier.inputs_origin`."""
    if origin == "carried":
        return "the checkpoint's samples"
    drawn = f"{CALIBRATION_BATCHES} seeded draws of generated inputs"
    if origin == "generated":
        return f"{drawn}: the checkpoint carries no samples (samples/<input>.npy beside the model)"
    return f"the checkpoint's samples, and {drawn} for the inputs they lack"


def _verdict_text(check: dict[str, Any]) -> str:
    """A written variant's check as one line: the verdict, or why it could not be built."""
    if check["status"] == "error":
        return f"could not be verified on the CPU provider: {_detail(check)}"
    return _detail(check)


def _warn_unserved(name: str, check: dict[str, Any], calibration: str | None) -> None:
    """One warning for a variant written that fails verification or cannot be checked here."""
    if check["status"] == "pass":
        return
    hint = ""
    if calibration is not None and calibration != "carried":
        hint = (
            "; it was calibrated on generated inputs: real ones (samples/<input>.npy beside the "
            "model) may make it pass"
        )
    warnings.warn(
        f"{_verdict_text(check)}; variant {name} is kept in the manifest, but ortplug run serves "
        f"a variant only where it passes verification{hint}",
        VerificationWarning,
        stacklevel=2,
    )
