"""``OnnxBackend``: one ONNX Runtime session built once from a checkpoint, run many times."""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ..checkpoint import CheckpointMetadata
from ..errors import (
    BackendClosedError,
    MissingFileError,
    OptionError,
    OptionTypeError,
    RunTerminatedError,
)
from ..host.runtime import require_onnxruntime
from ..pipeline.startup_status import StartupStatus
from ..session.async_runs import awaited, run_async
from ..session.feeds import bfloat16_as_ort_values
from ..session.inflight import RunOptionsInFlight
from ..session.ort_errors import run_failure
from ..session.run_into import IntoRunner
from ..session.surface import SessionSurface
from .dispatched import arun_on, callback_on
from .options import legacy_keywords
from .served import ServedSession

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..pipeline.build_pipeline import BuildResult, ServeChange, Served
    from ..pipeline.report import ProviderReport, ServingSummary
    from ..pipeline.switch_state import StartupSwitch
    from ..plugin_host.manager import PluginHost
    from ..providers.run_options import RunOptionsConfig
    from ..providers.session_options import SessionOptionsConfig
    from ..selection import ProviderPolicy
    from ..session.async_runs import RunCallback
    from ..session.binding import Binding
    from ..session.introspection import ValueInfo
    from .dispatch import Dispatcher
    from .options import StartupFallback, Verification

__all__ = ["OnnxBackend"]

_CLOSED = "this OnnxBackend is closed; build a new one with OnnxBackend.from_checkpoint(...)"


def _closed_run(*_: object) -> NoReturn:
    raise BackendClosedError(_CLOSED)


class OnnxBackend(SessionSurface, StartupStatus):
    """An :class:`~ortplug.InferenceBackend` backed by ONNX Runtime.

    The session is built once and reused by every :meth:`run`, which is safe to call from
    several threads: runs of a session whose providers do not all declare concurrent runs safe
    (``ProviderType.concurrent_runs``) take turns. Build one with :meth:`from_checkpoint`, or
    wrap a session you own with ``OnnxBackend(metadata, session)`` (``plugins``: the plugin
    host whose provider types say that; default: the process-wide one).
    """

    def __init__(
        self, metadata: CheckpointMetadata, session: Any, *, plugins: PluginHost | None = None
    ) -> None:
        if not isinstance(metadata, CheckpointMetadata):
            raise OptionTypeError(
                f"metadata: expected CheckpointMetadata, got {type(metadata).__name__}"
            )
        if not callable(getattr(session, "run", None)):
            raise OptionTypeError(
                f"session: expected an onnxruntime.InferenceSession, got {type(session).__name__}"
            )
        self._metadata = metadata
        self._ort = require_onnxruntime()
        self._plugins = plugins
        self._inflight = RunOptionsInFlight(self._ort)
        self._dispatcher: Dispatcher | None = None
        self._serving: ServingSummary | None = None  # what it served, kept after close()
        self._infos: dict[str, tuple[ValueInfo, ...]] = {}
        into = functools.partial(IntoRunner, ort_value=self._ort.OrtValue)  # no cycle back here
        self._served = ServedSession(self._checked(session), self._inflight, into)

    @classmethod
    @legacy_keywords
    def from_checkpoint(
        cls,
        checkpoint: Any,
        providers: Sequence[Any] | None = None,
        session_options: SessionOptionsConfig | None = None,
        *,
        policy: ProviderPolicy | None = None,
        plugins: PluginHost | None = None,
        verify: bool | Verification | Any = None,
        startup_fallback: bool | StartupFallback = False,
        performance_hint: str | None = None,
        serving: object | None = None,
    ) -> Self:
        """Build a backend by loading a checkpoint into a new ONNX Runtime session.

        ``providers=None``: the policy picks the chain for this checkpoint and host (enforced
        gracefully); an explicit list is enforced strictly. ``verify`` (default on: ``False``, a
        :class:`~ortplug.Tolerance` or a :class:`~ortplug.Verification`) proves each candidate
        against the CPU reference before it serves; ``startup_fallback`` (``True`` or a
        :class:`~ortplug.StartupFallback`) serves on the CPU while the accelerator comes up;
        ``performance_hint`` and ``serving`` (the serving add-on's) serve many callers. The
        "Choosing and proving providers" and "Serving many callers" pages tell each in full.
        """
        from .building import build_request

        asked = (policy, plugins, verify, startup_fallback, performance_hint, serving)
        return build_request(checkpoint, providers, session_options, *asked).backend(cls._made)

    @classmethod
    def _made(cls, result: BuildResult) -> Self:
        """The backend serving ``result``: its session, plan, verdict, candidates, fallbacks."""
        weights = result.weights
        backend = cls(weights.metadata, result.build.session, plugins=result.plan.plugins)
        backend._served.take_plan(weights, result.plan, result.build)
        backend.serve(_result_change(result))
        return backend

    def _attach_startup(self, switch: StartupSwitch) -> None:
        """Report ``switch``'s bring-up behind the CPU reference that serves now."""
        self._startup = switch
        reason = f"startup fallback: serves while {list(switch.requested)} builds and warms up"
        self._served.chain_reasons = (("cpu", reason),)

    # -- the seams: what serves, and who runs the calls ----------------------------------------

    def serve(self, change: ServeChange) -> Served:
        """Change what serves (the start-up switch, the checks on real traffic and the run-time
        fallback use it): see :mod:`ortplug.backend.served`."""
        return self._served.serve(change)

    def dispatch_through(self, dispatcher: Dispatcher) -> None:
        """Run every call through ``dispatcher`` from now on, until :meth:`close` closes it
        (:mod:`ortplug.backend.dispatch`); the run-time fallback is the dispatcher's then."""
        self._live()
        self._dispatcher, self._serving = dispatcher, dispatcher.report
        self._served.fallbacks = ()
        self._served.run = dispatcher.run
        weakref.finalize(self, dispatcher.close, "the backend was garbage-collected")

    @property
    def dispatcher(self) -> Dispatcher | None:
        """What runs the calls in place of the session (``None``: the latency hint)."""
        return self._dispatcher

    # -- what the backend is ------------------------------------------------------------------

    @property
    def metadata(self) -> CheckpointMetadata:
        """Metadata describing the checkpoint this backend executes."""
        return self._metadata

    @property
    def providers(self) -> tuple[str, ...]:
        """The provider chain ONNX Runtime realized, in priority order."""
        return self._served.providers

    @property
    def requested_providers(self) -> tuple[str, ...]:
        """The chain that was asked for (equal to ``providers`` for a wrapped session)."""
        return self._served.requested

    @property
    def chain_reasons(self) -> tuple[tuple[str, str], ...]:
        """``(kind, reason)`` for each provider asked for: the policy's reasons, or "explicit"."""
        return self._served.chain_reasons

    @property
    def build_messages(self) -> tuple[str, ...]:
        """What ONNX Runtime warned or logged while building the session."""
        return self._served.build_messages

    @property
    def session_options(self) -> SessionOptionsConfig | None:
        """The options the session was built with (``None`` for a wrapped session)."""
        return self._served.options

    @property
    def report(self) -> ProviderReport:
        """Why this session runs where it runs: chain, options, node placement, messages, reasons."""
        return self._served.report(self._live(), self.startup_status, self.serving)

    @property
    def performance_hint(self) -> str:
        """``"latency"``, or the hint a dispatcher serves (``"throughput"``, ...)."""
        return "latency" if self._serving is None else self._serving.hint

    @property
    def serving(self) -> ServingSummary | None:
        """How a dispatcher serves many callers, as it serves now (``None``: the latency hint)."""
        return self._serving if self._dispatcher is None else self._dispatcher.report

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._served.session is None

    def _live(self) -> Any:
        session = self._served.session
        if session is None:
            _closed_run()
        return session

    # -- running --------------------------------------------------------------------------------

    def run(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        outputs: Sequence[str] | str | None = None,
        *,
        run_options: RunOptionsConfig | None = None,
    ) -> Mapping[str, Any]:
        """Run the model; return the outputs by name (all, or the ``outputs`` named).

        ``inputs`` maps input (or overridable initializer) names to values — numpy arrays,
        lists of arrays for sequences, dicts for maps, ``None`` for an empty optional — or lists
        them in model order. Raises :class:`~ortplug.errors.InputValidationError` naming each
        bad input, :class:`~ortplug.errors.RunTerminatedError` after :meth:`terminate`,
        :class:`~ortplug.errors.RunFailedError` when ONNX Runtime fails the run,
        :class:`~ortplug.errors.BackendClosedError` when the backend is closed.
        """
        if type(inputs) is not dict:
            inputs = self._feed(inputs)
        names = self._output_names if outputs is None else self._selected(outputs)
        try:  # the hot path, inline: no call frame more than ONNX Runtime's own run
            if run_options is None:
                results = self._served.run(names, inputs)
            else:
                results = self._run_with(names, inputs, run_options)
        except Exception as exc:
            wrapped = bfloat16_as_ort_values(inputs, self._ort.OrtValue)
            if wrapped is not None:
                return self.run(wrapped, names, run_options=run_options)
            refused = self._inflight.terminated or bool(self._checker.problems(inputs))
            if refused or not self._served.fall_back(exc, self._metadata.model_family):
                self._raise_explained(inputs, exc)
            try:  # retried once, on the next verified choice
                if run_options is None:
                    results = self._served.run(names, inputs)
                else:
                    results = self._run_with(names, inputs, run_options)
            except Exception as again:
                self._raise_explained(inputs, again)
        return dict(zip(names, results))

    def _run_with(self, names: list[str], feed: Any, config: RunOptionsConfig) -> list[Any]:
        """One run with the caller's own run options (on a dispatcher, a request run alone)."""
        with self._inflight.scoped(config) as options:
            if self._dispatcher is not None:
                return self._dispatcher.submit(feed, names, options).result()
            results = list(self._live().run(names, feed, options))
        watch = self._served.watch
        if watch is not None:
            watch.tap(names, feed, results, self._served.plan)
        return results

    def run_into(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        outputs: Mapping[str, np.ndarray],
        *,
        run_options: RunOptionsConfig | None = None,
    ) -> Mapping[str, np.ndarray]:
        """Run the model writing the named outputs into the caller's preallocated arrays; returns
        ``outputs``. Reusing the same arrays call after call allocates nothing (a dispatcher
        copies into them)."""
        feed = inputs if type(inputs) is dict else self._feed(inputs)
        if self._dispatcher is not None:
            from .dispatched import copy_into

            def run(feed: dict[str, Any], names: list[str]) -> Mapping[str, Any]:
                return self.run(feed, names, run_options=run_options)

            return copy_into(run, feed, outputs, (self.inputs, self.outputs))
        self._live()
        into = self._served.into
        if run_options is None:  # the hot path: the shared options, no context to enter
            written = into.run(feed, outputs, self._inflight.shared, self._raise_explained)
        else:
            with self._inflight.scoped(run_options) as options:
                written = into.run(feed, outputs, options, self._raise_explained)
        self._served.tap_written(feed, written)  # a spot check samples every run form
        return written

    def bind(self, run_options: RunOptionsConfig | None = None) -> Binding:
        """An IO binding on this session: bind inputs and outputs once, then ``run()`` repeatedly."""
        from ..session.binding import Binding

        binding = Binding(
            self._live(),
            self._inflight.for_binding(run_options),
            (*self.inputs, *self.overridable_initializers),
            self.outputs,
            self._ort.OrtValue,
        )
        self._inflight.add_binding(binding)
        return binding

    def run_async(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        callback: RunCallback,
        outputs: Sequence[str] | str | None = None,
        *,
        run_options: RunOptionsConfig | None = None,
    ) -> None:
        """Start a run on ONNX Runtime's thread pool (a dispatcher's stream under a throughput
        hint); ``callback(outputs, error)`` gets the result, exactly one of them ``None``. It runs
        on that thread: keep it short."""
        if not callable(callback):
            raise OptionTypeError(f"callback: expected a callable, got {type(callback).__name__}")
        feed, names, own = self._request(inputs, outputs, run_options)
        explained, ended = functools.partial(self._explained, feed), self._ended(own)
        try:
            if self._dispatcher is not None:
                future = self._dispatcher.submit(feed, names, own)
                callback_on(future, names, callback, explained, ended)
            else:
                shared = self._inflight.shared
                watch = self._served.watch  # a spot check samples every run form
                if watch is not None:
                    callback = watch.tapping(callback, names, feed, self._served.plan)
                run_async(self._live(), names, feed, own or shared, callback, explained, ended)
        except Exception as exc:
            ended()
            self._raise_explained(feed, exc)

    async def arun(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        outputs: Sequence[str] | str | None = None,
        *,
        run_options: RunOptionsConfig | None = None,
    ) -> Mapping[str, Any]:
        """``await backend.arun(inputs)``: :meth:`run_async` for asyncio; the loop stays free (a
        cancelled await cancels a dispatcher's queued request)."""
        if self._dispatcher is None:
            return await awaited(
                lambda done: self.run_async(inputs, done, outputs, run_options=run_options)
            )
        feed, names, own = self._request(inputs, outputs, run_options)
        try:
            future = self._dispatcher.submit(feed, names, own)
        except Exception as exc:
            self._ended(own)()
            self._raise_explained(feed, exc)
        return await arun_on(
            future, names, functools.partial(self._explained, feed), self._ended(own)
        )

    def _request(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        outputs: Sequence[str] | str | None,
        run_options: RunOptionsConfig | None,
    ) -> tuple[dict[str, Any], list[str], Any]:
        """A run's feed, output names and own run options (``None``: the shared ones)."""
        feed = self._feed(inputs)
        names = self._output_names if outputs is None else self._selected(outputs)
        return feed, names, None if run_options is None else self._inflight.own(run_options)

    def _ended(self, own: Any) -> Callable[[], None]:
        """What a run with its ``own`` run options does when it ends: they are forgotten."""
        return functools.partial(self._inflight.forget, own)

    def terminate(self) -> None:
        """Stop the runs in progress (and refuse new ones) until :meth:`reset_terminate`; safe
        from any thread. The stopped runs raise :class:`~ortplug.errors.RunTerminatedError`."""
        self._set_terminate(True)

    def reset_terminate(self) -> None:
        """Accept runs again after :meth:`terminate`."""
        self._set_terminate(False)

    def _set_terminate(self, terminate: bool) -> None:
        if self._dispatcher is not None:
            self._dispatcher.terminate(terminate)
        self._inflight.set_terminate(terminate)

    # -- profiling and live settings -----------------------------------------------------------

    def register_custom_op_library(self, path: str | os.PathLike[str]) -> None:
        """Add a custom-operator library and rebuild the session with the same options. Runs in
        progress finish on the old session; do not call while other threads start new runs."""
        library = os.fspath(path)
        if not os.path.isfile(library):
            raise MissingFileError(f"register_custom_op_library: file not found: {library}")
        self._live()
        if self._dispatcher is not None:
            raise OptionError(
                f"register_custom_op_library: expected a backend with the latency hint, got "
                f"performance_hint={self.performance_hint!r}; build it with the library in "
                "SessionOptionsConfig(custom_op_libraries=[...])"
            )
        self._served.register(library, self._renewed)

    def _renewed(self, session: Any) -> Any:
        """``session`` checked to serve in place of the old one, whose bindings are released."""
        self._release_bindings()
        return self._checked(session)

    # -- errors and lifetime ----------------------------------------------------------------------

    def _raise_explained(self, inputs: object, exc: Exception) -> NoReturn:
        raise self._explained(inputs, exc) from exc

    def _explained(self, feed: object, error: BaseException) -> BaseException:
        """The error a caller gets for ``error`` of a run of ``feed`` (as :meth:`run` raises it)."""
        if self._served.session is None:
            return BackendClosedError(_CLOSED)
        if not isinstance(error, Exception) or isinstance(
            error,
            (BackendClosedError, RunTerminatedError),  # said already
        ):
            return error
        model, providers = self._metadata.model_family, self._served.providers
        terminated, problems = self._inflight.terminated, self._checker.problems(feed)
        return run_failure(
            error, model=model, providers=providers, terminated=terminated, problems=problems
        )

    def _release_bindings(self) -> None:
        for binding in self._inflight.take_bindings():
            binding.release()

    def close(self) -> None:
        """Release the session and everything native made from it, even while this object and
        its bindings stay referenced; later runs raise :class:`BackendClosedError`. Idempotent.
        A dispatcher fails its queued requests, stops its runs and joins its threads first."""
        dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            dispatcher.close(_CLOSED)  # its threads joined: its report is what it served last
            self._serving = dispatcher.report
        self._release_bindings()
        self._inflight.close()
        self._served.close(_closed_run)  # a start-up fallback's checks on real traffic end here

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"providers={list(self.providers)}"
        return f"<OnnxBackend {self._metadata.model_family!r} {state}>"


def _result_change(result: BuildResult) -> ServeChange:
    from ..pipeline.build_pipeline import ServeChange

    return ServeChange(result=result)
