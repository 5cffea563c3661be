"""Inputs for ``run`` and ``bench``: ``--input NAME=FILE.npy`` arrays, and generated ones for the rest.

Runs that may fail use :func:`quiet_run_options`: ONNX Runtime's own log of the failure
stays off stderr, where the CLI prints the error as one line (``ORTPLUG_DEBUG=1`` keeps it).
Generated ones come from :func:`ortplug.sample_inputs.sample_inputs`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from ..backend import InputSpec
from ..errors import InputValidationError
from ..run_options import RunOptionsConfig
from ._usage import InputArg, UsageError

__all__ = [
    "first_run_error",
    "load_inputs",
    "quiet_run_options",
]


def load_inputs(args: Sequence[InputArg], specs: Sequence[InputSpec]) -> dict[str, np.ndarray]:
    """Load each ``--input``; a name the model lacks, a repeat or an unreadable array is a usage error."""
    names = [spec.name for spec in specs]
    feed: dict[str, np.ndarray] = {}
    for arg in args:
        if arg.name not in names:
            raise UsageError(
                f"--input {arg.name}: expected one of the model's inputs ({', '.join(names)}), "
                f"got {arg.name!r}"
            )
        if arg.name in feed:
            raise UsageError(f"--input {arg.name}: expected once, given twice")
        try:
            feed[arg.name] = np.load(arg.path, allow_pickle=False)
        except ValueError as exc:  # object arrays, truncated files
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UsageError(
                f"--input {arg.name}: expected a numeric array, got {str(arg.path)!r} ({first})"
            ) from exc
    return feed


def first_run_error(
    exc: Exception, given: Mapping[str, np.ndarray], generated: Mapping[str, str]
) -> Exception | None:
    """What to raise when a model's first run failed; ``None``: ``exc`` as it is.

    Given inputs that do not fit the model are a usage error of ``--input``; any failure
    with generated inputs says which were generated and how to pass real ones.
    """
    note = ""
    if generated:
        made = "; ".join(f"{name} {how}" for name, how in generated.items())
        note = (
            f"; inputs were generated ({made}); pass real ones with --input NAME=FILE.npy "
            "(names, types and shapes: ortplug inspect MODEL)"
        )
    if isinstance(exc, InputValidationError) and given:
        return UsageError(f"--input: {exc}{note}")
    return RuntimeError(f"{exc}{note}") if note else None


def quiet_run_options() -> RunOptionsConfig | None:
    """Run options that keep ONNX Runtime's log of a failing run off stderr (unless ORTPLUG_DEBUG)."""
    return None if os.environ.get("ORTPLUG_DEBUG") else RunOptionsConfig(log_severity_level=4)
