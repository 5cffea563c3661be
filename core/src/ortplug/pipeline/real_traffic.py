"""Startup fallback on real traffic: a candidate serves only after it agreed with the CPU
reference on real requests, and is spot-checked while it serves (design and exposure bound:
docs/internals.md)."""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .. import log as _log
from ..checkpoint import ResolvedCheckpoint, Tolerance
from ..errors import (
    OptionError,
    OrtplugConfigWarning,
    VerificationError,
    VerificationWarning,
)
from ..log import user_stacklevel
from ..plugin_host.manager import resolve_plugin_host
from ..session.plan import SessionPlan, StalePlanError, choice_text
from ..settings import Settings, settings
from ..verification.verifier import Verifier
from .build_pipeline import BuildResult, ServeChange, Served, ServingBackend
from .report import Candidate
from .switch_state import Proving, StartupSwitch, TrafficSettings, did_not_come_up
from .traffic_check import AliasedOutputs, Request, TrafficCheck

if TYPE_CHECKING:
    from ..verification.verdicts import Verdict

__all__ = [
    "DECAY",
    "hand_over",
    "traffic_settings",
]

#: ``ORTPLUG_REAL_TRAFFIC_CHECKS=N``: agreeing real requests before a candidate serves.
_CHECKS = "ORTPLUG_REAL_TRAFFIC_CHECKS"
#: ``ORTPLUG_SPOT_CHECK=0.01``: the share of a serving candidate's calls run again on the CPU.
_SPOT_CHECK = "ORTPLUG_SPOT_CHECK"
#: Requests waiting for the shadow at most; the ones beyond are served and not checked.
_SHADOW_QUEUE = 4
#: The share of one CPU's time the spot check may take (once its sampled share decayed).
_SPOT_CHECK_CPU_SHARE = 0.1
#: ``W`` of the spot check's sampled share ``max(p, W / (W + n - 1))`` at the n-th call after a
#: takeover: every call at first, half of them at the (W+1)-th.
DECAY = 16
_REFERENCE = "the CPU reference"

#: ``_startup``'s switch: (backend, result, switch) -> whether the result's session serves now.
_SwitchTo = Callable[[ServingBackend, BuildResult, StartupSwitch], bool]


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _share(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return None
    return float(value)


def _given(given: object, name: str, valid: Callable[[object], Any], expected: str) -> Any:
    """The argument ``name`` checked: a bad one raises one line."""
    value = valid(given)
    if value is None:
        raise OptionError(f"{name}: expected {expected}, got {given!r}")
    return value


def _from_settings(current: Settings, variable: str, value: float) -> Any:
    """The settings' value, said once when its variable was refused (its default then)."""
    problem = current.problem(variable)
    if problem is not None:
        warnings.warn(
            f"{problem}: ignored, using {value}", OrtplugConfigWarning, stacklevel=user_stacklevel()
        )
    return value


def traffic_settings(
    checks: object, spot_check: object, current: Settings | None = None
) -> TrafficSettings:
    """``real_traffic_checks`` and ``spot_check`` as given, else the process's settings
    (``ORTPLUG_REAL_TRAFFIC_CHECKS``, ``ORTPLUG_SPOT_CHECK``: 8 requests, a share of 0.01)."""
    current = settings() if current is None else current
    return TrafficSettings(
        _from_settings(current, _CHECKS, current.real_traffic_checks)
        if checks is None
        else _given(checks, "real_traffic_checks", _count, "a whole number of requests >= 0"),
        _from_settings(current, _SPOT_CHECK, current.spot_check)
        if spot_check is None
        else _given(spot_check, "spot_check", _share, "a share of calls from 0 to 1"),
    )


def hand_over(
    backend: ServingBackend,
    proven: BuildResult,
    proving: Proving,
    switch: StartupSwitch,
    switch_to: _SwitchTo,
) -> bool:
    """Let ``proven``'s verified candidate take over from the CPU reference ``backend`` serves
    on: after it agreed on real requests (True: shadowing, ``switch`` settles when that ends),
    or at once when none are asked for or it was not verified (False)."""
    if switch.exiting:  # nothing new starts while the interpreter exits
        return False
    pipeline = proving.pipeline
    tolerance = pipeline.verify if isinstance(pipeline.verify, Tolerance) else None
    plugins = resolve_plugin_host(proven.plan.plugins)
    origin = proven.origin
    verifier = Verifier(origin, plugins, tolerance, given=pipeline.given)  # verdicts' cache key
    handover = _Handover(weakref.ref(backend), origin, proven, proving, verifier, switch, switch_to)
    if proving.traffic.checks and proven.verdict is not None:
        handover.shadow(backend)
        return True
    if proven.verdict is not None:
        after = "once verified (real_traffic_checks=0)"
    else:  # nothing to check against the reference (realized on the CPU provider only)
        after = "at once: " + next(c.reason for c in proven.candidates if c.chosen)
    handover.take_over(backend, after)
    return False


def _on_real_request(verdict: Verdict) -> str:
    """A verdict from one real request as one line naming the request once (its failure does;
    :meth:`Verdict.describe` repeated it after each output, as "on on real inputs: ...")."""
    outputs = "; ".join(f"output {c.name!r}: {c.violation}" for c in verdict.checks if c.violation)
    failed = f"{verdict.subject()} failed verification {verdict.failure or 'on real inputs'}"
    return f"{failed}: {outputs}" if outputs else failed


def _is_reference(candidate: Candidate, precision: str) -> bool:
    return (
        candidate.chain == ("cpu",)
        and candidate.variant is None
        and candidate.verdict is None
        and candidate.precision == precision
    )


@attrs.define(eq=False)
class _Handover:
    """A verified candidate taking over from the CPU reference: shadowed on real requests, then
    serving (spot-checked), or rejected. Holds the backend weakly: its threads must not keep it."""

    backend: weakref.ReferenceType[ServingBackend]
    origin: ResolvedCheckpoint
    proven: BuildResult
    proving: Proving
    verifier: Verifier
    switch: StartupSwitch
    switch_to: _SwitchTo
    agreed: int = 0

    @property
    def text(self) -> str:
        return choice_text(self.proven.plan.variant_name, self.proven.plan.chain)

    def _status(self) -> str:
        needed = self.proving.traffic.checks
        return (
            f"the CPU reference serves while {self.text} shadows it on real requests: "
            f"{self.agreed} of {needed} agreed (it serves after {needed})"
        )

    def shadow(self, backend: ServingBackend) -> None:
        """Run the requests ``backend`` serves on the candidate too, from now on."""
        precision = self.origin.metadata.precision
        shadowed = "verified; shadows the CPU reference on real requests before it serves"
        candidates = tuple(
            attrs.evolve(c, chosen=False, reason=shadowed)
            if c.chosen
            else attrs.evolve(c, chosen=True, reason=f"{_REFERENCE} (serves while it is shadowed)")
            if _is_reference(c, precision)
            else c
            for c in self.proven.candidates
        )
        backend.serve(ServeChange(candidates=candidates))
        self.switch.status = self._status()
        check = TrafficCheck(
            self.proven.build.session,
            self._judge,
            name="ortplug-shadow",
            capacity=_SHADOW_QUEUE,
            ended=self.switch.settle,
        )
        self.switch.traffic = check
        weakref.finalize(backend, check.stop, wait=False)
        if not backend.serve(ServeChange(set_watch=True, watch=check)).moved:  # closed meanwhile
            check.stop()

    def _judge(self, request: Request, outcome: Mapping[str, Any] | Exception) -> bool:
        backend = self.backend()
        if backend is None or backend.closed:
            return False
        plan = self.proven.plan
        if not isinstance(outcome, Exception):
            problem = self.verifier.disagreement(
                plan.variant or self.origin, plan.precision, request.outputs, outcome
            )
            if problem is None:
                self.agreed += 1
                self.switch.status = self._status()
                if self.agreed < self.proving.traffic.checks:
                    return True
                agreed = f"after agreeing with the CPU reference on {self.agreed} real requests"
                self.take_over(backend, agreed)
                if self.switch.switched:
                    _log.warning("%s: %s", self.origin.label, self.switch.status)
                return False
        self._reject(backend, request, outcome)
        return False

    def _reject(
        self, backend: ServingBackend, request: Request, outcome: Mapping[str, Any] | Exception
    ) -> None:
        """Keep the CPU reference serving for good, and say why in one line."""
        served = backend.serve(ServeChange(set_watch=True, watch=None))
        plan = self.proven.plan
        reference, outcome = self._every_output(request, outcome)
        verdict = self.verifier.on_real_request(
            plan.variant or self.origin,
            plan,
            self.proven.build.session,
            request.describe(),
            reference,
            outcome,
        )
        shadowed = next(i for i, c in enumerate(self.proven.candidates) if c.chosen)
        candidates = tuple(
            attrs.evolve(c, verdict=verdict, reason=f"rejected: {'; '.join(verdict.problems)}")
            if i == shadowed
            else attrs.evolve(c, reason=_REFERENCE)
            if c.chosen
            else c
            for i, c in enumerate(served.candidates)
        )
        backend.serve(ServeChange(candidates=candidates))
        said = f"{self.origin.label}: {_on_real_request(verdict)}"
        self.switch.error = VerificationError(said, verdict)
        self.switch.status = f"the CPU reference serves: {self.text} was rejected on real inputs"
        warnings.warn(
            f"{said}; the CPU reference keeps serving",
            VerificationWarning,
            stacklevel=user_stacklevel(),
        )

    def _every_output(
        self, request: Request, outcome: Mapping[str, Any] | Exception
    ) -> tuple[Mapping[str, Any], Mapping[str, Any] | Exception]:
        """The request's outputs from both sessions, every output of the model (what a cached
        verdict holds) where it asked for fewer; as they are when that cannot be had."""
        session = self.proving.reference.build.session
        names = [output.name for output in session.get_outputs()]
        if isinstance(outcome, Exception) or set(names) == set(request.names):
            return request.outputs, outcome
        try:
            feed = dict(request.feed)
            reference = dict(zip(names, session.run(names, feed)))
            return reference, dict(zip(names, self.proven.build.session.run(names, feed)))
        except Exception:  # judged on what was asked: not cached
            return request.outputs, outcome

    def take_over(self, backend: ServingBackend, after: str) -> None:
        """Serve the candidate now (``after`` says why now), spot-checked when asked."""
        switch = self.switch
        backend.serve(ServeChange(set_watch=True, watch=None))
        try:
            switch.switched = self.switch_to(backend, self.proven, switch)
        except Exception as exc:
            did_not_come_up(switch, self.text, exc)
            return
        if not switch.switched:
            return
        switch.status = f"{self.text} serves, {after}"
        rate = self.proving.traffic.spot_check
        if rate <= 0 or self.proven.verdict is None:
            return
        spot = _SpotCheck(
            self.backend,
            self.origin,
            self.verifier,
            switch,
            self.proving.reference,
            rate,
            served=switch.status,
        )
        check = TrafficCheck(
            self.proving.reference.build.session,
            spot.judge,
            name="ortplug-spot-check",
            capacity=1,
            rate=rate,
            cpu_share=_SPOT_CHECK_CPU_SHARE,
            decay=DECAY,
        )
        weakref.finalize(backend, check.stop, wait=False)
        if not backend.serve(ServeChange(set_watch=True, watch=check)).moved:  # closed meanwhile
            check.stop()


@attrs.define(eq=False)
class _SpotCheck:
    """A sampled share of the serving candidate's calls run again on the CPU reference."""

    backend: weakref.ReferenceType[ServingBackend]
    origin: ResolvedCheckpoint
    verifier: Verifier
    switch: StartupSwitch
    reference: BuildResult  # the kept CPU reference: it serves at once at a disagreement
    rate: float
    served: str  # what the status said when the candidate took over
    checked: int = 0

    def judge(self, request: Request, outcome: Mapping[str, Any] | Exception) -> bool:
        backend = self.backend()
        if backend is None or backend.closed:
            return False
        plan = request.served
        if not isinstance(plan, SessionPlan) or plan is not backend.serve(ServeChange()).plan:
            return True  # served before a fall-back: not what serves now
        aliased = isinstance(outcome, AliasedOutputs)
        if isinstance(outcome, Exception) and not aliased:
            return True  # the CPU reference refused what the candidate ran: nothing to compare
        candidate = plan.variant or self.origin
        self.checked += 1
        problem = None
        if not isinstance(outcome, Exception):
            problem = self.verifier.disagreement(
                candidate, plan.precision, outcome, request.outputs
            )
        if problem is None and not aliased:
            self.switch.status = (
                f"{self.served}; spot check: {self.checked} of its calls run again on the CPU "
                f"reference (a share of {self.rate:g} sampled), all agreed"
            )
            return True
        was = list(backend.providers)
        session = backend.serve(ServeChange()).session  # what served when it failed
        served = self._to_reference(backend)  # at once: the wrong candidate serves no more
        said = request.describe()
        if isinstance(outcome, Exception):  # its outputs were aliased
            verdict = self.verifier.on_real_request(
                candidate, plan, session, said, request.outputs, outcome
            )
        else:
            verdict = self.verifier.on_real_request(
                candidate, plan, session, said, outcome, request.outputs
            )
        moved = served.moved
        now = list(backend.providers)
        on_reference = served.plan is not None and served.plan.cpu_reference
        precision = self.origin.metadata.precision
        candidates = tuple(
            attrs.evolve(c, chosen=False, verdict=verdict, reason=f"rejected: {verdict.describe()}")
            if c.chosen
            else attrs.evolve(c, chosen=True, reason=_REFERENCE)
            if on_reference and _is_reference(c, precision)
            else c
            for c in served.candidates
        )
        backend.serve(ServeChange(candidates=candidates))
        if moved:
            self.served = f"spot check: {was} was rejected on real inputs; {now} serves"
            then = f"serving on {now} from now on (no call failed)"
        else:  # not even the CPU reference could be built now: the candidate stays
            self.served = f"spot check: {was} disagreed on real inputs; nothing else could be built"
            then = f"no other choice could be built now: {was} keeps serving, unchecked"
        self.switch.status = self.served
        warnings.warn(
            f"{self.origin.label}: spot check: {_on_real_request(verdict)}; {then}",
            VerificationWarning,
            stacklevel=user_stacklevel(),
        )
        if on_reference or not moved:  # nothing left to check, or to move to
            backend.serve(ServeChange(set_watch=True, watch=None))
            return False
        return True

    def _to_reference(self, backend: ServingBackend) -> Served:
        """Serve the kept CPU reference's session from the next call on (nothing is built),
        keeping the report's lines for the caller to replace."""
        lines = backend.serve(ServeChange()).candidates
        try:
            moved = backend.serve(ServeChange(result=self.reference, switch=True)).moved
        except StalePlanError:  # a library was registered since: build the reference with it
            failed = backend.serve(ServeChange()).session
            moved = backend.serve(ServeChange(failed=failed, instead=self.reference.plan)).moved
        served = backend.serve(ServeChange(candidates=lines))
        return served._replace(moved=moved)
