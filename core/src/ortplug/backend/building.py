"""``OnnxBackend.from_checkpoint``'s arguments checked into one :class:`BuildRequest` (the path of a
build: docs/internals.md)."""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import attrs

from ..errors import OptionError, VerificationWarning
from ..log import user_stacklevel
from ..pipeline.build_pipeline import BuildPipeline, BuildResult, ServingBackend, measuring_wanted
from ..session.plan import Choice, resolve_checkpoint
from .hints import performance_hint
from .options import StartupFallback, Verification, startup_of, verification_of

if TYPE_CHECKING:
    from ..pipeline.switch_state import StartupSwitch, TrafficSettings
    from ..plugin_host.manager import PluginHost
    from ..providers.session_options import SessionOptionsConfig
    from ..selection import ProviderPolicy
    from ..session.introspection import ValueInfo
    from .dispatch import Dispatcher, Starter

__all__ = ["BuildRequest", "BuiltBackend", "build_request"]


def _hint(
    given: str | None,
    serving: object,
    options: SessionOptionsConfig | None,
    startup: StartupFallback | None,
) -> str:
    """The performance hint asked for (checked against the arguments it cannot go with)."""
    hint = performance_hint(given, options.config_entries if options is not None else None)
    if serving is not None and hint == "latency":
        raise OptionError(
            "serving: used only with performance_hint='throughput' or 'cumulative_throughput', "
            "got performance_hint='latency'"
        )
    if startup is not None and hint != "latency":
        raise OptionError(
            f"performance_hint={hint!r}: expected startup_fallback=False (a throughput build "
            "measures its streams on the session that serves), got startup_fallback=True"
        )
    return hint


class BuiltBackend(ServingBackend, Protocol):
    """What a :class:`BuildRequest` needs of the backend it makes (``OnnxBackend``)."""

    @property
    def inputs(self) -> tuple[ValueInfo, ...]: ...

    @property
    def outputs(self) -> tuple[ValueInfo, ...]: ...

    def _live(self) -> Any: ...

    def _attach_startup(self, switch: StartupSwitch) -> None: ...

    def dispatch_through(self, dispatcher: Dispatcher) -> None: ...


_B = TypeVar("_B", bound=BuiltBackend)


@attrs.frozen
class BuildRequest:
    """One build as asked: the pipeline with its listed candidates and how the result serves."""

    pipeline: BuildPipeline
    listed: Sequence[Choice]
    verification: Verification
    startup: StartupFallback | None
    hint: str
    serving: object
    session_options: SessionOptionsConfig | None

    def backend(self, made: Callable[[BuildResult], _B]) -> _B:
        """The backend ``made`` from what serves first: the CPU reference while a candidate
        comes up behind it (the start-up switch, a lossy candidate on real traffic), else the
        pipeline's choice, handed to a hint's dispatcher when the hint is not latency."""
        if self.behind_cpu:
            reference = self.pipeline.reference()
            backend = made(reference)
            backend._attach_startup(self.start_behind(backend, reference))
            return backend
        if self.hint != "latency":  # import its add-on while ONNX Runtime builds, mostly GIL-free
            threading.Thread(target=self._import_hint, name="ortplug-import", daemon=True).start()
        result = self.pipeline.run(self.listed)
        traffic = self._traffic() if result.lossy else None
        if traffic is not None and traffic.checks > 0:  # lossy, proven on generated inputs only
            if self.hint == "latency":  # the CPU serves until real requests agree
                reference = self.pipeline.reference(result)
                backend = made(reference)
                backend._attach_startup(self.prove_behind(backend, result, reference, traffic))
                return backend
            result = self._served_on_the_reference(result)  # a dispatcher cannot shadow it
        backend = made(result)
        self.check_share(backend, result)
        if self.hint != "latency":
            backend.dispatch_through(self.dispatcher(result, backend))
        return backend

    @property
    def behind_cpu(self) -> bool:
        """Whether the CPU reference serves at once while the chosen accelerator comes up."""
        return self.startup is not None and not self.listed[0].cpu_reference

    def start_behind(self, backend: ServingBackend, reference: BuildResult) -> StartupSwitch:
        """Bring the first candidate up behind ``backend``, which serves ``reference`` now."""
        from ..pipeline.startup import start_on_cpu

        return start_on_cpu(backend, self.pipeline, self.listed, reference, self._traffic())

    def _traffic(self) -> TrafficSettings:
        """The real-traffic settings: ``startup_fallback``'s, else the process's (read once a
        build: a bad variable is said once)."""
        from ..pipeline.real_traffic import traffic_settings

        startup = self.startup or StartupFallback()
        return traffic_settings(startup.real_traffic_checks, startup.spot_check)

    def prove_behind(
        self,
        backend: ServingBackend,
        result: BuildResult,
        reference: BuildResult,
        traffic: TrafficSettings,
    ) -> StartupSwitch:
        """Let lossy ``result`` take over from ``backend``, which serves ``reference`` now, once
        it agreed with it on ``traffic.checks`` real requests (default 8, or
        ``ORTPLUG_REAL_TRAFFIC_CHECKS``; 0: at once)."""
        from ..pipeline.startup import prove_on_traffic

        return prove_on_traffic(backend, self.pipeline, result, reference, traffic)

    def _served_on_the_reference(self, result: BuildResult) -> BuildResult:
        """The CPU reference in place of a lossy choice no real request has proven, said once."""
        chosen = next((c for c in result.candidates if c.chosen), None)
        what = f"{chosen.precision} on {list(chosen.chain)}" if chosen else "a lossy candidate"
        warnings.warn(
            f"{self.pipeline.checkpoint.label}: performance_hint={self.hint!r} serves the CPU "
            f"reference, not {what}: a lossy candidate serves many callers only once proven on "
            "real data (pass it with verify=Verification(inputs=...), or set "
            "ORTPLUG_REAL_TRAFFIC_CHECKS=0 to serve it once verified)",
            VerificationWarning,
            stacklevel=user_stacklevel(),
        )
        return self.pipeline.reference(result)

    def check_share(self, backend: ServingBackend, result: BuildResult) -> None:
        """Hold the served session to ``min_accelerator_share``, when one was asked for (the
        report is made only then: a first result needs none)."""
        share = self.verification.min_accelerator_share
        if share is not None:
            from ..pipeline.share import enforce_share

            enforce_share(backend.report, share, strict=result.plan.strict)

    def _import_hint(self) -> None:
        """Import the hint's add-on now (:meth:`dispatcher` raises what fails)."""
        with contextlib.suppress(Exception):
            self.starter()

    def starter(self) -> Starter:
        """The hint's starter: its add-on's entry point in ``ortplug.hints``."""
        from ..addons import HINTS_GROUP, entry_point_target

        asked = f"performance_hint={self.hint!r}"
        return cast("Starter", entry_point_target(HINTS_GROUP, self.hint, needed_for=asked))

    def dispatcher(self, result: BuildResult, backend: BuiltBackend) -> Dispatcher:
        """What serves a hint other than latency: its add-on's starter run on the proven build."""
        from .dispatch import ServingStart

        starter = self.starter()
        enabled = self.verification.enabled
        return starter(
            ServingStart(
                hint=self.hint,
                config=self.serving,
                result=result,
                session=backend._live(),
                others=functools.partial(self.pipeline.prepared, result) if enabled else None,
                inputs=backend.inputs,
                outputs=backend.outputs,
                session_options=self.session_options,
                verify=self.verification.verify,
                measure=measuring_wanted(self.verification.measure),
                given_inputs=dict(self.pipeline.given or {}),
            )
        )


def build_request(
    checkpoint: object,
    providers: Sequence[Any] | None,
    session_options: SessionOptionsConfig | None,
    policy: ProviderPolicy | None,
    plugins: PluginHost | None,
    verify: object,
    startup_fallback: object,
    hint: str | None,
    serving: object,
) -> BuildRequest:
    """``from_checkpoint``'s arguments (as given, in its order) checked, candidates listed."""
    resolved = resolve_checkpoint(checkpoint)
    verification = verification_of(verify)
    startup = startup_of(startup_fallback, verification)
    served_hint = _hint(hint, serving, session_options, startup)
    given = None
    if verification.inputs is not None:
        from ..verification.given_inputs import given_inputs

        given = given_inputs(verification.inputs, resolved.metadata.input_names)
    pipeline = BuildPipeline(
        resolved,
        session_options,
        verification.verify,
        measuring_wanted(verification.measure),
        verification.min_accelerator_share,
        given,
    )
    listed = pipeline.candidates(providers, policy, plugins)
    return BuildRequest(
        pipeline, listed, verification, startup, served_hint, serving, session_options
    )
