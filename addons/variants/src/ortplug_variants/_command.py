"""``ortplug variants`` run: the variants written beside the model, each verified on the CPU
provider as ``ortplug verify --providers cpu --variant NAME`` does."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortplug.checkpoint import LocalCheckpoint, ResolvedCheckpoint, Tolerance
from ortplug.cli.arguments import UsageError, print_json
from ortplug.cli.choice_rows import check_row, explicit_choices, row_detail
from ortplug.errors import VerificationWarning
from ortplug.host.environment import configure
from ortplug.pipeline.build_pipeline import BuildPipeline
from ortplug.plugin_host.manager import get_plugin_host
from ortplug.progress import progress, show_progress
from ortplug.settings import settings

from .writing import CALIBRATION_BATCHES, write_buildable_variants

if TYPE_CHECKING:
    from ortplug.verification.verifier import Verifier

__all__ = ["variants"]


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
    ((candidate, plan),) = explicit_choices(written, ["cpu"], name)
    return check_row(verifier, candidate, plan)


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
        return f"could not be verified on the CPU provider: {row_detail(check)}"
    return row_detail(check)


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
