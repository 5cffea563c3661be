"""A backend whose outputs are checked before they are trusted: the policy's choices, in order, until one passes.

What is checked (``verify`` of ``from_checkpoint``):

* ``None`` (default): precision variants and reduced-precision modes the policy picked; the
  reference weights at their precision are trusted;
* ``True``: also every chain with an accelerator, each at its precision's default tolerance
  (a variant's manifest tolerance when it gives one; a reduced-precision mode's, when looser);
* a :class:`~ortplug.checkpoint.Tolerance`: the same, all at that tolerance;
* ``False``: nothing (``from_checkpoint`` keeps the policy to the reference weights first:
  an unverified variant is not trusted).

A policy's rejected choice is a :class:`~ortplug.errors.VerificationWarning` and the
next choice is built; an explicit chain raises :class:`~ortplug.errors.VerificationError`.
The CPU provider on the reference weights is the reference itself and is never checked.
"""

from __future__ import annotations

import hashlib
import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..checkpoint import ResolvedCheckpoint, Tolerance
from ..errors import VerificationError, VerificationWarning
from ..plugins.manager import PluginHost, resolve_plugin_host
from ..providers import CPU_EP
from ..sample_inputs import GENERATION, AcceptedInputs, carried_samples, session_inputs
from ..selection import describe_candidate
from ..selection.autotune import host_signature
from ..session_options import SessionOptionsConfig
from ..verify import (
    Verdict,
    compare_outputs,
    default_tolerance,
    load_checks,
    record_key,
    save_checks,
)
from ._plan import SessionPlan, plan_next, plan_session
from ._session import SessionBuild, create_planned
from ._validation import InputChecker

__all__ = ["Verifier", "build_verified"]

#: What a float input is fed as, by ONNX Runtime type (a variant may take fp16 where the reference takes fp32).
_FLOAT_INPUTS = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
}


def _outputs(session: Any, feed: Mapping[str, np.ndarray]) -> dict[str, Any]:
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feed))))


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
        reference: the first inputs it runs (:func:`~ortplug.sample_inputs.session_inputs`)
        and its outputs on them are what candidates are compared against."""
        self._expected = session_inputs(session, self.reference.metadata.extra, self._samples)
        return self._expected

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

    def verdict(self, candidate: ResolvedCheckpoint, plan: SessionPlan, session: Any) -> Verdict:
        """The verdict on ``session``, built from ``plan`` for ``candidate`` (the reference or a variant).

        Measured, or read from the cache.
        """
        started = time.perf_counter()
        providers = list(session.get_providers())
        key = self._key(plan, candidate, providers)
        checks = load_checks(key)
        cached = checks is not None
        if checks is None:
            expected = self._reference_run()
            outputs = _outputs(session, _fed_as(session, expected.feed))
            checks = compare_outputs(expected.outputs, outputs)
            weights = candidate.weights_path
            described = {
                "model": candidate.label,
                "model_path": None if weights is None else str(weights),
                "ort_version": plan.host.ort_version,
                "variant": candidate.variant,
                "providers": providers,
            }
            save_checks(key, checks, described)
        return Verdict(
            variant=candidate.variant,
            precision=plan.precision or candidate.metadata.precision,
            providers=tuple(providers),
            tolerance=self.tolerance_for(candidate, plan.precision),
            checks=checks,
            inputs=self.inputs_origin,
            cost_ms=(time.perf_counter() - started) * 1e3,
            cached=cached,
        )


def _needs_check(
    plan: SessionPlan, candidate: ResolvedCheckpoint, session: Any, verify: bool | Tolerance | None
) -> bool:
    if not verify:
        return not plan.on_reference  # a variant or reduced precision the policy picked
    return candidate.variant is not None or list(session.get_providers()) != [CPU_EP]


def _choice(plan: SessionPlan) -> str:
    variant = plan.variant.variant if plan.variant else None
    chain = ", ".join(config.kind for config in plan.chain)
    return f"{describe_candidate(variant, plan.precision)} on [{chain}]"


def build_verified(
    checkpoint: ResolvedCheckpoint,
    plan: SessionPlan,
    session_options: SessionOptionsConfig | None,
    verify: bool | Tolerance | None,
) -> tuple[SessionPlan, SessionBuild, Verdict | None]:
    """The first of the policy's choices (``plan``, then its fallbacks) whose outputs pass.

    Returns the plan that was built, its session and the verdict (``None``: nothing was
    checked). Raises :class:`VerificationError` for an explicit chain that fails, or when
    no choice of the policy passes.
    """
    tolerance = verify if isinstance(verify, Tolerance) else None
    verifier = Verifier(checkpoint, resolve_plugin_host(plan.plugins), tolerance)
    rejected: list[str] = []
    current: SessionPlan | None = plan
    while current is not None:
        candidate = current.variant or checkpoint
        built = create_planned(candidate, current, current.options)
        if not _needs_check(current, candidate, built.session, verify):
            return current, built, None
        verdict = verifier.verdict(candidate, current, built.session)
        if verdict.passed:
            return current, built, verdict
        if current.strict:
            raise VerificationError(f"{checkpoint.label}: {verdict.describe()}", verdict)
        rejected.append(verdict.describe())
        following = plan_next(checkpoint, current, session_options)
        if following is not None:
            warnings.warn(
                f"{checkpoint.label}: {verdict.describe()}; taking the next choice: "
                f"{_choice(following)}",
                VerificationWarning,
                stacklevel=3,  # the caller of from_checkpoint
            )
        current = following
    raise VerificationError(
        f"{checkpoint.label}: no choice of the policy passed verification: {'; '.join(rejected)}"
    )
