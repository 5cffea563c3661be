"""Verification, the pipeline's second stage: one candidate session against the CPU reference.

A candidate is checked on the paths ortplug itself runs: a plain run on inputs the
CPU reference accepts (outputs within the tolerance), and one IO binding run twice
with its inputs updated in place and bound again between the runs (a provider that
hands back the first run's outputs fails as stale). A candidate that raises on
those inputs, or whose accelerators took no node of the graph (or fewer than
``min_accelerator_share``), fails too, with ONNX Runtime's own log lines in the
reason. What fails is a :class:`~ortplug.verification.verdicts.Verdict` with a ``failure``, never
an ONNX Runtime exception. Output differences are cached, pass or fail; the CPU
provider on the reference weights at their precision is the reference itself and
is never checked.

Which checks run is one decision (:func:`needs_check`): every candidate but the
reference (a variant, a reduced-precision mode, an accelerator), unless ``verify=False``.
Each is checked at its precision's tolerance (a variant's manifest tolerance, a
reduced-precision mode's when looser, or the :class:`~ortplug.checkpoint.Tolerance` given).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..checkpoint import ResolvedCheckpoint, Tolerance
from ..host._runtime import require_onnxruntime
from ..plugins.manager import PluginHost
from ..providers.configs import CPU_EP
from ..selection.autotune import host_signature
from ..verification.sample_inputs import GENERATION, AcceptedInputs, carried_samples, session_inputs
from ..verification.verdicts import (
    OutputCheck,
    Verdict,
    compare_outputs,
    default_tolerance,
    load_checks,
    record_key,
    save_checks,
)
from ._placement import accelerator_share, node_counts
from ._plan import SessionPlan, plan_session
from ._session import capture_messages, create_planned, model_key
from ._validation import InputChecker

__all__ = ["Verifier", "needs_check"]

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


def _outputs(session: Any, feed: Mapping[str, np.ndarray]) -> dict[str, Any]:
    names = [output.name for output in session.get_outputs()]
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


def _fed_as(session: Any, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference's inputs cast to the float types this session takes."""
    fed = dict(feed)
    for spec in InputChecker.from_session(session).inputs:
        dtype = _FLOAT_INPUTS.get(spec.type)
        value = fed.get(spec.name)
        if dtype is not None and value is not None and value.dtype.kind == "f":
            fed[spec.name] = value.astype(dtype, copy=False)
    return fed


class Verifier:
    """Checks sessions built for one checkpoint against the CPU provider on its reference weights.

    The reference runs at most once (on the first measurement that is not cached).
    """

    def __init__(
        self, checkpoint: ResolvedCheckpoint, plugins: PluginHost, tolerance: Tolerance | None
    ) -> None:
        self.reference = checkpoint.reference or checkpoint
        self._plugins = plugins
        self._tolerance = tolerance
        self._samples = carried_samples(self.reference)
        self._expected: AcceptedInputs | None = None
        #: Other inputs the reference runs, for the bound-run check (``None``: no check).
        self._second: dict[str, np.ndarray] | None = None

    @property
    def inputs_origin(self) -> str:
        """``carried`` (the checkpoint's samples), ``generated``, or ``carried and generated``."""
        if not self._samples:
            return "generated"
        missing = set(self.reference.metadata.input_names) - set(self._samples)
        return "carried and generated" if missing else "carried"

    def _reference_run(self) -> AcceptedInputs:
        """The inputs and the CPU provider's outputs on the reference weights (computed once)."""
        if self._expected is not None:
            return self._expected
        plan = plan_session(self.reference, ["cpu"], None, None, self._plugins)
        return self.use_reference(create_planned(self.reference, plan, plan.options).session)

    def use_reference(self, session: Any) -> AcceptedInputs:
        """Take ``session`` (the CPU provider on the reference weights, already built) as the
        reference: the first inputs it runs (:func:`~ortplug.verification.sample_inputs.session_inputs`)
        and its outputs on them are what candidates are compared against."""
        self._expected = expected = session_inputs(
            session, self.reference.metadata.extra, self._samples
        )
        changed = _changed(expected.feed)
        if changed is not None:
            try:
                _outputs(session, changed)
                self._second = changed
            except Exception:  # the reference refuses them (a mask, an index): no bound check
                self._second = None
        return expected

    def _key(self, plan: SessionPlan, candidate: ResolvedCheckpoint, providers: list[str]) -> str:
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
            plan.host.ort_version,
            host_signature(plan.host),
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

    def disagreement(
        self,
        candidate: ResolvedCheckpoint,
        precision: str | None,
        reference_outputs: Mapping[str, Any],
        candidate_outputs: Mapping[str, Any],
    ) -> str | None:
        """Why ``candidate``'s outputs on one request are not the reference's, judged as a
        verdict judges them (``None``: they agree); for checks on real traffic."""
        tolerance = self.tolerance_for(candidate, precision)
        checks = compare_outputs(reference_outputs, candidate_outputs)
        return next((p for c in checks if (p := c.problem(tolerance)) is not None), None)

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
        checks: tuple[OutputCheck, ...] = ()
        if isinstance(candidate_outputs, Exception):
            said = _one_line(candidate_outputs, ())
            failure = f"on real inputs: it raised on {request}, which the CPU reference ran: {said}"
        else:
            checks = compare_outputs(reference_outputs, candidate_outputs)
            failure = f"on real inputs: {request} disagreed with the CPU reference"
            every = {output.name for output in session.get_outputs()} == set(reference_outputs)
            if every and any(c.problem(tolerance) is not None for c in checks):
                key = self._key(plan, candidate, providers)
                self._save(key, checks, candidate, plan, providers)
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
        )

    def verdict(
        self,
        candidate: ResolvedCheckpoint,
        plan: SessionPlan,
        session: Any,
        min_share: float | None = None,
    ) -> Verdict:
        """The verdict on ``session``, built from ``plan`` for ``candidate`` (the reference or a variant).

        Measured, or read from the cache (output differences are cached, pass or fail; a
        candidate that raised, took no node or failed the bound run is checked again).
        """
        started = time.perf_counter()
        providers = list(session.get_providers())
        failure = _placement_failure(session, min_share)
        tolerance = self.tolerance_for(candidate, plan.precision)
        key = self._key(plan, candidate, providers)
        checks = None
        if failure is None:
            checks = load_checks(
                key, {output.name: output.type for output in session.get_outputs()}
            )
        cached = checks is not None
        if checks is None:
            expected = self._reference_run()
            outputs, run_failure = self._plain(session, expected)
            checks = compare_outputs(expected.outputs, outputs) if outputs is not None else ()
            failure = failure or run_failure
            passed = all(c.problem(tolerance) is None for c in checks)
            if outputs is not None and failure is None and passed:
                failure = self._bound_failure(session, outputs, tolerance)
            if failure is None:
                self._save(key, checks, candidate, plan, providers)
        return Verdict(
            variant=candidate.variant,
            precision=plan.precision or candidate.metadata.precision,
            providers=tuple(providers),
            tolerance=tolerance,
            checks=checks,
            inputs=self.inputs_origin,
            cost_ms=(time.perf_counter() - started) * 1e3,
            cached=cached,
            failure=failure,
        )

    def timed_run(self, session: Any) -> Callable[[], object]:
        """One plain run of ``session`` on the verification inputs, as a call (for timing)."""
        feed = _fed_as(session, self._reference_run().feed)
        names = [output.name for output in session.get_outputs()]
        return lambda: session.run(names, feed)

    def _plain(
        self, session: Any, expected: AcceptedInputs
    ) -> tuple[dict[str, Any] | None, str | None]:
        """The plain run's outputs, or why the run failed."""
        with capture_messages(require_onnxruntime(), model_key(self.reference)) as log:
            try:
                return _outputs(session, _fed_as(session, expected.feed)), None
            except Exception as exc:
                return None, f"it raised on inputs the CPU reference runs: {_one_line(exc, log)}"

    def _bound_failure(
        self, session: Any, plain_first: Mapping[str, Any], tolerance: Tolerance
    ) -> str | None:
        """One IO binding run twice, its inputs updated in place and bound again between (as
        ortplug's Ray predictor does), against the session's own plain runs (its numerics are the
        plain check's business): stale or wrong outputs."""
        if self._second is None or self._expected is None:
            return None
        first = _fed_as(session, self._expected.feed)
        second = _fed_as(session, self._second)
        names = [output.name for output in session.get_outputs()]
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
                session.run_with_iobinding(binding, _quiet())
                got = dict(zip(names, binding.copy_outputs_to_cpu()))
                plain_second = _outputs(session, second)
            except Exception as exc:
                return f"a reused IO binding raised: {_one_line(exc, log)}"
        problems = [p for c in compare_outputs(plain_second, got) if (p := c.problem(tolerance))]
        if not problems:
            return None
        stale = all(c.problem(tolerance) is None for c in compare_outputs(plain_first, got))
        if stale:
            return (
                "a reused IO binding returned stale outputs: after its inputs were updated in "
                "place and bound again, its second run gave the first run's outputs"
            )
        return f"a reused IO binding's second run differs from a plain run: {problems[0]}"

    def _save(
        self,
        key: str,
        checks: Sequence[OutputCheck],
        candidate: ResolvedCheckpoint,
        plan: SessionPlan,
        providers: list[str],
    ) -> None:
        weights = candidate.weights_path
        described = {
            "model": candidate.label,
            "model_path": None if weights is None else str(weights.resolve()),
            "ort_version": plan.host.ort_version,
            "variant": candidate.variant,
            "providers": providers,
        }
        save_checks(key, checks, described)


def needs_check(
    plan: SessionPlan, candidate: ResolvedCheckpoint, session: Any, verify: bool | Tolerance | None
) -> bool:
    """Whether ``session`` is checked: anything but the CPU provider on the reference weights at
    their precision, unless ``verify=False``."""
    if verify is False:
        return False
    reference = plan.on_reference and candidate.variant is None
    return not reference or list(session.get_providers()) != [CPU_EP]
