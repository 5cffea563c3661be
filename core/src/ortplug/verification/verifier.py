"""Verification, the pipeline's second stage: one candidate session against the CPU reference,
on the paths ortplug itself runs (which checks: docs/internals.md)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import attrs
import numpy as np

from .. import log as _log
from ..checkpoint import ResolvedCheckpoint, Tolerance
from ..checkpoint.metadata import parse_dim_ranges
from ..errors import GivenInputsError, InputsNotAcceptedError
from ..host.runtime import require_onnxruntime
from ..plugin_host.manager import PluginHost
from ..providers.configs import CPU_EP
from ..providers.session_options import SessionOptionsConfig
from ..selection.autotune import host_signature
from ..session.async_runs import run_async
from ..session.binding import accumulates, bindable
from ..session.build import capture_messages, create_planned, model_key
from ..session.introspection import value_infos
from ..session.placement import accelerator_share, node_counts
from ..session.plan import SessionPlan, plan_session
from ..session.serial import concurrent_runs
from ..session.validation import InputChecker
from .comparison import OutputCheck, OutputRule, compare_outputs, parse_output_rules
from .given_inputs import given_problem, refused_problem
from .probes import (
    MAGNITUDE,
    REPEAT_BUDGET_S,
    REPEATED_RUNS,
    REPEATED_RUNS_AT_MOST,
    VERIFY_BUDGET_S,
    probe_feeds,
    varied_feeds,
)
from .sample_inputs import (
    GENERATION,
    AcceptedInputs,
    GeneratedFeed,
    carried_samples,
    session_inputs,
)
from .verdicts import (
    Measurement,
    Verdict,
    default_tolerance,
    load_checks,
    record_key,
    save_checks,
)

__all__ = ["THREADS", "Verifier"]

#: Threads that run the first feed at once (each :data:`_RUNS_EACH` times) on a candidate whose
#: providers all declare concurrent runs.
THREADS = 4
_RUNS_EACH = 3

#: What a float input is fed as, by ONNX Runtime type (a variant may take fp16 where the reference takes fp32).
_FLOAT_INPUTS = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
}


def _quiet() -> Any:
    """Run options that keep ONNX Runtime's log of a failing run off stderr (the reason says it)."""
    options = require_onnxruntime().RunOptions()
    options.log_severity_level = 4
    return options


def _outputs(
    session: Any, feed: Mapping[str, np.ndarray], names: Sequence[str] | None = None
) -> dict[str, Any]:
    """One run's outputs by name (every output, or ``names``)."""
    names = [output.name for output in session.get_outputs()] if names is None else list(names)
    return dict(zip(names, session.run(names, dict(feed), _quiet())))


def _one_line(exc: BaseException, log: Sequence[str]) -> str:
    """The exception and ONNX Runtime's log lines of the run, on one line (cut at 400 characters)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    said = " ".join(" ".join(log).split())
    if said and said not in text:
        text += f" (ONNX Runtime logged: {said})"
    return text if len(text) <= 400 else text[:397] + "..."


def _changed(feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """The same inputs with their values in reverse order (in range for ids and masks too);
    ``None`` when that changes nothing or an input is not a tensor."""
    if not all(isinstance(v, np.ndarray) and v.dtype != object for v in feed.values()):
        return None
    changed = {
        name: value.ravel()[::-1].reshape(value.shape).copy() for name, value in feed.items()
    }
    if all(np.array_equal(changed[n], feed[n]) for n in feed):
        return None
    return changed


def _placement_failure(session: Any, min_share: float | None) -> str | None:
    """Why the accelerators' share of the graph's nodes rejects the session, or ``None``
    (``min_share=None``: not judged; an explicit chain's share is ``min_accelerator_share``'s)."""
    if min_share is None:
        return None
    try:
        counts = node_counts(session)
    except Exception:  # placement not recorded: nothing to judge
        return None
    share = accelerator_share(counts)
    if share is None or list(session.get_providers()) == [CPU_EP]:
        return None
    if share == 0:
        total = sum(counts.values())
        return f"its accelerators took no node of the graph (the CPU provider ran all {total})"
    if share < min_share:
        return (
            f"its accelerators took {share:.0%} of the graph's nodes, below "
            f"min_accelerator_share={min_share:g}"
        )
    return None


def _accumulating(session: Any) -> list[str]:
    """The session's outputs ONNX Runtime appends to when they stay bound (sequences, maps)."""
    return [info.name for info in value_infos(session.get_outputs()) if accumulates(info)]


def _unwritten(binding: Any, names: Sequence[str], fresh: Sequence[str]) -> str | None:
    """The first output bound afresh that the run left without a value, or ``None``."""
    values = dict(zip(names, binding.get_outputs()))
    return next((name for name in fresh if not values[name].has_value()), None)


def _for_reference(options: SessionOptionsConfig | None) -> SessionOptionsConfig | None:
    """The caller's session options (custom-op libraries, free dimension overrides, optimisation
    level...) less what writes files: the reference must not replace the candidate's
    optimized model or profile."""
    if options is None:
        return None
    return attrs.evolve(
        options, optimized_model_path=None, enable_profiling=None, profile_file_prefix=None
    )


def _fed_as(session: Any, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference's inputs cast to the float types this session takes."""
    fed = dict(feed)
    for spec in InputChecker.from_session(session).inputs:
        dtype = _FLOAT_INPUTS.get(spec.type)
        value = fed.get(spec.name)
        if dtype is not None and value is not None and value.dtype.kind == "f":
            fed[spec.name] = value.astype(dtype, copy=False)
    return fed


@attrs.frozen
class _Probe:
    """A feed the reference ran, labelled, with the reference's outputs on it."""

    label: str
    feed: Mapping[str, np.ndarray]
    outputs: Mapping[str, Any]
    group: str


class _Findings:
    """The worst check of each output over every run of one candidate, and what the runs covered."""

    def __init__(self, tolerance: Tolerance, rules: Mapping[str, OutputRule], precision: str):
        self._tolerance, self._rules, self.precision = tolerance, rules, precision
        self.checks: dict[str, OutputCheck] = {}
        self.covered: list[str] = []
        #: Why the candidate is unverified (every probe was over the budget), or ``None``.
        self.unverified: str | None = None

    def judge(
        self,
        label: str,
        reference: Mapping[str, Any],
        outputs: Mapping[str, Any],
        cover: str | None = None,
    ) -> bool:
        """Judge one run's outputs (those of ``reference`` asked), said to be ``label`` (and
        covering ``cover``, default ``label``); ``False`` once an output fails."""
        cover = label if cover is None else cover
        if cover not in self.covered:
            self.covered.append(cover)
        checks = compare_outputs(
            reference, outputs, self._tolerance, self._rules, precision=self.precision
        )
        for measured in checks:
            check = attrs.evolve(measured, on=label)
            kept = self.checks.get(check.name)
            if kept is None or check.worse_than(kept):
                self.checks[check.name] = check
        return all(check.violation is None for check in checks)

    def problem(self, reference: Mapping[str, Any], outputs: Mapping[str, Any]) -> str | None:
        """The first output of ``outputs`` that fails against ``reference`` (not recorded)."""
        checks = compare_outputs(
            reference, outputs, self._tolerance, self._rules, precision=self.precision
        )
        return next((p for c in checks if (p := c.problem()) is not None), None)

    def measurement(self, names: Sequence[str]) -> Measurement:
        """The checks in output order (none for a candidate that raised before any output)."""
        checks = tuple(self.checks[name] for name in names if name in self.checks)
        return Measurement(checks, tuple(self.covered))


#: The outputs of one or more runs, each with the reference's outputs it is judged against.
_Judged = list[tuple[Mapping[str, Any], Mapping[str, Any]]]


@attrs.frozen
class _Run:
    """One call of the candidate to judge: what it covers, the call (its outputs, or a list of
    outputs each with its reference's), the reference's outputs, its cost in runs of the first
    feed, and how many runs of the session it makes."""

    label: str
    call: Callable[[], dict[str, Any] | _Judged]
    reference: Mapping[str, Any]
    cost: float = 1.0
    runs: int = 1

    def judged(self) -> _Judged:
        """Run it: each run's outputs with the reference's outputs to judge them against."""
        outputs = self.call()
        return outputs if isinstance(outputs, list) else [(self.reference, outputs)]


def _aliased(kept: Sequence[tuple[str, np.ndarray, np.ndarray]], judged: _Judged) -> str | None:
    """Why the outputs of the last call (``kept``: name, array, a copy taken then) are aliased by
    ``judged``, the next call's (or by each other's, for runs at once); ``None`` when not."""
    arrays = [(n, v) for _, outputs in judged for n, v in outputs.items() if _array(v)]
    for name, array, copy in kept:
        other = next((n for n, v in arrays if np.may_share_memory(array, v)), None)
        if other is not None:
            return (
                f"output {name!r} of one run is the memory the next run returned as "
                f"{other!r} (a caller that keeps a result sees it overwritten)"
            )
        if not np.array_equal(array, copy, equal_nan=array.dtype.kind in "fc"):
            return f"output {name!r} of one run changed when the next run ran"
    for index, (_, outputs) in enumerate(judged[1:], 1):
        earlier = [v for _, out in judged[:index] for v in out.values() if _array(v)]
        for name, value in outputs.items():
            if _array(value) and any(np.may_share_memory(value, v) for v in earlier):
                return f"output {name!r} of one run is the memory another run at once returned"
    return None


def _array(value: object) -> bool:
    return isinstance(value, np.ndarray) and value.size > 0 and value.dtype != object


def _kept(judged: _Judged) -> list[tuple[str, np.ndarray, np.ndarray]]:
    return [(n, v, v.copy()) for _, out in judged for n, v in out.items() if _array(v)]


def _elements(feed: Mapping[str, Any]) -> int:
    return sum(int(np.size(value)) for value in feed.values())


def _shapes(feed: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {tuple(np.shape(value))}" for name, value in feed.items())


class Verifier:
    """Checks sessions built for one checkpoint against the CPU provider on its reference weights.

    The reference runs each feed at most once (on the first measurement that is not cached).
    """

    def __init__(
        self,
        checkpoint: ResolvedCheckpoint,
        plugins: PluginHost,
        tolerance: Tolerance | None,
        session_options: SessionOptionsConfig | None = None,
        given: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        self.reference = checkpoint.reference or checkpoint
        self._plugins = plugins
        self._tolerance = tolerance
        #: The caller's session options: the reference is built as the caller's session would be.
        self._options = _for_reference(session_options)
        #: The inputs the caller gave (``verify_inputs``): used before the checkpoint's samples.
        self._given = dict(given or {})
        carried = carried_samples(self.reference)
        self._carried = [name for name in carried if name not in self._given]
        self._samples = {**carried, **self._given}
        self._rules = parse_output_rules(
            self.reference.metadata.extra, self.reference.metadata.output_names
        )
        self._expected: AcceptedInputs | None = None
        self._reference_session: Any = None
        self._probes: list[_Probe] | None = None
        self._threads: list[_Probe] | None = None
        #: Other inputs the reference runs, for the bound-run check (``None``: no check).
        self._second: dict[str, np.ndarray] | None = None

    @property
    def inputs_origin(self) -> str:
        """Where the inputs come from: ``given`` (``verify_inputs``), ``carried`` (the
        checkpoint's samples), ``generated``, or several (``given and generated``)."""
        missing = set(self.reference.metadata.input_names) - set(self._samples)
        origins = ["given"] * bool(self._given) + ["carried"] * bool(self._carried)
        if missing or not self._samples:
            origins.append("generated")
        *first, last = origins
        return f"{', '.join(first)} and {last}" if first else last

    def _reference_run(self) -> AcceptedInputs:
        """The inputs and the CPU provider's outputs on the reference weights (computed once)."""
        if self._expected is not None:
            return self._expected
        plan = plan_session(self.reference, ["cpu"], self._options, None, self._plugins)
        return self.use_reference(create_planned(self.reference, plan, plan.options).session)

    def use_reference(self, session: Any) -> AcceptedInputs:
        """Take ``session`` (the CPU provider on the reference weights, already built) as the
        reference: the first inputs it runs (:func:`~ortplug.verification.sample_inputs.session_inputs`)
        and its outputs on them are what candidates are compared against."""
        self._reference_session = session
        self._expected = expected = self._first_inputs(session)
        changed = _changed(expected.feed)
        if changed is not None:
            try:
                _outputs(session, changed)
                self._second = changed
            except Exception:  # the reference refuses them (a mask, an index): no bound check
                self._second = None
        return expected

    def _first_inputs(self, session: Any) -> AcceptedInputs:
        """The first inputs the reference ``session`` runs; given ones that do not fit it raise
        :class:`~ortplug.errors.GivenInputsError` (they are the caller's data: never skipped)."""
        extra = self.reference.metadata.extra
        if not self._given:
            return session_inputs(session, extra, self._samples)
        problem = given_problem(InputChecker.from_session(session).inputs, self._given)
        if problem is not None:
            raise GivenInputsError(problem)
        try:
            return session_inputs(session, extra, self._samples)
        except InputsNotAcceptedError as exc:
            said = " ".join(f"{type(exc.cause).__name__}: {exc.cause}".split())[:300]
            raise GivenInputsError(refused_problem(self._given, said)) from exc.cause

    def _probe_runs(self) -> list[_Probe]:
        """The probe feeds the reference runs, with its outputs (computed once)."""
        if self._probes is not None:
            return self._probes
        expected = self._reference_run()
        session = self._reference_session
        specs = InputChecker.from_session(session).inputs
        extra = self.reference.metadata.extra
        first = GeneratedFeed(expected.feed, expected.generated)
        ranges = parse_dim_ranges(extra.get("dim_ranges"))
        bounds = self.reference.index_bounds()
        probes, groups = [], set()
        for probe in probe_feeds(specs, extra, first, self._samples, ranges, bounds):
            if probe.group == "size" and probe.group in groups:
                continue
            try:
                outputs = _outputs(session, probe.feed)
            except Exception:  # the reference refuses it: not covered
                continue
            groups.add(probe.group)
            probes.append(_Probe(probe.label, probe.feed, outputs, probe.group))
        self._probes = probes
        return probes

    def _thread_feeds(self) -> list[_Probe]:
        """One feed per thread of the runs at once, with the reference's outputs: the first
        feed, then feeds of its shapes with other values (the first again where the reference
        refuses one)."""
        if self._threads is not None:
            return self._threads
        expected = self._reference_run()
        first = GeneratedFeed(expected.feed, expected.generated)
        feeds = [_Probe("the first feed", expected.feed, expected.outputs, "")]
        for index, feed in enumerate(varied_feeds(first, THREADS - 1)):
            try:
                outputs = _outputs(self._reference_session, feed)
                feeds.append(_Probe(f"feed {index + 2}", feed, outputs, ""))
            except Exception:  # the reference refuses it: that thread runs the first feed
                feeds.append(feeds[0])
        self._threads = feeds
        return feeds

    def _key(
        self,
        plan: SessionPlan,
        candidate: ResolvedCheckpoint,
        providers: list[str],
        tolerance: Tolerance,
    ) -> str:
        samples = hashlib.sha256()
        for name, array in sorted(self._samples.items()):
            samples.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
            samples.update(np.ascontiguousarray(array).tobytes())
        return record_key(
            self.reference.fingerprint(),
            None if candidate is self.reference else candidate.fingerprint(),
            candidate.variant,
            [config.to_ort() for config in plan.chain],
            providers,
            dict(self.reference.metadata.extra),
            samples.hexdigest(),
            GENERATION,
            tolerance.to_dict(),
            plan.precision or candidate.metadata.precision,
            plan.host.ort_version,
            host_signature(plan.host),
            concurrent_runs(providers, self._plugins),  # its runs at once are verified too
        )

    def tolerance_for(
        self, candidate: ResolvedCheckpoint, precision: str | None = None
    ) -> Tolerance:
        """The tolerance given to the verifier, else the variant's (or its precision's default),
        loosened to the default of ``precision`` (a reduced-precision mode) when that is looser."""
        if self._tolerance is not None:
            return self._tolerance
        variant = next(
            (v for v in self.reference.metadata.variants if v.name == candidate.variant), None
        )
        if variant is not None:
            weights = variant.effective_tolerance
        else:
            weights = default_tolerance(candidate.metadata.precision)
        if precision is None:
            return weights
        mode = default_tolerance(precision)
        return Tolerance(max(weights.rtol, mode.rtol), max(weights.atol, mode.atol))

    def _findings(self, candidate: ResolvedCheckpoint, precision: str | None) -> _Findings:
        tolerance = self.tolerance_for(candidate, precision)
        return _Findings(tolerance, self._rules, precision or candidate.metadata.precision)

    def disagreement(
        self,
        candidate: ResolvedCheckpoint,
        precision: str | None,
        reference_outputs: Mapping[str, Any],
        candidate_outputs: Mapping[str, Any],
    ) -> str | None:
        """Why ``candidate``'s outputs on one request are not the reference's, judged as a
        verdict judges them (``None``: they agree); for checks on real traffic."""
        findings = self._findings(candidate, precision)
        findings.judge("a real request", reference_outputs, candidate_outputs)
        return next((p for c in findings.checks.values() if (p := c.problem())), None)

    def on_real_request(
        self,
        candidate: ResolvedCheckpoint,
        plan: SessionPlan,
        session: Any,
        request: str,
        reference_outputs: Mapping[str, Any],
        candidate_outputs: Mapping[str, Any] | Exception,
    ) -> Verdict:
        """The verdict on ``session`` from one real request (``request`` names it and its
        shapes) it answered otherwise than the CPU reference, or raised on. Failing output
        differences of every output are cached as a verification's: no later build chooses it."""
        providers = list(session.get_providers())
        tolerance = self.tolerance_for(candidate, plan.precision)
        findings = self._findings(candidate, plan.precision)
        measured = Measurement((), (f"on real inputs: {request}",))
        if isinstance(candidate_outputs, Exception):
            said = _one_line(candidate_outputs, ())
            failure = f"on real inputs: it raised on {request}, which the CPU reference ran: {said}"
        else:
            agreed = findings.judge(
                f"on real inputs: {request}", reference_outputs, candidate_outputs
            )
            measured = findings.measurement(list(reference_outputs))
            failure = f"on real inputs: {request} disagreed with the CPU reference"
            every = {output.name for output in session.get_outputs()} == set(reference_outputs)
            if every and not agreed:
                key = self._key(plan, candidate, providers, tolerance)
                self._save(key, measured, candidate, plan, providers)
        checks = measured.checks
        return Verdict(
            variant=candidate.variant,
            precision=plan.precision or candidate.metadata.precision,
            providers=tuple(providers),
            tolerance=tolerance,
            checks=checks,
            inputs="real",
            cost_ms=0.0,
            cached=False,
            failure=failure,
            covered=measured.covered,
        )

    def verdict(
        self,
        candidate: ResolvedCheckpoint,
        plan: SessionPlan,
        session: Any,
        min_share: float | None = None,
    ) -> Verdict:
        """The verdict on ``session``, built from ``plan`` for ``candidate``: measured, or its
        output differences read from the cache (a failure besides the outputs is checked again)."""
        started = time.perf_counter()
        providers = list(session.get_providers())
        failure = _placement_failure(session, min_share)
        tolerance = self.tolerance_for(candidate, plan.precision)
        key = self._key(plan, candidate, providers, tolerance)
        output_types = {output.name: output.type for output in session.get_outputs()}
        measured = load_checks(key, output_types) if failure is None else None
        cached = measured is not None
        unverified = False
        if measured is None:
            findings = self._findings(candidate, plan.precision)
            run_failure = self._measure(session, findings)
            failure = failure or run_failure
            measured = findings.measurement(list(output_types))
            unverified = failure is None and findings.unverified is not None
            failure = failure or findings.unverified
            passed = all(check.violation is None for check in measured.checks)
            if failure is None and passed:
                failure = self._bound_failure(session, findings)
            if failure is None:
                self._save(key, measured, candidate, plan, providers)
        return Verdict(
            variant=candidate.variant,
            precision=plan.precision or candidate.metadata.precision,
            providers=tuple(providers),
            tolerance=tolerance,
            checks=measured.checks,
            inputs=self.inputs_origin,
            cost_ms=(time.perf_counter() - started) * 1e3,
            cached=cached,
            failure=failure,
            covered=measured.covered,
            unverified=unverified,
        )

    def timed_run(self, session: Any) -> Callable[[], object]:
        """One plain run of ``session`` on the verification inputs, as a call (for timing)."""
        feed = _fed_as(session, self._reference_run().feed)
        names = [output.name for output in session.get_outputs()]
        return lambda: session.run(names, feed)

    def _measure(self, session: Any, findings: _Findings) -> str | None:
        """Run ``session`` as its callers will and judge every output (``findings``) until one
        fails; the failure that stopped a run, if one did. Runs projected (from the second) past
        :data:`VERIFY_BUDGET_S` are skipped, and said; each call's outputs must survive the next."""
        expected = self._reference_run()
        first = _fed_as(session, expected.feed)
        names = [output.name for output in session.get_outputs()]
        everything = expected.outputs
        opening = _Run(f"the first feed ({_shapes(first)})", partial(_outputs, session, first),
                       everything)  # fmt: skip
        probes: list[_Run] = []
        for probe in self._probe_runs():
            if probe.group == MAGNITUDE and findings.precision != "fp32":
                continue  # reduced precision: its absolute error grows with the values
            fed = _fed_as(session, probe.feed)
            size = _elements(fed) / max(1, _elements(first))
            probes.append(_Run(probe.label, partial(_outputs, session, fed), probe.outputs, size))
        runs = list(probes)
        warm = max(
            1, REPEATED_RUNS - len(runs) - 1
        )  # the compared run is the session's 10th or later
        repeated = partial(_repeated, session, first, warm)
        runs.append(_Run(f"the first feed after {REPEATED_RUNS} runs", repeated, everything, warm,
                         warm))  # fmt: skip
        if len(names) > 1:
            for name in names:
                alone = partial(_outputs, session, first, [name])
                runs.append(_Run(f"output {name!r} alone", alone, {name: everything[name]}))
        runs.append(_Run("run_async", partial(_run_async, session, names, first), everything))
        if concurrent_runs(list(session.get_providers()), self._plugins):
            own = [(t.outputs, _fed_as(session, t.feed)) for t in self._thread_feeds()]
            cost = THREADS * _RUNS_EACH
            at_once = partial(_at_once, session, own)
            runs.append(_Run(f"{THREADS} threads at once", at_once, everything, cost, cost))
        pool = [opening, *probes]
        return _Runner(findings, self.reference).run(opening, runs, pool)

    def _bound_failure(self, session: Any, findings: _Findings) -> str | None:
        """One IO binding run twice, its inputs updated in place and bound again between (as
        ortplug's Ray predictor does), against the session's own plain runs (its numerics are the
        plain check's business): stale or wrong outputs."""
        if self._second is None or self._expected is None:
            return None
        if not all(bindable(info) for info in value_infos(session.get_inputs())):
            return None  # ONNX Runtime's IO binding refuses a string input: no bound run
        first = _fed_as(session, self._expected.feed)
        second = _fed_as(session, self._second)
        names = [info.name for info in value_infos(session.get_outputs()) if bindable(info)]
        if not names:
            return None
        with capture_messages(require_onnxruntime(), model_key(self.reference)) as log:
            try:
                binding = session.io_binding()
                buffers = {name: np.array(value, copy=True) for name, value in first.items()}
                for name, buffer in buffers.items():
                    binding.bind_cpu_input(name, buffer)
                for name in names:
                    binding.bind_output(name, "cpu")
                session.run_with_iobinding(binding, _quiet())
                for name, buffer in buffers.items():  # as the Ray predictor's static batches
                    buffer[...] = second[name]
                    binding.bind_cpu_input(name, buffer)  # plugin EPs copy a CPU input at bind time
                fresh = _accumulating(session)
                for name in fresh:  # as Binding.run: bound afresh, not appended to
                    binding.bind_output(name, "cpu")
                session.run_with_iobinding(binding, _quiet())
                unwritten = _unwritten(binding, names, fresh)
                if unwritten is not None:  # reading it would crash ONNX Runtime
                    return (
                        "a reused IO binding returned stale outputs: its second run wrote no "
                        f"value for output {unwritten!r}"
                    )
                got = dict(zip(names, binding.copy_outputs_to_cpu()))
                plain_first = _outputs(session, first, names)
                plain_second = _outputs(session, second, names)
            except Exception as exc:
                return f"a reused IO binding raised: {_one_line(exc, log)}"
        problem = findings.problem(plain_second, got)
        if problem is None:
            return None
        if findings.problem(plain_first, got) is None:
            return (
                "a reused IO binding returned stale outputs: after its inputs were updated in "
                "place and bound again, its second run gave the first run's outputs"
            )
        return f"a reused IO binding's second run differs from a plain run: {problem}"

    def _save(
        self,
        key: str,
        measured: Measurement,
        candidate: ResolvedCheckpoint,
        plan: SessionPlan,
        providers: list[str],
    ) -> None:
        if not (candidate.built_from_current_files() and self.reference.built_from_current_files()):
            _log.info(
                "%s: verdict not cached: a model or external-data file was replaced or written "
                "while it was built and verified (the next build verifies again)",
                candidate.label,
            )
            return
        weights = candidate.weights_path
        described = {
            "model": candidate.label,
            "model_path": None if weights is None else str(weights.resolve()),
            "ort_version": plan.host.ort_version,
            "variant": candidate.variant,
            "providers": providers,
        }
        save_checks(key, measured, described)


class _Runner:
    """Runs one candidate's calls in order within the budget, judging each and checking that no
    call's outputs are aliased by the next; then the opening feed and probes again, in a seeded
    order, until :data:`REPEATED_RUNS_AT_MOST` runs of the session or :data:`REPEAT_BUDGET_S`."""

    def __init__(self, findings: _Findings, reference: ResolvedCheckpoint) -> None:
        self._findings = findings
        self._reference = reference
        self._kept: list[tuple[str, np.ndarray, np.ndarray]] = []
        self.runs = 0  # runs of the session made

    def _call(self, run: _Run, label: str | None = None, cover: str | None = None) -> str | bool:
        """Make and judge one call: a failure, or whether every output agreed."""
        with capture_messages(require_onnxruntime(), model_key(self._reference)) as log:
            try:
                judged = run.judged()
            except Exception as exc:
                reason = _one_line(exc, log)
                return f"it raised on inputs the CPU reference runs: {reason} (on {run.label})"
        self.runs += run.runs
        said = run.label if label is None else label
        aliased = _aliased(self._kept, judged)
        if aliased is not None:
            return f"its outputs are aliased: {aliased} (on {said})"
        self._kept = _kept(judged)
        return all(self._findings.judge(said, ref, out, cover) for ref, out in judged)

    def run(self, opening: _Run, runs: Sequence[_Run], pool: Sequence[_Run]) -> str | None:
        """``opening`` (the warm-up), then ``runs`` within the budget, then ``pool`` again."""
        outcome = self._call(opening)
        if outcome is not True:
            return outcome or None
        started, per_run = time.perf_counter(), None
        skipped = []
        for run in runs:
            spent = time.perf_counter() - started
            if per_run is not None and spent + run.cost * per_run > VERIFY_BUDGET_S:
                skipped.append(run.label)
                continue
            outcome = self._call(run)
            if outcome is not True:
                return outcome or None
            if per_run is None:  # the run after the warm-up: what the budget is projected from
                per_run = (time.perf_counter() - started) / max(run.cost, 1e-9)
        if skipped and len(skipped) >= len(runs) - 1:
            self._findings.unverified = (
                f"unverified: every probe but {runs[0].label} was over the "
                f"{VERIFY_BUDGET_S:g} s verification budget (a run of the first feed takes "
                f"{per_run or 0.0:.1f} s after warm-up): {', '.join(skipped)}"
            )
        elif skipped:
            self._findings.covered.append(
                f"not run, over the {VERIFY_BUDGET_S:g} s budget: {', '.join(skipped)}"
            )
        if per_run is not None:
            return self._again(pool, per_run, time.perf_counter() - started)
        return None

    def _again(self, pool: Sequence[_Run], per_run: float, spent: float) -> str | None:
        """The pool's feeds again in a seeded order, until the runs or the budget are spent."""
        rng = np.random.default_rng(4)
        started, first, cover = time.perf_counter(), self.runs + 1, "the feeds again"
        while self.runs < REPEATED_RUNS_AT_MOST:
            run = pool[int(rng.integers(len(pool)))]
            again = time.perf_counter() - started + run.cost * per_run
            if again > REPEAT_BUDGET_S or spent + again > VERIFY_BUDGET_S:
                break
            outcome = self._call(run, f"{run.label}, run {self.runs + 1}", cover)
            if outcome is not True:
                return outcome or None
        if cover in self._findings.covered:
            at = self._findings.covered.index(cover)
            self._findings.covered[at] = (
                f"the feeds again in a seeded order (runs {first} to {self.runs})"
            )
        return None


def _repeated(session: Any, feed: Mapping[str, np.ndarray], times: int) -> dict[str, Any]:
    """The outputs of the last of ``times`` runs of one feed."""
    outputs: dict[str, Any] = {}
    for _ in range(times):
        outputs = _outputs(session, feed)
    return outputs


#: How long verification waits for one ``run_async`` callback.
_ASYNC_WAIT_S = 300.0


def _run_async(session: Any, names: list[str], feed: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """One ``run_async`` run as a caller's goes (:func:`~ortplug.session.async_runs.run_async`),
    waited for: its outputs, or its error raised."""
    done = threading.Event()
    result: dict[str, Any] = {}

    def callback(outputs: Mapping[str, Any] | None, error: BaseException | None) -> None:
        result.update(outputs=outputs, error=error)
        done.set()

    run_async(session, names, dict(feed), _quiet(), callback, lambda error: error, lambda: None)
    if not done.wait(_ASYNC_WAIT_S):
        raise TimeoutError(f"run_async gave no result in {_ASYNC_WAIT_S:g} s")
    if result["error"] is not None:
        raise result["error"]
    return dict(result["outputs"])


def _at_once(
    session: Any, feeds: Sequence[tuple[Mapping[str, Any], Mapping[str, np.ndarray]]]
) -> _Judged:
    """The outputs of :data:`THREADS` threads started together, thread ``i`` running its own feed
    of ``feeds`` (reference outputs, feed) :data:`_RUNS_EACH` times on ``session``, each with the
    reference's outputs on its feed; the first error a run raised, raised."""
    start = threading.Barrier(len(feeds))
    results: _Judged = []
    errors: list[BaseException] = []

    def work(reference: Mapping[str, Any], feed: Mapping[str, np.ndarray]) -> None:
        try:
            start.wait(_ASYNC_WAIT_S)
            mine = [(reference, _outputs(session, feed)) for _ in range(_RUNS_EACH)]
            results.extend(mine)
        except BaseException as exc:  # raised again in the verifying thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=pair, name="ortplug-verify") for pair in feeds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
