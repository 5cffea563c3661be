"""What ``ortplug run`` serves a model here: the candidates of a default build, for ``info`` and ``verify``."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np

from ..backend import OnnxBackend
from ..backend.report import Candidate
from ..checkpoint import ResolvedCheckpoint
from ..errors import OrtplugError, VerificationWarning

__all__ = ["served_candidates"]


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
            with OnnxBackend.from_checkpoint(checkpoint, verify_inputs=given or None) as backend:
                return backend.report.candidates
    except OrtplugError as exc:
        precision = checkpoint.metadata.precision
        return (Candidate((), None, precision, None, None, False, f"no choice: {exc}"),)
