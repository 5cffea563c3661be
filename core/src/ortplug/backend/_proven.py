"""The proven choice: candidates -> verify -> measure -> serve, once per build.

Candidates are the policy's choices in order (its plan, then each alternative, down
to the CPU provider on the reference weights, the reference). Each one other than the
reference is built and verified (:mod:`._verified`); a failing one is rejected with
one line (a :class:`~ortplug.errors.VerificationWarning` for a policy's chain, a
:class:`~ortplug.errors.VerificationError` for an explicit one) and the next is built.

On the first build of a model on a host the verified candidates (at most
``MAX_MEASURED`` besides the reference) and the reference are timed side by side
(:mod:`._measure`); the fastest serves, and a candidate must beat the reference by
``MARGIN`` to win, so the default is never slower than ONNX Runtime's CPU provider.
The winner is recorded where ``ortplug bench --save`` records
(:mod:`ortplug.selection.autotune`), so later processes build it directly and
measure nothing. ``measure=False`` or ``ORTPLUG_MEASURE=0`` skips the measurement:
the first verified choice serves, as before.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from ..checkpoint import ResolvedCheckpoint, Tolerance
from ..errors import (
    CacheError,
    InputsNotAcceptedError,
    OrtplugCacheWarning,
    OrtplugError,
    VerificationError,
    VerificationWarning,
)
from ..plugins.manager import resolve_plugin_host
from ..providers.configs import CPU_EP
from ..providers.session_options import SessionOptionsConfig
from ..selection import autotune
from ..verification.verdicts import Verdict
from ._measure import interleaved_medians
from ._plan import SessionPlan, choice_text, plan_next, unusable_variant
from ._session import SessionBuild, create_planned
from ._verified import Verifier, needs_check
from .report import Candidate

__all__ = ["ENV_MEASURE", "MARGIN", "MAX_MEASURED", "Proven", "build_proven", "measuring_wanted"]

#: ``ORTPLUG_MEASURE=0`` skips the measured choice (the first verified choice serves).
ENV_MEASURE = "ORTPLUG_MEASURE"
#: Verified candidates timed besides the CPU reference (the policy's leading ones).
MAX_MEASURED = 3
#: A candidate wins over the CPU reference only when its median is at most this share of it.
MARGIN = 0.95


@attrs.frozen
class Proven:
    """What the pipeline serves: the plan, its session and verdict, every candidate weighed, and
    the other verified plans, best first (the run-time fallback's next choices)."""

    plan: SessionPlan
    build: SessionBuild
    verdict: Verdict | None
    candidates: tuple[Candidate, ...]
    fallbacks: tuple[SessionPlan, ...]


@attrs.define
class _Entry:
    """One candidate as the pipeline goes: its plan, session, verdict and what became of it."""

    plan: SessionPlan
    build: SessionBuild | None = None
    verdict: Verdict | None = None
    reason: str = "not tried: an earlier choice serves"
    median_ms: float | None = None
    chosen: bool = False

    @property
    def reference(self) -> bool:
        return self.plan.cpu_reference

    def candidate(self, checkpoint: ResolvedCheckpoint) -> Candidate:
        weights = self.plan.variant or checkpoint
        return Candidate(
            chain=tuple(config.kind for config in self.plan.chain),
            variant=weights.variant,
            precision=self.plan.precision or weights.metadata.precision,
            verdict=self.verdict,
            median_ms=self.median_ms,
            chosen=self.chosen,
            reason=self.reason,
        )


def measuring_wanted(measure: bool | None, environ: Mapping[str, str] = os.environ) -> bool:
    """``measure`` as given, else on unless ``ORTPLUG_MEASURE`` is ``0``/``false``/``no``."""
    if measure is not None:
        return measure
    return environ.get(ENV_MEASURE, "1").strip().lower() not in ("0", "false", "no", "off")


def _plans(
    checkpoint: ResolvedCheckpoint, plan: SessionPlan, options: SessionOptionsConfig | None
) -> list[_Entry]:
    """The plan and every next choice of the policy, planned (nothing is built yet); a choice
    a measured record passed over says what became of it on that build."""
    entries = []
    current: SessionPlan | None = plan
    while current is not None:
        entry = _Entry(current)
        if current.recorded:
            first = "on this model's measured first build here"
            entry.reason = f"not tried: {first}, {current.recorded}"
        entries.append(entry)
        current = plan_next(checkpoint, current, options)
    return entries


def _rejected(checkpoint: ResolvedCheckpoint, entries: list[_Entry], index: int, why: str) -> None:
    """Reject ``entries[index]`` with one line (raise for an explicit chain)."""
    entry = entries[index]
    entry.reason = f"rejected: {why}"
    entry.build = None
    following = next((e.plan for e in entries[index + 1 :]), None)
    if entry.plan.strict:
        raise VerificationError(f"{checkpoint.label}: {why}", entry.verdict)
    after = f"; taking the next choice: {_text(following)}" if following else ""
    warnings.warn(f"{checkpoint.label}: {why}{after}", VerificationWarning, stacklevel=4)


def _label(plan: SessionPlan) -> str:
    """The plan as :func:`~ortplug.selection.autotune.candidate_labels` names a choice."""
    return autotune.choice_label(plan.variant_name, plan.precision, [c.kind for c in plan.chain])


def _text(plan: SessionPlan) -> str:
    return choice_text(plan.variant_name, plan.chain)


def build_proven(
    checkpoint: ResolvedCheckpoint,
    plan: SessionPlan,
    session_options: SessionOptionsConfig | None,
    verify: bool | Tolerance | None,
    *,
    measure: bool,
    min_share: float | None = None,
    reference: SessionBuild | None = None,
    given: Mapping[str, np.ndarray] | None = None,
) -> Proven:
    """Build, verify and (on a first build) time the policy's choices; the one that serves.

    ``reference`` is a CPU session on the reference weights already built (the one a
    startup fallback serves), taken as the reference instead of building another; ``given``
    the inputs to verify on first (``verify_inputs``).
    Raises :class:`VerificationError` for an explicit chain that fails, or when no
    choice passes.
    """
    tolerance = verify if isinstance(verify, Tolerance) else None
    plugins = resolve_plugin_host(plan.plugins)
    verifier = Verifier(checkpoint, plugins, tolerance, session_options, given)
    entries = _plans(checkpoint, plan, session_options)
    ref = next((i for i, e in enumerate(entries) if e.reference), None)
    timed = (
        measure
        and verify is not False
        and not plan.strict
        and not plan.tuned
        and ref is not None
        and ref > 0
    )
    if ref is not None and (timed or reference is not None):
        built = reference or create_planned(
            checkpoint, entries[ref].plan, entries[ref].plan.options
        )
        entries[ref].build = built
        try:
            verifier.use_reference(built.session)
        except InputsNotAcceptedError as exc:  # nothing can be checked: the reference serves
            return _serve_reference(checkpoint, entries, ref, f"nothing could be verified: {exc}")
    served: int | None = None
    verified: list[int] = []
    for index, entry in enumerate(entries):
        if index == ref and entry.build is not None:  # built first, as the reference
            entry.reason = "the CPU reference"
            served = None if timed else index
            break
        if len(verified) >= MAX_MEASURED:
            entry.reason = f"not tried: {MAX_MEASURED} verified choices are timed at most"
            continue
        outcome = _try(checkpoint, entries, index, verifier, verify=verify, min_share=min_share)
        if outcome is None:
            continue
        if not timed or _on_cpu_only(entry):  # a graceful chain that fell back: it serves as is
            served, timed = index, False
            break
        verified.append(index)
    if timed and ref is not None and entries[ref].build is not None:
        served = _measured(checkpoint, entries, verified, ref, verifier)
    if served is None:
        rejected = "; ".join(e.reason for e in entries if e.reason.startswith("rejected"))
        raise VerificationError(
            f"{checkpoint.label}: no choice of the policy passed verification: {rejected}"
        )
    return _result(checkpoint, entries, served, verified, ref)


def _try(
    checkpoint: ResolvedCheckpoint,
    entries: list[_Entry],
    index: int,
    verifier: Verifier,
    *,
    verify: bool | Tolerance | None,
    min_share: float | None,
) -> bool | None:
    """Build and check ``entries[index]``: True when it may serve, ``None`` when rejected."""
    entry = entries[index]
    candidate = entry.plan.variant or checkpoint
    try:
        entry.build = create_planned(candidate, entry.plan, entry.plan.options)
    except OrtplugError as exc:
        if entry.plan.strict or index + 1 == len(entries):
            raise
        if candidate.variant is not None:  # a variant file ONNX Runtime refuses
            entry.reason = f"rejected: variant {candidate.variant!r} cannot be used: {exc}"
            unusable_variant(
                checkpoint.label,
                str(candidate.variant),
                exc,
                _text(entries[index + 1].plan),
                stacklevel=5,
            )
            return None
        _rejected(checkpoint, entries, index, f"{_text(entry.plan)} failed to build: {exc}")
        return None
    session = entry.build.session
    if not needs_check(entry.plan, candidate, session, verify):
        entry.reason = "the CPU reference" if entry.reference else "not verified (verify=False)"
        if list(session.get_providers()) == [CPU_EP] and not entry.reference:
            entry.reason = "realized on the CPU provider only"
        return True
    share = None if entry.plan.strict else (min_share or 0.0)
    entry.verdict = verifier.verdict(candidate, entry.plan, session, share)
    if not entry.verdict.passed:
        _rejected(checkpoint, entries, index, entry.verdict.describe())
        return None
    entry.reason = "verified"
    return True


def _on_cpu_only(entry: _Entry) -> bool:
    """A choice with an accelerator that ONNX Runtime realized on the CPU provider alone."""
    build = entry.build
    return (
        build is not None
        and entry.plan.on_reference
        and list(build.session.get_providers()) == [CPU_EP]
    )


def _measured(
    checkpoint: ResolvedCheckpoint,
    entries: list[_Entry],
    verified: list[int],
    ref: int,
    verifier: Verifier,
) -> int:
    """Time the verified candidates with the reference; record and return the winner's index."""
    pool = [i for i in verified if entries[i].build is not None]
    entries[ref].reason = "the CPU reference"
    if pool:
        runs = [verifier.timed_run(_session(entries[i])) for i in (*pool, ref)]
        medians = interleaved_medians(runs)
        for i, median in zip((*pool, ref), medians):
            entries[i].median_ms = median
    reference_ms = entries[ref].median_ms
    winner = ref
    for i in sorted(pool, key=lambda i: entries[i].median_ms or 0.0):
        ms = entries[i].median_ms
        if ms is not None and reference_ms is not None and ms <= MARGIN * reference_ms:
            winner = i
            break
        entries[i].reason = "verified, not faster than the CPU reference"
    for i in pool:
        if i != winner and entries[i].reason == "verified":
            entries[i].reason = "verified, slower than the chosen one"
    _record(checkpoint, entries, winner, reference_ms)
    return winner


def _session(entry: _Entry) -> Any:
    if entry.build is None:
        raise AssertionError("a timed candidate is built")  # pragma: no cover
    return entry.build.session


def _record(
    checkpoint: ResolvedCheckpoint, entries: list[_Entry], winner: int, reference_ms: float | None
) -> None:
    """The winner, where ``bench --save`` records: later processes build it directly (while the
    policy offers the same candidates)."""
    entry = entries[winner]
    median = entry.median_ms or 0.0
    speedup = (reference_ms / median) if reference_ms and median else 1.0
    setting = autotune.TunedSetting(
        chain=tuple(config.kind for config in entry.plan.chain),
        intra_op_num_threads=None,
        speedup=min(max(speedup, 1e-6), 1e6),
        median_ms=median,
        variant=entry.plan.variant_name,
        offered=tuple(_label(e.plan) for e in entries),
        precision=entry.plan.precision,
        outcomes=tuple("chosen" if e is entry else e.reason for e in entries),
    )
    try:
        autotune.save(checkpoint.reference or checkpoint, entry.plan.host, setting)
    except CacheError as exc:
        warnings.warn(
            f"the measured choice is not recorded: {exc}", OrtplugCacheWarning, stacklevel=5
        )


def _serve_reference(
    checkpoint: ResolvedCheckpoint, entries: list[_Entry], ref: int, why: str
) -> Proven:
    entries[ref].reason = f"the CPU reference ({why})"
    for entry in entries[:ref]:
        entry.reason = "not tried: nothing could be verified"
    return _result(checkpoint, entries, ref, [], ref)


def _result(
    checkpoint: ResolvedCheckpoint,
    entries: list[_Entry],
    served: int,
    verified: list[int],
    ref: int | None,
) -> Proven:
    """The served entry, and the other verified ones (fastest first, the reference last)."""
    entry = entries[served]
    entry.chosen = True
    if entry.median_ms is not None and not entry.reference:
        entry.reason = "verified, the fastest"
    others = sorted(
        (i for i in verified if i != served), key=lambda i: entries[i].median_ms or float("inf")
    )
    if ref is not None and ref != served:
        others.append(ref)
    if entry.build is None:
        raise AssertionError("a served candidate is built")  # pragma: no cover
    return Proven(
        plan=entry.plan,
        build=entry.build,
        verdict=entry.verdict,
        candidates=tuple(e.candidate(checkpoint) for e in entries),
        fallbacks=tuple(entries[i].plan for i in others),
    )
