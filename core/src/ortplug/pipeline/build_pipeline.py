"""The build pipeline: candidates -> prepare -> verify -> measure -> serve, once per build
(the stages, the measuring and the record: docs/internals.md, "The path of a build")."""

from __future__ import annotations

import enum
import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import attrs

from ..checkpoint import ResolvedCheckpoint, Tolerance
from ..checkpoint.variants import default_tolerance
from ..errors import OptionError, OrtplugError, VerificationError, VerificationWarning
from ..log import user_stacklevel
from ..progress import progress
from ..providers.configs import CPU_EP
from ..selection import autotune
from ..session.build import SessionBuild, create_planned
from ..session.plan import Choice, SessionPlan, choices, metadata_warnings, prepare
from ..settings import settings

if TYPE_CHECKING:
    import numpy as np

    from ..plugin_host.manager import PluginHost
    from ..providers.session_options import SessionOptionsConfig
    from ..verification.verdicts import Verdict
    from ..verification.verifier import Verifier
    from .report import Candidate, ProviderReport
    from .traffic_check import TrafficCheck

__all__ = [
    "MARGIN",
    "MAX_MEASURED",
    "BuildPipeline",
    "BuildResult",
    "CandidateOutcome",
    "ServeChange",
    "Served",
    "ServingBackend",
    "measuring_wanted",
]

#: Verified candidates timed besides the CPU reference (the policy's leading ones).
MAX_MEASURED = 3
#: A candidate wins over the CPU reference only when its median is at most this share of it.
MARGIN = 0.95


class CandidateOutcome(enum.Enum):
    """What became of one candidate of a build (its display reason says more)."""

    NOT_TRIED = "not tried"
    REFERENCE = "the CPU reference"
    VERIFIED = "verified"
    UNVERIFIED = "not verified"
    REJECTED = "rejected"
    UNUSABLE = "unusable"  # a variant file ONNX Runtime refuses


def measuring_wanted(measure: bool | None) -> bool:
    """``measure`` as given, else the process's setting (``ORTPLUG_MEASURE``, on by default)."""
    return settings().measure if measure is None else measure


@attrs.frozen
class BuildResult:
    """What a build serves: the plan, its session and verdict, every candidate weighed with its
    outcome, the other verified plans (best first: the run-time fallback's next choices), and
    the candidates as decided (a cumulative throughput build weighs them again)."""

    origin: ResolvedCheckpoint  # the checkpoint asked for (the served plan may run a variant)
    plan: SessionPlan
    build: SessionBuild
    verdict: Verdict | None = None
    candidates: tuple[Candidate, ...] = ()
    outcomes: tuple[CandidateOutcome, ...] = ()  # one per candidate
    fallbacks: tuple[SessionPlan, ...] = ()
    choice: Choice | None = attrs.field(default=None, eq=False, repr=False)  # the served one
    choices: tuple[Choice, ...] = attrs.field(default=(), eq=False, repr=False)
    #: The CPU reference's plan and session where the build made one (to serve it meanwhile).
    reference: tuple[SessionPlan, SessionBuild] | None = attrs.field(
        default=None, eq=False, repr=False
    )

    @property
    def weights(self) -> ResolvedCheckpoint:
        """The weights the served session reads."""
        return self.plan.variant or self.origin

    @property
    def lossy(self) -> bool:
        """Whether what serves was verified at a looser tolerance than the reference's precision
        (an int8, fp16 or bf16 variant, a reduced-precision mode, a loosened tolerance) on inputs
        that are not all real data (generated ones): it proves itself on real requests first.
        A variant the caller selected (``select_variant``) is the caller's choice: not lossy."""
        verdict = self.verdict
        if verdict is None or not verdict.passed or "generated" not in verdict.inputs:
            return False
        if self.origin.variant is not None:
            return False
        precision = self.origin.metadata.precision
        own = default_tolerance(precision)
        looser = verdict.tolerance.rtol > own.rtol or verdict.tolerance.atol > own.atol
        return looser or verdict.precision != precision


class ServeChange(NamedTuple):
    """One change of what a backend serves, through its seam (every field optional).

    ``result``: take its verdict, candidates and fallbacks; with ``switch`` also serve its
    session from the next run on. ``failed``: the session that failed; serve ``instead``
    (default: the next verified choice) in its place. ``watch``: the check shown every run
    from now on (``None``: none; left as is unless ``set_watch``). ``candidates``: the
    report's candidate lines, replaced. (A named tuple, as :class:`Served`: a message
    between the backend's modules, not a value users hold; an attrs class costs every
    process ~0.5 ms to make at import.)
    """

    result: BuildResult | None = None
    switch: bool = False
    failed: Any = None
    instead: SessionPlan | None = None
    set_watch: bool = False
    watch: TrafficCheck | None = None
    candidates: tuple[Candidate, ...] | None = None


class Served(NamedTuple):
    """What a backend serves after a change: ``moved`` says whether the change took (False: the
    backend is closed, or no choice could be built); its plan, session and candidate lines."""

    moved: bool
    plan: SessionPlan | None
    session: Any
    candidates: tuple[Candidate, ...]


class ServingBackend(Protocol):
    """What the startup switch and the run-time checks see of a backend: one seam."""

    @property
    def closed(self) -> bool: ...

    @property
    def providers(self) -> tuple[str, ...]: ...

    @property
    def report(self) -> ProviderReport: ...

    def serve(self, change: ServeChange) -> Served: ...


@attrs.define(eq=False)
class _Entry:
    """One candidate as the pipeline goes: its choice, plan once prepared, session, verdict,
    and what became of it."""

    choice: Choice
    plan: SessionPlan | None = None
    build: SessionBuild | None = None
    verdict: Verdict | None = None
    outcome: CandidateOutcome = CandidateOutcome.NOT_TRIED
    reason: str = "not tried: an earlier choice serves"
    median_ms: float | None = None
    chosen: bool = False

    @property
    def reference(self) -> bool:
        return self.choice.cpu_reference

    def settle(self, outcome: CandidateOutcome, reason: str) -> None:
        self.outcome, self.reason = outcome, reason

    def candidate(self, checkpoint: ResolvedCheckpoint) -> Candidate:
        from .report import Candidate  # the report's values: only where candidates are weighed

        weights = self.choice.variant or checkpoint
        return Candidate(
            chain=tuple(config.kind for config in self.choice.selection.chain),
            variant=weights.variant,
            precision=self.choice.precision or weights.metadata.precision,
            verdict=self.verdict,
            median_ms=self.median_ms,
            chosen=self.chosen,
            reason=self.reason,
        )


def _label(choice: Choice) -> str:
    """The choice as :func:`~ortplug.selection.autotune.candidate_labels` names it."""
    kinds = [c.kind for c in choice.selection.chain]
    return autotune.choice_label(choice.variant_name, choice.precision, kinds)


@attrs.define(eq=False)
class BuildPipeline:
    """The stages of one build of ``checkpoint``, each an explicit step, run in order by
    :meth:`run` (or :meth:`reference` + :meth:`prove` behind a startup fallback): a worker,
    compared by identity."""

    checkpoint: ResolvedCheckpoint
    session_options: SessionOptionsConfig | None = None
    verify: bool | Tolerance | None = None
    measure: bool = True
    min_share: float | None = None
    given: Mapping[str, np.ndarray] | None = None

    # -- 1. candidates ---------------------------------------------------------------------

    def candidates(
        self,
        providers: Sequence[Any] | None = None,
        policy: object | None = None,
        plugins: PluginHost | None = None,
    ) -> tuple[Choice, ...]:
        """The candidates, best first (pure: no plugin prepares anything); ``verify=False``
        keeps the policy to its choices on the reference weights at their precision."""
        listed = tuple(choices(self.checkpoint, providers, policy, plugins))
        metadata_warnings(self.checkpoint, listed[0].plugins)
        if self.verify is False:
            on_reference = next((c for c in listed if c.on_reference), None)
            if on_reference is None:
                raise OptionError(
                    f"verify=False: expected a choice of the policy on the reference weights of "
                    f"{self.checkpoint.label} at their precision, got only variants or "
                    "reduced-precision modes (an unverified one is not used); pass verify=None "
                    "or True"
                )
            return (on_reference,)
        return listed

    def verifier(self, plugins: PluginHost | None = None) -> Verifier:
        """The verify stage's worker: checks candidates against the CPU reference."""
        from ..plugin_host.manager import resolve_plugin_host
        from ..verification.verifier import Verifier

        tolerance = self.verify if isinstance(self.verify, Tolerance) else None
        host = resolve_plugin_host(plugins)
        return Verifier(self.checkpoint, host, tolerance, self.session_options, self.given)

    # -- 2. prepare and build ----------------------------------------------------------------

    def prepare(self, choice: Choice) -> SessionPlan:
        """The plugins finish ``choice``'s chain and options: it is about to be built."""
        return prepare(self.checkpoint, choice, self.session_options)

    def build(self, plan: SessionPlan) -> SessionBuild:
        """The session ``plan`` describes."""
        return create_planned(plan.variant or self.checkpoint, plan, plan.options)

    def reference(self, built: BuildResult | None = None) -> BuildResult:
        """The CPU reference alone (what a startup fallback serves at once): the one ``built``
        made, else built now."""
        if built is not None and built.reference is not None:
            plan, build = built.reference
            return BuildResult(self.checkpoint, plan, build)
        choice = next(choices(self.checkpoint, [CPU_EP], None, None))
        plan = self.prepare(choice)
        return BuildResult(
            self.checkpoint, plan, self.build(plan), choice=choice, choices=(choice,)
        )

    # -- the whole build ---------------------------------------------------------------------

    def run(self, listed: Sequence[Choice]) -> BuildResult:
        """Every stage in order for the candidates ``listed``; what serves."""
        first = listed[0]
        if self.verify is False or (
            len(listed) == 1 and first.cpu_reference and self.checkpoint.variant is None
        ):  # nothing to prove: the opt-out, or the CPU reference is the only choice
            plan = self.prepare(first)
            build = self.build(plan)
            result = BuildResult(self.checkpoint, plan, build, choice=first, choices=tuple(listed))
            if self.verify is False or first.strict:
                return result
            from .report import Candidate

            only = Candidate(("cpu",), None, self.checkpoint.metadata.precision, None, None, True,
                             "the CPU reference, the only choice offered")  # fmt: skip
            return attrs.evolve(result, candidates=(only,), outcomes=(CandidateOutcome.REFERENCE,))
        return self.prove(listed)

    def prove(self, listed: Sequence[Choice], reference: BuildResult | None = None) -> BuildResult:
        """Build, verify and (on a first build) time the candidates; the one that serves.

        ``reference`` is a CPU session on the reference weights already built (the one a
        startup fallback serves), taken as the reference instead of building another.
        Raises :class:`VerificationError` for an explicit chain that fails, or when no
        choice passes.
        """
        from ..errors import InputsNotAcceptedError

        verifier = functools.cache(lambda: self.verifier(listed[0].plugins))  # built if needed
        entries = [_Entry(choice) for choice in listed]
        for entry in entries:
            if entry.choice.selection.recorded:
                measured = "on this model's measured first build here"
                entry.reason = f"not tried: {measured}, {entry.choice.selection.recorded}"
        ref = next((i for i, e in enumerate(entries) if e.reference), None)
        first = listed[0]
        timed = (
            self.measure
            and not first.strict
            and not first.selection.tuned
            and ref is not None
            and ref > 0
        )
        if ref is not None and (timed or reference is not None):
            entry = entries[ref]
            entry.plan = self.prepare(entry.choice) if reference is None else reference.plan
            entry.build = self.build(entry.plan) if reference is None else reference.build
            try:
                verifier().use_reference(entry.build.session)
            except InputsNotAcceptedError as exc:  # nothing can be checked: the reference serves
                return self._serve_reference(entries, ref, f"nothing could be verified: {exc}")
        served: int | None = None
        verified: list[int] = []
        title = f"verifying {self.checkpoint.label}"
        with progress(title, len(entries), unit="choice") as shown:  # a bar where one was asked
            for index, entry in enumerate(shown.each(entries, _choice_text)):
                if index == ref and entry.build is not None:  # built first, as the reference
                    entry.settle(CandidateOutcome.REFERENCE, "the CPU reference")
                    served = None if timed else index
                    break
                if len(verified) >= MAX_MEASURED:
                    entry.reason = f"not tried: {MAX_MEASURED} verified choices are timed at most"
                    continue
                if not self._verified(entries, index, verifier):
                    continue
                if not timed or _on_cpu_only(entry):  # a graceful chain that fell back: it serves
                    served, timed = index, False
                    break
                verified.append(index)
            if timed and ref is not None and entries[ref].build is not None:
                shown.note("timing the verified choices against the CPU reference")
                served = self.measured(entries, verified, ref, verifier())
        if served is None:
            rejected = "; ".join(
                e.reason
                for e in entries
                if e.outcome in (CandidateOutcome.REJECTED, CandidateOutcome.UNUSABLE)
            )
            raise VerificationError(
                f"{self.checkpoint.label}: no choice of the policy passed verification: {rejected}"
            )
        return self.serve(entries, served, verified, ref)

    # -- 3. verify ---------------------------------------------------------------------------

    def _verified(
        self, entries: list[_Entry], index: int, verifier: Callable[[], Verifier]
    ) -> bool:
        """Prepare, build and check ``entries[index]``: True when it may serve."""
        from ..verification.scope import needs_check

        entry = entries[index]
        choice = entry.choice
        weights = choice.variant or self.checkpoint
        following = entries[index + 1].choice if index + 1 < len(entries) else None
        try:
            entry.plan = self.prepare(choice)
            entry.build = self.build(entry.plan)
        except OrtplugError as exc:
            if choice.strict or following is None:
                raise
            if weights.variant is not None:  # a variant file ONNX Runtime refuses
                from ..session.plan import unusable_variant

                why = f"rejected: variant {weights.variant!r} cannot be used: {exc}"
                entry.settle(CandidateOutcome.UNUSABLE, why)
                unusable_variant(self.checkpoint.label, str(weights.variant), exc, following.text)
                return False
            self._reject(entries, index, f"{choice.text} failed to build: {exc}")
            return False
        session = entry.build.session
        if not needs_check(entry.plan, weights, session, self.verify):
            if entry.reference:
                entry.settle(CandidateOutcome.REFERENCE, "the CPU reference")
            elif list(session.get_providers()) == [CPU_EP]:
                entry.settle(CandidateOutcome.UNVERIFIED, "realized on the CPU provider only")
            else:
                entry.settle(CandidateOutcome.UNVERIFIED, "not verified (verify=False)")
            return True
        share = None if choice.strict else (self.min_share or 0.0)
        entry.verdict = verifier().verdict(weights, entry.plan, session, share)
        if not entry.verdict.passed:
            self._reject(entries, index, entry.verdict.describe())
            return False
        entry.settle(CandidateOutcome.VERIFIED, "verified")
        return True

    def _reject(self, entries: list[_Entry], index: int, why: str) -> None:
        """Reject ``entries[index]`` with one line (raise for an explicit chain)."""
        entry = entries[index]
        entry.settle(CandidateOutcome.REJECTED, f"rejected: {why}")
        entry.build = None
        label = self.checkpoint.label
        if entry.choice.strict:
            raise VerificationError(f"{label}: {why}", entry.verdict)
        following = entries[index + 1].choice if index + 1 < len(entries) else None
        after = f"; taking the next choice: {following.text}" if following else ""
        warnings.warn(f"{label}: {why}{after}", VerificationWarning, stacklevel=user_stacklevel())

    # -- 4. measure --------------------------------------------------------------------------

    def measured(
        self, entries: list[_Entry], verified: list[int], ref: int, verifier: Verifier
    ) -> int:
        """Time the verified candidates with the reference; record and return the winner's index."""
        from .measure import interleaved_medians

        pool = [i for i in verified if entries[i].build is not None]
        entries[ref].settle(CandidateOutcome.REFERENCE, "the CPU reference")
        if pool:
            runs = [verifier.timed_run(_session(entries[i])) for i in (*pool, ref)]
            for i, median in zip((*pool, ref), interleaved_medians(runs)):
                entries[i].median_ms = median
        reference_ms = entries[ref].median_ms
        fastest_first = sorted(pool, key=lambda i: entries[i].median_ms or 0.0)
        winner = next((i for i in fastest_first if _wins(entries[i], reference_ms)), ref)
        for i in pool:
            if i != winner:
                entries[i].reason = (
                    "verified, not faster than the CPU reference"
                    if winner == ref
                    else "verified, slower than the chosen one"
                )
        self._record(entries, winner, reference_ms)
        return winner

    def _record(self, entries: list[_Entry], winner: int, reference_ms: float | None) -> None:
        """The winner, where ``bench --save`` records: later processes build it directly (while
        the policy offers the same candidates)."""
        from ..errors import CacheError, OrtplugCacheWarning

        entry = entries[winner]
        median = entry.median_ms or 0.0
        speedup = (reference_ms / median) if reference_ms and median else 1.0
        setting = autotune.TunedSetting(
            chain=tuple(config.kind for config in entry.choice.selection.chain),
            intra_op_num_threads=None,
            speedup=min(max(speedup, 1e-6), 1e6),
            median_ms=median,
            variant=entry.choice.variant_name,
            offered=tuple(_label(e.choice) for e in entries),
            precision=entry.choice.precision,
            outcomes=tuple("chosen" if e is entry else e.reason for e in entries),
        )
        try:
            autotune.save(self.checkpoint.reference or self.checkpoint, entry.choice.host, setting)
        except CacheError as exc:
            warnings.warn(
                f"the measured choice is not recorded: {exc}",
                OrtplugCacheWarning,
                stacklevel=user_stacklevel(),
            )

    def prepared(self, result: BuildResult) -> list[SessionPlan]:
        """Every candidate of ``result``, prepared (the served one is its plan): the devices a
        cumulative throughput build may serve on."""
        return [
            result.plan if choice is result.choice else self.prepare(choice)
            for choice in result.choices
        ]

    # -- 5. serve ----------------------------------------------------------------------------

    def _serve_reference(self, entries: list[_Entry], ref: int, why: str) -> BuildResult:
        entries[ref].settle(CandidateOutcome.REFERENCE, f"the CPU reference ({why})")
        for entry in entries[:ref]:
            entry.settle(CandidateOutcome.NOT_TRIED, "not tried: nothing could be verified")
        return self.serve(entries, ref, [], ref)

    def serve(
        self, entries: list[_Entry], served: int, verified: list[int], ref: int | None
    ) -> BuildResult:
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
        fallbacks = tuple(entries[i].plan or self.prepare(entries[i].choice) for i in others)
        return BuildResult(
            origin=self.checkpoint,
            plan=_planned(entry),
            build=_built(entry),
            verdict=entry.verdict,
            candidates=tuple(e.candidate(self.checkpoint) for e in entries),
            outcomes=tuple(e.outcome for e in entries),
            fallbacks=() if entry.choice.strict else fallbacks,
            choice=entry.choice,
            choices=tuple(e.choice for e in entries),
            reference=_reference_of(entries, ref),
        )


def _choice_text(entry: _Entry) -> str:
    """The choice ``entry`` tries, for the progress line."""
    return entry.choice.text


def _reference_of(
    entries: list[_Entry], ref: int | None
) -> tuple[SessionPlan, SessionBuild] | None:
    entry = None if ref is None else entries[ref]
    if entry is None or entry.plan is None or entry.build is None:
        return None
    return entry.plan, entry.build


def _wins(entry: _Entry, reference_ms: float | None) -> bool:
    """Whether ``entry`` beats the CPU reference by the margin a candidate needs to serve."""
    ms = entry.median_ms
    return ms is not None and reference_ms is not None and ms <= MARGIN * reference_ms


def _on_cpu_only(entry: _Entry) -> bool:
    """A choice with an accelerator that ONNX Runtime realized on the CPU provider alone."""
    build = entry.build
    return (
        build is not None
        and entry.choice.on_reference
        and list(build.session.get_providers()) == [CPU_EP]
    )


def _planned(entry: _Entry) -> SessionPlan:
    if entry.plan is None:
        raise AssertionError("a built candidate is prepared")  # pragma: no cover
    return entry.plan


def _built(entry: _Entry) -> SessionBuild:
    if entry.build is None:
        raise AssertionError("a served candidate is built")  # pragma: no cover
    return entry.build


def _session(entry: _Entry) -> Any:
    return _built(entry).session
