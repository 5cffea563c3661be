"""What ``ortplug run`` serves a model here: the candidates of a default build, for ``info`` and
``verify``, and the serving layouts throughput builds measured and recorded here, for ``info``."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..backend import OnnxBackend
from ..backend.options import Verification
from ..checkpoint import ResolvedCheckpoint
from ..errors import OrtplugError, VerificationWarning
from ..host.capabilities import HostCapabilities
from ..pipeline.report import Candidate

if TYPE_CHECKING:
    from ..backend import ServingReport

__all__ = ["recorded_servings", "served_candidates", "serving_lines"]


def served_candidates(
    checkpoint: ResolvedCheckpoint, given: Mapping[str, np.ndarray] | None = None
) -> tuple[Candidate, ...]:
    """``backend.report.candidates`` of a default build of ``checkpoint``, as ``ortplug run``
    builds it (verified, on the ``--input`` arrays ``given`` first; timed on a first build and
    recorded, so the next run serves the same); a rejection is a row, not a warning; a build
    that fails is one row saying why."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", VerificationWarning)
            with OnnxBackend.from_checkpoint(
                checkpoint, verify=Verification(inputs=given or None)
            ) as backend:
                return backend.report.candidates
    except OrtplugError as exc:
        precision = checkpoint.metadata.precision
        return (Candidate((), None, precision, None, None, False, f"no choice: {exc}"),)


def recorded_servings(
    checkpoint: ResolvedCheckpoint, host: HostCapabilities
) -> dict[str, ServingReport | None]:
    """Per throughput hint, the serving layout its first build of ``checkpoint`` measured on
    this host and recorded (``None``: no build with that hint measured it here yet)."""
    from ..backend import HINTS, recorded_serving

    measured = [hint for hint in HINTS if hint != "latency"]  # the hints whose builds measure
    found = {hint: recorded_serving(checkpoint, host, hint) for hint in measured}
    return {hint: None if record is None else record[1] for hint, record in found.items()}


def serving_lines(servings: Mapping[str, ServingReport | None], model: str) -> list[str]:
    """``info``'s lines for :func:`recorded_servings`: each recorded report, or how to measure."""
    lines: list[str] = []
    for report in servings.values():
        if report is not None:
            lines += report.lines()
    if not lines:
        lines.append(
            "not measured here yet: the first build with performance_hint='throughput' "
            f"measures and records it (ortplug bench {model} --hint throughput)"
        )
    return lines
