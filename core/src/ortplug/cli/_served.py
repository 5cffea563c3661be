"""What ``ortplug run`` serves a model here: the candidates of a default build, for ``info`` and ``verify``."""

from __future__ import annotations

import warnings

from ..backend import OnnxBackend
from ..backend.report import Candidate
from ..checkpoint import ResolvedCheckpoint
from ..errors import OrtplugError, VerificationWarning

__all__ = ["served_candidates"]


def served_candidates(checkpoint: ResolvedCheckpoint) -> tuple[Candidate, ...]:
    """``backend.report.candidates`` of a default build of ``checkpoint``, as ``ortplug run``
    builds it (verified, timed on a first build and recorded, so the next run serves the same);
    a rejection is a row, not a warning; a build that fails is one row saying why."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", VerificationWarning)
            with OnnxBackend.from_checkpoint(checkpoint) as backend:
                return backend.report.candidates
    except OrtplugError as exc:
        precision = checkpoint.metadata.precision
        return (Candidate((), None, precision, None, None, False, f"no choice: {exc}"),)
