"""What ``ortplug run`` serves a model here: the candidates of a default build, for ``info`` and
``verify``, and the serving layouts throughput builds measured and recorded here, for ``info``
(read by the serving add-on, through :func:`ortplug.addons.addon_name`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..addons import HINTS_GROUP, addon_name, provider_of
from ..backend import OnnxBackend
from ..backend.hints import HINTS
from ..backend.options import Verification
from ..checkpoint import ResolvedCheckpoint
from ..errors import AddonNotInstalledError, OrtplugError, VerificationWarning
from ..host.capabilities import HostCapabilities
from ..pipeline.report import Candidate

if TYPE_CHECKING:
    from ..pipeline.report import ServingSummary

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
) -> dict[str, ServingSummary | None] | str:
    """Per throughput hint, the serving layout its first build of ``checkpoint`` measured on
    this host and recorded (``None``: no build with that hint measured it here yet), read by the
    serving add-on (``ortplug.backend.recorded_serving``); without the add-on, the line that
    says what to install."""
    measured = [hint for hint in HINTS if hint != "latency"]  # the hints whose builds measure
    try:
        recorded_serving = addon_name("ortplug.backend", "recorded_serving")
    except AddonNotInstalledError:
        addon = provider_of(HINTS_GROUP, measured[0])
        assert addon is not None  # the table names the add-on of every shipped hint
        return str(addon.missing(f"performance_hint={measured[0]!r}"))
    found = {hint: recorded_serving(checkpoint, host, hint) for hint in measured}
    return {hint: None if record is None else record[1] for hint, record in found.items()}


def serving_lines(servings: Mapping[str, ServingSummary | None] | str, model: str) -> list[str]:
    """``info``'s lines for :func:`recorded_servings`: each recorded report, or how to measure."""
    if isinstance(servings, str):
        return [f"not available: {servings}"]
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
