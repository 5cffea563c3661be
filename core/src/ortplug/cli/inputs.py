"""Inputs for ``run``, ``bench`` and ``verify``: ``--input NAME=FILE.npy`` arrays, and generated
ones for the rest."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from ..backend import OnnxBackend
from ..checkpoint import ResolvedCheckpoint
from ..errors import GivenInputsError, InputsNotAcceptedError, InputValidationError
from ..providers.configs import CPU_EP
from ..providers.run_options import RunOptionsConfig
from ..settings import settings
from ..verification.sample_inputs import (
    AcceptedInputs,
    GeneratedFeed,
    accepted_inputs,
    candidate_feeds,
    carried_samples,
)
from ._usage import InputArg, UsageError

__all__ = [
    "first_run",
    "first_run_error",
    "given_usage",
    "load_inputs",
    "quiet_run_options",
    "reference_feed",
]


def load_inputs(args: Sequence[InputArg], names: Sequence[str]) -> dict[str, np.ndarray]:
    """Load each ``--input``; a name the model lacks (``names``: its inputs), a repeat or an
    unreadable array is a usage error."""
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


@contextlib.contextmanager
def given_usage() -> Iterator[None]:
    """``--input`` arrays that verification finds do not fit the model: a usage error."""
    try:
        yield
    except GivenInputsError as exc:
        raise UsageError(f"--input: {exc.problem}") from exc


@contextlib.contextmanager
def first_run(
    given: Mapping[str, np.ndarray],
    generated: Mapping[str, str],
    failures: type[Exception] | tuple[type[Exception], ...] = Exception,
) -> Iterator[None]:
    """A model's first run: ``failures`` raised as :func:`first_run_error` words them."""
    try:
        yield
    except failures as exc:
        error = first_run_error(exc, given, generated)
        if error is None:
            raise
        raise error from exc


def first_run_error(
    exc: Exception, given: Mapping[str, np.ndarray], generated: Mapping[str, str]
) -> Exception | None:
    """What to raise when a model's first run failed (``None``: ``exc`` as it is): a usage error
    of ``--input``, or which inputs were generated and how to pass real ones."""
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
    return None if settings().debug else RunOptionsConfig(log_severity_level=4)


def reference_feed(
    checkpoint: ResolvedCheckpoint, backend: OnnxBackend, given: Mapping[str, np.ndarray]
) -> GeneratedFeed:
    """``given``, the checkpoint's samples for inputs not given, and generated inputs the CPU runs
    (searched on ``backend`` when CPU-only); none runs: the first, to fail with its message."""
    given = {**carried_samples(checkpoint), **given}
    extra = checkpoint.metadata.extra
    candidates = candidate_feeds(backend.input_specs, extra, given)
    first = next(candidates)
    if next(candidates, None) is None:
        return first
    quiet = quiet_run_options()
    told = _tell_tries if sys.stderr is not None and sys.stderr.isatty() else None
    try:
        on_cpu = list(backend.providers) == [CPU_EP]  # else a CPU backend of its own, closed after
        with (
            contextlib.nullcontext(backend)
            if on_cpu
            else OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"])
        ) as cpu:
            accepted = accepted_inputs(
                lambda feed: cpu.run(feed, run_options=quiet), cpu.input_specs, extra, given, told
            )
    except InputsNotAcceptedError:
        return first
    if accepted.degenerate:
        _warn_degenerate(accepted)
    return GeneratedFeed(accepted.feed, accepted.generated, accepted.degenerate)


def _tell_tries(candidate: GeneratedFeed) -> None:
    """A size about to be tried, on a terminal (a big one the model refuses can take seconds)."""
    print(f"ortplug: trying generated inputs on the CPU reference: {candidate.describe()}",
          file=sys.stderr, flush=True)  # fmt: skip


def _warn_degenerate(accepted: AcceptedInputs) -> None:
    """One warning: the sizes the CPU reference refused and why (each reason once), and that
    what runs is degenerate."""
    made = "; ".join(f"{name} {how}" for name, how in accepted.generated.items())
    refused: dict[str, list[str]] = {}
    for feed, why in accepted.rejected:
        refused.setdefault(why, []).append(f"[{feed}]")
    tried = "; ".join(f"{' '.join(feeds)}: {why}" for why, feeds in refused.items())
    warnings.warn(
        f"latency is for a degenerate input ({made}): the CPU reference refused the "
        f"representative sizes tried ({tried}); pass real data with --input NAME=FILE.npy",
        RuntimeWarning,
        stacklevel=3,
    )
