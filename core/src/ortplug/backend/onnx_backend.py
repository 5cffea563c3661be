"""``OnnxBackend``: one ONNX Runtime session built once from a checkpoint, run many times."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ..checkpoint import CheckpointMetadata, ResolvedCheckpoint, Tolerance
from ..checkpoint.variants import check_verify
from ..errors import (
    BackendClosedError,
    InputValidationError,
    MissingFileError,
    OptionError,
    OptionTypeError,
    ProviderFallbackWarning,
    RunTerminatedError,
)
from ..host.runtime import require_onnxruntime
from ..log import user_stacklevel
from ..pipeline.build_pipeline import (
    BuildPipeline,
    BuildResult,
    ServeChange,
    Served,
    measuring_wanted,
)
from ..plugin_host.manager import resolve_plugin_host
from ..providers.configs import CPU_EP
from ..providers.options import encode_option
from ..providers.run_options import RunOptionsConfig
from ..session.build import SessionBuild, create_planned
from ..session.feeds import bfloat16_as_ort_values, check_into_outputs, feed_by_name, select_outputs
from ..session.plan import SessionPlan, StalePlanError, resolve_checkpoint
from ..session.serial import serialised
from ..session.validation import InputChecker, InputSpec
from .hints import performance_hint

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..pipeline.report import Candidate, ProviderReport
    from ..pipeline.switch_state import StartupSwitch
    from ..pipeline.traffic_check import TrafficCheck
    from ..plugin_host.manager import PluginHost
    from ..providers.session_options import SessionOptionsConfig
    from ..selection import ProviderPolicy
    from ..session.binding import Binding
    from ..session.introspection import MemoryInfo, ModelInfo, ValueInfo
    from ..verification.verdicts import Verdict
    from .dispatch import Dispatcher, ServingSummary

__all__ = ["OnnxBackend"]

#: Called by ``run_async`` with the outputs, or with the error that stopped the run.
RunCallback = Callable[[Mapping[str, Any] | None, BaseException | None], None]


_CLOSED = "this OnnxBackend is closed; build a new one with OnnxBackend.from_checkpoint(...)"


def _closed_run(*_: object) -> NoReturn:
    raise BackendClosedError(_CLOSED)


def _hint(
    given: str | None,
    serving: object,
    options: SessionOptionsConfig | None,
    startup_fallback: bool,
) -> str:
    """The performance hint asked for (checked against the arguments it cannot go with)."""
    entries = options.config_entries if options is not None else None
    hint = performance_hint(given, entries)
    if serving is not None and hint == "latency":
        raise OptionError(
            "serving: used only with performance_hint='throughput' or 'cumulative_throughput', "
            "got performance_hint='latency'"
        )
    if startup_fallback and hint != "latency":
        raise OptionError(
            f"performance_hint={hint!r}: expected startup_fallback=False (a throughput build "
            "measures its streams on the session that serves), got startup_fallback=True"
        )
    return hint


class _IntoCache(threading.local):
    """Per-thread IO binding of ``run_into``, and the OrtValues wrapping the caller's arrays."""

    binding: Any = None
    signature: object = None  # (input names/shapes/dtypes, output names/array ids) last bound
    outputs: dict[str, tuple[np.ndarray, Any]]

    def __init__(self) -> None:
        self.outputs = {}


class OnnxBackend:
    """An :class:`~ortplug.InferenceBackend` backed by ONNX Runtime.

    The session is built once and reused by every :meth:`run`, which is safe to
    call from several threads: runs of a session whose providers do not all declare
    concurrent runs safe (``ProviderType.concurrent_runs``) take turns. Build one with
    :meth:`from_checkpoint`, or wrap a session you own with ``OnnxBackend(metadata,
    session)`` (``plugins``: the plugin host whose provider types say that; default:
    the process-wide one).
    """

    #: Sees each run()'s request and outputs: a startup fallback's checks on real traffic.
    _watch: TrafficCheck | None = None

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
        self._adopt(session)
        self._requested = self._providers
        self._build_messages: tuple[str, ...] = ()
        self._chain_reasons: tuple[tuple[str, str], ...] = ()
        self._rebuild: Callable[[SessionOptionsConfig], Any] | None = None
        self._options: SessionOptionsConfig | None = None
        self._plan: SessionPlan | None = None
        self._checkpoint: ResolvedCheckpoint | None = None
        self._startup: StartupSwitch | None = None
        self._verification: Verdict | None = None
        self._candidates: tuple[Candidate, ...] = ()
        #: The verified choices left for a run-time fallback, best first, and the reference weights.
        self._fallbacks: tuple[SessionPlan, ...] = ()
        self._origin: ResolvedCheckpoint | None = None
        self._fallback_lock = threading.Lock()
        # held by register_custom_op_library's rebuild and a startup switch: never both at once
        self._rebuild_lock = threading.Lock()
        #: What runs the calls of a throughput hint (``None``: the latency hint, the session).
        self._server: Dispatcher | None = None
        self._serving: ServingSummary | None = None

    def _adopt(self, session: Any) -> None:
        """Take ``session`` as this backend's (at construction and after a rebuild), its runs
        serialised where a provider does not declare concurrent runs."""
        session = serialised(session, resolve_plugin_host(self._plugins))
        checker = InputChecker.from_session(session)
        output_names = [o.name for o in session.get_outputs()]
        self._metadata.require_names_in(
            checker.names,
            output_names,
            origin="metadata",
            also_accepted=sorted(checker.overridable),
        )
        self._session: Any = session
        self._output_names = output_names
        self._checker = checker
        self._overridable = tuple(sorted(checker.overridable))
        self._providers = tuple(session.get_providers())
        self._run_options = RunOptionsConfig().to_ort(self._ort)
        self._inflight: set[Any] = set()
        self._inflight_lock = threading.Lock()
        self._terminated = False
        self._bindings: weakref.WeakSet[Binding] = weakref.WeakSet()
        self._into = _IntoCache()
        self._infos: dict[str, tuple[ValueInfo, ...]] = {}
        self._run: Callable[..., list[Any]] = self._tapped(session)

    def _tapped(self, session: Any) -> Callable[..., list[Any]]:
        """``session``'s run with the shared run options, each request shown to the watch if any."""
        run = functools.partial(session.run, run_options=self._run_options)
        watch = self._watch
        return run if watch is None else watch.wrap(run, self._plan)

    def _watch_with(self, watch: TrafficCheck | None) -> bool:
        """Show ``watch`` every run()'s request and outputs from now on (``None``: nothing); the
        watch it replaces is stopped. False when the backend is closed."""
        with self._inflight_lock:
            live = self._session is not None
            old, self._watch = self._watch, watch if live else None
            if live:
                self._run = self._tapped(self._session)
        if old is not None and old is not self._watch:
            old.stop()
        if watch is not None and not live:
            watch.stop()
        return live

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: ResolvedCheckpoint,
        providers: Sequence[Any] | None = None,
        session_options: SessionOptionsConfig | None = None,
        *,
        policy: ProviderPolicy | None = None,
        plugins: PluginHost | None = None,
        min_accelerator_share: float | None = None,
        startup_fallback: bool = False,
        verify: bool | Tolerance | None = None,
        measure: bool | None = None,
        real_traffic_checks: int | None = None,
        spot_check: float | None = None,
        verify_inputs: Mapping[str, np.ndarray] | None = None,
        performance_hint: str | None = None,
        serving: object | None = None,
    ) -> Self:
        """Build a backend by loading a checkpoint into a new ONNX Runtime session.

        With ``providers=None`` the policy (default :class:`DefaultProviderPolicy`)
        picks a chain for this checkpoint and host, enforced gracefully. An explicit
        ``providers`` list (config objects, ``{"kind": ...}`` dicts, ``"cuda"`` or
        ``"CUDAExecutionProvider"``) is used as given and enforced strictly: a
        requested accelerator that is not realized raises
        :class:`~ortplug.errors.ProviderNotRealizedError`. ``plugins`` selects the
        plugin host (default: the process-wide one). ``min_accelerator_share``
        (0..1) also treats a session whose accelerators took fewer of the graph's
        nodes as a fallback: an error for an explicit chain, a warning for a policy's.

        ``verify`` (default ``None``: on) checks every candidate other than the CPU
        provider on the reference weights against that reference before it serves: a
        plain run and a reused IO binding fed two different inputs, on inputs the model
        accepts, at the candidate's precision's default tolerance (a
        :class:`~ortplug.checkpoint.Tolerance` sets it); verdicts are cached per model,
        chain, host and runtime. ``verify_inputs`` (input name -> numpy array: real data)
        are verified on first, ahead of the checkpoint's ``samples/`` for the same input; only
        the inputs not given are generated, and the verdict's ``inputs`` says ``given``. Arrays
        the CPU reference does not take raise :class:`~ortplug.errors.GivenInputsError`.
        A candidate that fails to build, raises on those inputs,
        takes no node of the graph (or fewer than ``min_accelerator_share``), returns
        outputs beyond the tolerance or stale ones is rejected with one line: a policy's
        choice gives way to its next one with a :class:`~ortplug.errors.VerificationWarning`,
        an explicit chain raises :class:`~ortplug.errors.VerificationError`.
        ``verify=False`` checks nothing and keeps the policy to the reference weights.

        ``measure`` (default ``None``: on unless ``ORTPLUG_MEASURE=0``): on the first
        build of a model on a host, the verified choices (the policy's first three) and
        the CPU reference are timed side by side and the fastest serves (a candidate must
        beat the CPU reference to win); the winner is recorded where ``ortplug bench
        --save`` records, and later processes build it directly. ``report.candidates``
        shows every candidate, its verdict, time and outcome. A policy's choice whose
        ``run()`` later fails with a provider error gives way to the next verified choice
        (the call is retried once, with a :class:`~ortplug.errors.ProviderFallbackWarning`).

        ``startup_fallback=True``: when the chain has an accelerator, return as soon
        as a CPU session serves (the reference), and build, verify and time the
        candidates in the background; the backend switches between runs (runs in flight
        finish where they started) only to a verified candidate that is faster, and only
        after it agreed with the CPU reference on ``real_traffic_checks`` real requests
        (default 8, or ``ORTPLUG_REAL_TRAFFIC_CHECKS``; 0: once verified): until then the
        CPU answers every call while the candidate runs the same requests in the background,
        and at the first disagreement it is rejected "on real inputs" and the CPU keeps
        serving. Once it serves, a share ``spot_check`` of its calls (default 0.01, or
        ``ORTPLUG_SPOT_CHECK``; 0: none) is run again on the CPU reference in the background;
        a disagreement moves the calls that follow to the next verified choice.
        :meth:`wait_ready` waits until that settled; a candidate that fails leaves the CPU
        serving, with a warning carrying the cause (and :attr:`startup_error`).

        ``performance_hint`` (default ``None``: the session config entry
        ``ortplug.performance_hint`` of ``session_options``, else ``"latency"``): ``"latency"``
        runs each call on the caller's thread, as fast as one caller can be served.
        ``"throughput"`` serves many callers: execution streams (intra-op threads split so
        streams x threads never exceed the CPUs this process may use) and a request queue that
        batches concurrent requests along the batch dimension, each caller getting its own
        rows back; :meth:`run`, :meth:`run_into`, :meth:`run_async` and :meth:`arun` go through
        it, :meth:`bind` keeps its own session. ``"cumulative_throughput"`` does the same on
        every verified device at once (a GPU and the CPU, two GPUs), dropping a device that
        fails at run time. Streams, threads per stream, batch size and queueing delay are
        measured on the model here at its first throughput build (a couple of seconds),
        recorded, and shown in :attr:`serving` and ``report``; ``serving``
        (a :class:`~ortplug.backend.ServingConfig`) fixes any of them instead.
        """
        resolved = resolve_checkpoint(checkpoint)
        verify = check_verify(verify)
        hint = _hint(performance_hint, serving, session_options, startup_fallback)
        checked_traffic = real_traffic_checks is not None or spot_check is not None
        if checked_traffic and (not startup_fallback or verify is False):
            raise OptionError(
                "real_traffic_checks, spot_check: used only with startup_fallback=True and "
                f"verification on, got startup_fallback={startup_fallback!r}, verify={verify!r}"
            )
        given = None
        if verify_inputs is not None:
            from ..verification.given_inputs import given_inputs

            given = given_inputs(verify_inputs, resolved.metadata.input_names)
            if verify is False:
                raise OptionError(
                    f"verify_inputs: used only with verification on, got verify={verify!r}"
                )
        pipeline = BuildPipeline(
            resolved,
            session_options,
            verify,
            measuring_wanted(measure),
            min_accelerator_share,
            given,
        )
        listed = pipeline.candidates(providers, policy, plugins)
        if startup_fallback and not listed[0].cpu_reference:
            from ..pipeline.real_traffic import traffic_settings
            from ..pipeline.startup import start_on_cpu  # only for this path: ~3 ms of imports

            traffic = traffic_settings(real_traffic_checks, spot_check)
            reference = pipeline.reference()
            backend = cls._made(reference)
            backend._startup = start_on_cpu(backend, pipeline, listed, reference, traffic)
            reason = f"startup fallback: serves while {list(backend._startup.requested)} builds"
            backend._chain_reasons = (("cpu", f"{reason} and warms up"),)
            return backend
        result = pipeline.run(listed)
        backend = cls._made(result)
        if min_accelerator_share is not None:
            from ..pipeline.share import enforce_share

            enforce_share(backend.report, min_accelerator_share, strict=result.plan.strict)
        if hint != "latency":
            others = None if verify is False else functools.partial(pipeline.prepared, result)
            backend._start_dispatcher(
                result, hint, serving, others, session_options, verify, measure
            )
        return backend

    def _start_dispatcher(
        self,
        result: BuildResult,
        hint: str,
        serving: object,
        others: Callable[[], list[SessionPlan]] | None,
        session_options: SessionOptionsConfig | None,
        verify: bool | Tolerance | None,
        measure: bool | None,
    ) -> None:
        """Hand every run to the add-on that serves ``hint`` (entry-point group ``ortplug.hints``)."""
        from ..addons import HINTS_GROUP, entry_point_target
        from .dispatch import ServingStart

        starter = entry_point_target(HINTS_GROUP, hint, needed_for=f"performance_hint={hint!r}")
        start = ServingStart(
            hint=hint,
            config=serving,
            result=result,
            session=self._live(),
            others=others,
            inputs=self.inputs,
            outputs=self.outputs,
            session_options=session_options,
            verify=verify,
            measure=measuring_wanted(measure),
        )
        self.dispatch_through(starter(start))

    def dispatch_through(self, dispatcher: Dispatcher) -> None:
        """Run every call through ``dispatcher`` from now on, until :meth:`close` closes it (the
        seam of :mod:`ortplug.backend.dispatch`: a serving add-on's request queue and streams).

        A dispatcher answers a failing run itself, so the run-time fallback stops here."""
        self._live()
        self._server, self._serving = dispatcher, dispatcher.report
        self._fallbacks = ()
        self._run = dispatcher.run
        weakref.finalize(self, dispatcher.close, "the backend was garbage-collected")

    @classmethod
    def _made(cls, result: BuildResult) -> Self:
        """The backend serving ``result``: its session, plan, verdict, candidates, fallbacks."""
        weights = result.weights
        backend = cls(weights.metadata, result.build.session, plugins=result.plan.plugins)
        backend._take_plan(weights, result.plan, result.build)
        backend._serve(ServeChange(result=result))
        return backend

    def _serve(self, change: ServeChange) -> Served:
        """The one seam through which what serves changes (the startup switch, the checks on
        real traffic and the run-time fallback all use it); see :class:`ServeChange`.

        Raises :class:`StalePlanError` when a switch's plan lacks custom-op libraries
        registered on this backend since it was made.
        """
        moved = True
        if change.failed is not None:
            moved = self._next_choice(change.failed, change.instead)
        result = change.result
        if result is not None and change.switch:
            moved = self._switch_to(result.weights, result.plan, result.build)
        if result is not None and moved:
            self._verification = result.verdict
            self._candidates = result.candidates
            self._fallbacks = result.fallbacks
            self._origin = result.origin
        if change.candidates is not None:
            self._candidates = change.candidates
        if change.set_watch:
            moved = self._watch_with(change.watch) and moved
        return Served(moved, self._plan, self._session, self._candidates)

    def _take_plan(
        self, resolved: ResolvedCheckpoint, plan: SessionPlan, build: SessionBuild
    ) -> None:
        """Record what ``build`` was asked for and why (at construction and at a switch)."""
        self._requested = build.requested
        self._build_messages = build.messages
        self._chain_reasons = tuple(zip((c.kind for c in plan.chain), plan.reasons))
        if plan.device_policy is not None:
            reason = f"chosen by ONNX Runtime's {plan.device_policy} device policy"
            self._chain_reasons = tuple((name, reason) for name in build.session.get_providers())
        self._options = plan.options
        self._plan = plan
        self._checkpoint = resolved  # owns in-memory weights ORT reads for the session's life
        self._rebuild = lambda options: create_planned(resolved, plan, options).session

    def _switch_to(
        self, resolved: ResolvedCheckpoint, plan: SessionPlan, build: SessionBuild
    ) -> bool:
        """Serve from ``build``'s session from the next run on; False when the backend was closed.

        One assignment of the run function moves new runs over; runs in flight keep
        the session they started on, which is freed when the last of them returns.
        Raises :class:`StalePlanError` when custom-op libraries were registered on this
        backend after ``plan`` was made: its session lacks them.
        """
        with self._rebuild_lock, self._inflight_lock:
            if self._session is None:
                return False
            registered = self._options.custom_op_libraries if self._options else ()
            missing = [lib for lib in registered if lib not in plan.options.custom_op_libraries]
            if missing:
                raise StalePlanError(tuple(missing))
            self._take_plan(resolved, plan, build)
            self._into = _IntoCache()  # per-thread IO bindings belong to the old session
            self._providers = tuple(build.session.get_providers())
            self._session = build.session
            self._run = self._tapped(build.session)
            return True

    # -- startup fallback ---------------------------------------------------------------------

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until a startup fallback settled: its accelerator serves, or it will not (it
        failed, or was rejected); False on time-out.

        A candidate that shadows the CPU reference needs real requests to agree on before
        it serves (:attr:`shadowing`): without them this waits for the time-out. True at once
        for a backend built without ``startup_fallback`` (or whose chain has no
        accelerator). :attr:`providers` says what serves now, :attr:`startup_status` why.
        """
        return self._startup is None or self._startup.done.wait(timeout)

    @property
    def startup_error(self) -> BaseException | None:
        """Why a startup fallback's accelerator did not come up (``None``: it did, or is coming)."""
        return None if self._startup is None else self._startup.error

    @property
    def startup_status(self) -> str | None:
        """What a startup fallback is doing or did, in one line (``None``: built without one)."""
        return None if self._startup is None else self._startup.status

    @property
    def shadowing(self) -> bool:
        """Whether a verified candidate is checked on the requests the CPU reference serves now
        (it serves after ``real_traffic_checks`` of them agreed)."""
        startup = self._startup
        return startup is not None and startup.traffic is not None and not startup.done.is_set()

    # -- what the backend is ------------------------------------------------------------------

    @property
    def metadata(self) -> CheckpointMetadata:
        """Metadata describing the checkpoint this backend executes."""
        return self._metadata

    @property
    def providers(self) -> tuple[str, ...]:
        """The provider chain ONNX Runtime realized, in priority order."""
        return self._providers

    @property
    def requested_providers(self) -> tuple[str, ...]:
        """The chain that was asked for (equal to ``providers`` for a wrapped session)."""
        return self._requested

    @property
    def provider_options(self) -> dict[str, dict[str, str]]:
        """The options each realized provider runs with, as ONNX Runtime reports them."""
        return {k: dict(v) for k, v in self._live().get_provider_options().items()}

    @property
    def chain_reasons(self) -> tuple[tuple[str, str], ...]:
        """``(kind, reason)`` for each provider asked for: the policy's reasons, or "explicit"."""
        return self._chain_reasons

    @property
    def build_messages(self) -> tuple[str, ...]:
        """What ONNX Runtime warned or logged while building the session."""
        return self._build_messages

    @property
    def session_options(self) -> SessionOptionsConfig | None:
        """The options the session was built with (``None`` for a wrapped session)."""
        return self._options

    @property
    def input_names(self) -> list[str]:
        """The model's input names, in model order."""
        return self._checker.names

    @property
    def input_specs(self) -> tuple[InputSpec, ...]:
        """Each input's name, ORT type string and (symbolic) shape, in model order."""
        return self._checker.inputs

    @property
    def output_names(self) -> list[str]:
        """The model's output names, in model order (the keys ``run`` returns)."""
        return list(self._output_names)

    def _info(self, which: str) -> tuple[ValueInfo, ...]:
        cached = self._infos.get(which)
        if cached is None:
            from ..session.introspection import value_infos

            getter = getattr(self._live(), f"get_{which}")
            cached = self._infos[which] = value_infos(getter())
        return cached

    @property
    def inputs(self) -> tuple[ValueInfo, ...]:
        """Typed info of each input: kind, element type, shape with symbolic dims, nesting."""
        return self._info("inputs")

    @property
    def outputs(self) -> tuple[ValueInfo, ...]:
        """Typed info of each output."""
        return self._info("outputs")

    @property
    def overridable_initializers(self) -> tuple[ValueInfo, ...]:
        """Initializers that may be fed by name to replace their stored value."""
        return self._info("overridable_initializers")

    @property
    def model_info(self) -> ModelInfo:
        """Producer, graph name, domain, version, description and custom metadata of the model."""
        from ..session.introspection import ModelInfo

        return ModelInfo.from_session(self._live())

    @property
    def input_memory_info(self) -> tuple[MemoryInfo, ...]:
        """Where each input is expected (device, memory type), in model order."""
        from ..session.introspection import MemoryInfo

        infos = self._live().get_input_memory_infos()
        return tuple(MemoryInfo.from_ort(n, i) for n, i in zip(self.input_names, infos))

    @property
    def output_memory_info(self) -> tuple[MemoryInfo, ...]:
        """Where each output is produced, in model order."""
        from ..session.introspection import MemoryInfo

        infos = self._live().get_output_memory_infos()
        return tuple(MemoryInfo.from_ort(n, i) for n, i in zip(self._output_names, infos))

    def node_assignment(self) -> dict[str, int]:
        """How many graph nodes each provider took, e.g. ``{"CUDAExecutionProvider": 41, ...}``.

        Recorded for every backend built by :meth:`from_checkpoint` (unless its
        config entry ``session.record_ep_graph_assignment_info`` is set to
        ``"0"``); for a wrapped session without it this raises ``RuntimeError``.
        """
        from ..session.placement import node_counts  # the report's: not on a plain run's path

        session = self._live()
        try:
            return node_counts(session)
        except Exception as exc:
            raise RuntimeError(
                "node assignment was not recorded for this session: build it with "
                "OnnxBackend.from_checkpoint (or set the session config entry "
                f"'session.record_ep_graph_assignment_info' to '1') ({type(exc).__name__}: {exc})"
            ) from exc

    @property
    def report(self) -> ProviderReport:
        """Why this session runs where it runs: chain, options, node placement, messages, reasons."""
        from ..pipeline.report import ProviderReport

        session = self._live()
        try:
            nodes = self.node_assignment()
        except RuntimeError:
            nodes = {}
        plan = self._plan
        return ProviderReport(
            requested=self._requested,
            realized=self._providers,
            provider_options=session.get_provider_options(),
            nodes=nodes,
            messages=self._build_messages,
            reasons=self._chain_reasons,
            declined=plan.declined if plan else (),
            host=plan.host.to_dict() if plan else {},
            verification=self._verification,
            candidates=self._candidates,
            precision=plan.precision if plan else None,
            startup=self.startup_status,
            serving=self._serving,
        )

    @property
    def performance_hint(self) -> str:
        """``"latency"``, ``"throughput"`` or ``"cumulative_throughput"``: how calls are served."""
        return "latency" if self._serving is None else self._serving.hint

    @property
    def serving(self) -> ServingSummary | None:
        """How a throughput hint serves many callers: each device's streams, threads, batch size,
        queueing delay and measured requests per second (``None``: the latency hint)."""
        return self._serving

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._session is None

    def _live(self) -> Any:
        if self._session is None:
            _closed_run()
        return self._session

    # -- running --------------------------------------------------------------------------------

    def run(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        outputs: Sequence[str] | str | None = None,
        *,
        run_options: RunOptionsConfig | None = None,
    ) -> Mapping[str, Any]:
        """Run the model; return the outputs by name (all, or the ``outputs`` named).

        ``inputs`` maps input (or overridable initializer) names to values —
        numpy arrays, lists of arrays for sequences, dicts for maps, ``None`` for
        an empty optional — or lists them in model order. Raises
        :class:`~ortplug.errors.InputValidationError` naming each bad input,
        :class:`~ortplug.errors.RunTerminatedError` after :meth:`terminate`,
        ``RuntimeError`` when the backend is closed.
        """
        if type(inputs) is not dict:
            inputs = self._feed(inputs)
        names = self._output_names if outputs is None else self._selected(outputs)
        try:  # the hot path, inline: no call frame more than ONNX Runtime's own run
            if run_options is None:
                results = self._run(names, inputs)
            else:
                results = self._run_with(names, inputs, run_options)
        except Exception as exc:
            wrapped = bfloat16_as_ort_values(inputs, self._ort.OrtValue)
            if wrapped is not None:
                return self.run(wrapped, names, run_options=run_options)
            if not self._fall_back(inputs, exc):
                self._raise_explained(inputs, exc)
            try:  # retried once, on the next verified choice
                results = self._dispatch(names, inputs, run_options)
            except Exception as again:
                self._raise_explained(inputs, again)
        return dict(zip(names, results))

    def _dispatch(
        self, names: list[str], feed: Any, run_options: RunOptionsConfig | None
    ) -> list[Any]:
        """One run on the session serving now, with the shared run options or the caller's (the
        retry after a fall-back; :meth:`run` inlines the first)."""
        if run_options is None:
            return self._run(names, feed)
        return self._run_with(names, feed, run_options)

    def _fall_back(self, inputs: object, exc: Exception) -> bool:
        """After a provider error in a run: serve on the next verified choice; False when none.

        Only a policy's choice falls back, never for the caller's bad input or a terminated run.
        """
        failed = self._session
        if (
            failed is None
            or not self._fallbacks
            or self._origin is None
            or self._terminated
            or "terminate flag" in str(exc).lower()
            or all(name == CPU_EP for name in self._providers)
            or self._checker.problems(inputs)
        ):
            return False
        was = list(self._providers)
        if not self._next_choice(failed):
            return False
        import warnings

        warnings.warn(
            f"{self._metadata.model_family}: {was} failed at run time "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); serving on "
            f"{list(self._providers)} from now on (call retried once)",
            ProviderFallbackWarning,
            stacklevel=user_stacklevel(),
        )
        return True

    def _next_choice(self, failed: Any, instead: SessionPlan | None = None) -> bool:
        """Serve on ``instead`` (default: the next verified choice) in place of ``failed``, the
        session that served when it failed; False when none is left or it cannot be built now
        (True when another thread already moved on)."""
        with self._fallback_lock:
            if self._session is not failed:
                return self._session is not None
            if instead is not None:
                plan = instead
            elif self._fallbacks and self._origin is not None:
                plan, *rest = self._fallbacks
                self._fallbacks = tuple(rest)
            else:
                return False
            if self._options is not None:  # with what was registered since it was planned
                plan = plan.with_custom_op_libraries(self._options.custom_op_libraries)
            resolved = plan.variant or self._origin
            if resolved is None:
                return False
            try:
                build = create_planned(resolved, plan, plan.options)
                return self._switch_to(resolved, plan, build)
            except Exception:  # it cannot be built now, or a library came meanwhile: it stands
                return False

    def _feed(self, inputs: object) -> dict[str, Any]:
        """A feed dict from a mapping or from values in model order (then overridable initializers)."""
        return feed_by_name(inputs, self._checker.names, self._overridable)

    def _selected(self, outputs: object) -> list[str]:
        return select_outputs(outputs, self._output_names)

    def _run_with(self, names: list[str], feed: Any, config: RunOptionsConfig) -> list[Any]:
        server = self._server
        if server is not None:  # with its own run options the request runs alone, on a stream
            with self._options_for(config) as options:
                return server.submit(feed, names, options).result()
        with self._options_for(config) as options:
            results = list(self._live().run(names, feed, options))
        watch = self._watch
        if watch is not None:
            watch.tap(names, feed, results, self._plan)
        return results

    @contextlib.contextmanager
    def _options_for(self, config: RunOptionsConfig | None) -> Iterator[Any]:
        """The shared run options, or ``config``'s own, which terminate() reaches while in flight."""
        if config is None:
            yield self._run_options
            return
        options = self._own_run_options(config)
        try:
            yield options
        finally:
            self._forget(options)

    def _own_run_options(self, config: RunOptionsConfig) -> Any:
        if not isinstance(config, RunOptionsConfig):
            raise OptionTypeError(
                f"run_options: expected a RunOptionsConfig, got {type(config).__name__}"
            )
        options = config.to_ort(self._ort)
        with self._inflight_lock:
            options.terminate = self._terminated
            self._inflight.add(options)
        return options

    def run_into(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        outputs: Mapping[str, np.ndarray],
        *,
        run_options: RunOptionsConfig | None = None,
    ) -> Mapping[str, np.ndarray]:
        """Run the model writing the named outputs into the caller's preallocated arrays.

        Dtype, layout and the shape these inputs imply are checked before ONNX
        Runtime runs (again only when input shapes or the arrays change).
        Returns ``outputs`` itself. Reusing the same arrays call after call
        allocates nothing per call (under a throughput hint the outputs are copied in).
        """
        if self._server is not None:
            return self._served_into(inputs, outputs, run_options)
        session = self._live()
        feed = inputs if type(inputs) is dict else self._feed(inputs)
        cache = self._into
        signature = (
            tuple(
                (n, getattr(v, "shape", None), getattr(v, "dtype", None)) for n, v in feed.items()
            ),
            tuple((n, id(a)) for n, a in outputs.items()) if isinstance(outputs, Mapping) else None,
        )
        if signature != cache.signature:
            self._bind_into(session, cache, feed, outputs)
            cache.signature = signature
        binding = cache.binding
        try:
            for name, value in feed.items():
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
            with self._options_for(run_options) as options:
                session.run_with_iobinding(binding, options)
        except Exception as exc:
            cache.signature = None
            self._raise_explained(feed, exc)
        return outputs

    def _served_into(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        outputs: Mapping[str, np.ndarray],
        run_options: RunOptionsConfig | None,
    ) -> Mapping[str, np.ndarray]:
        """``run_into`` through the throughput hint's server: run, then copy into the arrays."""
        feed = inputs if type(inputs) is dict else self._feed(inputs)
        targets = check_into_outputs(outputs, self.outputs, self.inputs, feed)
        results = self.run(feed, list(targets), run_options=run_options)
        for name, array in targets.items():
            result = np.asarray(results[name])
            if result.shape != array.shape:
                raise OptionError(
                    f"run_into: output {name!r}: the run computed shape {result.shape}, "
                    f"got an array of shape {array.shape}"
                )
            np.copyto(array, result)
        return outputs

    def _bind_into(
        self, session: Any, cache: _IntoCache, feed: Mapping[str, Any], outputs: object
    ) -> None:
        """Check the caller's output arrays for these inputs and bind them (on a new signature)."""
        targets = check_into_outputs(outputs, self.outputs, self.inputs, feed)
        if cache.binding is None:
            cache.binding = session.io_binding()
        binding = cache.binding
        binding.clear_binding_inputs()
        binding.clear_binding_outputs()
        for name, array in targets.items():
            known = cache.outputs.get(name)
            if known is None or known[0] is not array:
                known = cache.outputs[name] = (array, self._ort.OrtValue.ortvalue_from_numpy(array))
            binding.bind_ortvalue_output(name, known[1])

    def bind(self, run_options: RunOptionsConfig | None = None) -> Binding:
        """An IO binding on this session: bind inputs and outputs once, then ``run()`` repeatedly."""
        from ..session.binding import Binding

        options = self._run_options if run_options is None else run_options.to_ort(self._ort)
        binding = Binding(
            self._live(),
            options,
            (*self.inputs, *self.overridable_initializers),
            self.outputs,
            self._ort.OrtValue,
        )
        with self._inflight_lock:  # terminate() iterates the bindings under this lock
            if options is not self._run_options:
                options.terminate = self._terminated
            self._bindings.add(binding)
        return binding

    def run_async(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        callback: RunCallback,
        outputs: Sequence[str] | str | None = None,
        *,
        run_options: RunOptionsConfig | None = None,
    ) -> None:
        """Start a run on ONNX Runtime's thread pool; ``callback(outputs, error)`` gets the result.

        The callback runs on an ONNX Runtime thread: keep it short, hand work back
        to your own thread. Exactly one of its arguments is ``None``.
        """
        if not callable(callback):
            raise OptionTypeError(f"callback: expected a callable, got {type(callback).__name__}")
        if self._server is not None:
            self._served_async(inputs, callback, outputs, run_options)
            return
        from . import _async_runs  # only asynchronous runs count themselves

        session = self._live()
        feed = self._feed(inputs)
        names = self._output_names if outputs is None else self._selected(outputs)
        options = self._run_options if run_options is None else self._own_run_options(run_options)

        own = None if options is self._run_options else options  # forgotten when it ends

        def done(results: Any, _user_data: Any, error: str) -> None:
            try:
                self._forget(own)
                if error:
                    callback(None, self._explain_async(feed, error))
                else:
                    callback(dict(zip(names, results)), None)
            finally:
                _async_runs.finished()

        _async_runs.started()
        try:
            session.run_async(names, feed, done, None, options)
        except Exception as exc:
            _async_runs.finished()
            self._forget(own)
            self._raise_explained(feed, exc)

    def _submitted(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        outputs: Sequence[str] | str | None,
        run_options: RunOptionsConfig | None,
    ) -> tuple[dict[str, Any], list[str], Any, Any]:
        """A request queued on the throughput hint's server: its feed, output names, own run
        options (``None``: the stream's) and future."""
        server = self._server
        if server is None:
            _closed_run()
        feed = self._feed(inputs)
        names = self._output_names if outputs is None else self._selected(outputs)
        options = None if run_options is None else self._own_run_options(run_options)
        try:
            return feed, names, options, server.submit(feed, names, options)
        except Exception as exc:
            self._forget(options)
            self._raise_explained(feed, exc)

    def _forget(self, options: Any) -> None:
        if options is not None:
            with self._inflight_lock:
                self._inflight.discard(options)

    def _served_async(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        callback: RunCallback,
        outputs: Sequence[str] | str | None,
        run_options: RunOptionsConfig | None,
    ) -> None:
        """``run_async`` through the server: the callback runs on a stream's worker thread."""
        from ._serving import callback_on

        feed, names, options, future = self._submitted(inputs, outputs, run_options)

        def done(results: list[Any] | None, error: BaseException | None) -> None:
            self._forget(options)
            if error is not None:
                callback(None, self._explained(feed, error))
            else:
                callback(dict(zip(names, results or ())), None)

        callback_on(future, done)

    async def _served_arun(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        outputs: Sequence[str] | str | None,
        run_options: RunOptionsConfig | None,
    ) -> Mapping[str, Any]:
        """``arun`` through the server; a cancelled (or timed-out) await cancels a queued request."""
        import asyncio

        feed, names, options, future = self._submitted(inputs, outputs, run_options)
        try:
            results = await asyncio.wrap_future(future)
        except Exception as exc:
            raise self._explained(feed, exc) from exc
        finally:
            self._forget(options)
        return dict(zip(names, results))

    async def arun(
        self,
        inputs: Mapping[str, Any] | Sequence[Any],
        outputs: Sequence[str] | str | None = None,
        *,
        run_options: RunOptionsConfig | None = None,
    ) -> Mapping[str, Any]:
        """``await backend.arun(inputs)``: :meth:`run_async` for asyncio; the loop stays free."""
        if self._server is not None:
            return await self._served_arun(inputs, outputs, run_options)
        import asyncio  # deferred: ~20 ms that synchronous users never need

        loop = asyncio.get_running_loop()
        future: asyncio.Future[Mapping[str, Any]] = loop.create_future()

        def settle(result: Mapping[str, Any] | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result or {})

        def callback(result: Mapping[str, Any] | None, error: BaseException | None) -> None:
            loop.call_soon_threadsafe(settle, result, error)

        self.run_async(inputs, callback, outputs, run_options=run_options)
        return await future

    def terminate(self) -> None:
        """Stop the runs in progress (and refuse new ones) until :meth:`reset_terminate`.

        Safe to call from any thread; the stopped runs raise
        :class:`~ortplug.errors.RunTerminatedError` and the backend stays usable.
        """
        self._set_terminate(True)

    def reset_terminate(self) -> None:
        """Accept runs again after :meth:`terminate`."""
        self._set_terminate(False)

    def _set_terminate(self, terminate: bool) -> None:
        """Set the flag on every run options in use: shared, in-flight runs', bindings' (none once
        closed), and the throughput hint's streams (its queued requests fail)."""
        server = self._server
        if server is not None:
            server.terminate(terminate)
        with self._inflight_lock:
            self._terminated = terminate
            shared = () if self._run_options is None else (self._run_options,)
            for options in (*shared, *self._inflight, *(b._run_options for b in self._bindings)):
                options.terminate = terminate

    # -- profiling and live settings -----------------------------------------------------------

    def end_profiling(self) -> str:
        """Stop profiling and return the path of the JSON profile ONNX Runtime wrote."""
        path = str(self._live().end_profiling() or "")
        if not path:
            raise RuntimeError(
                "profiling is off for this session: build it with "
                "SessionOptionsConfig(enable_profiling=True)"
            )
        return path

    @property
    def profiling_start_time_ns(self) -> int:
        """When profiling started, in nanoseconds since the epoch (0 when profiling is off)."""
        return int(self._live().get_profiling_start_time_ns())

    def set_ep_dynamic_options(self, options: Mapping[str, object]) -> None:
        """Change provider settings on the live session; keys and values are sent as strings."""
        if not isinstance(options, Mapping) or not options:
            raise OptionError(
                f"set_ep_dynamic_options: expected a non-empty mapping, got {options!r}"
            )
        values = {str(k): encode_option(v) for k, v in options.items()}
        self._live().set_ep_dynamic_options(values)

    def register_custom_op_library(self, path: str | os.PathLike[str]) -> None:
        """Add a custom-operator library and rebuild the session with the same options.

        Runs in progress finish on the old session; do not call while other
        threads start new runs.
        """
        library = os.fspath(path)
        if not os.path.isfile(library):
            raise MissingFileError(f"register_custom_op_library: file not found: {library}")
        self._live()
        if self._server is not None:
            raise OptionError(
                f"register_custom_op_library: expected a backend with the latency hint, got "
                f"performance_hint={self.performance_hint!r}; build it with the library in "
                "SessionOptionsConfig(custom_op_libraries=[...])"
            )
        with self._rebuild_lock:  # a startup switch waits, then builds with the library too
            if self._rebuild is None or self._options is None:
                raise RuntimeError(
                    "register_custom_op_library: this backend wraps a session it did not build; "
                    "build it with OnnxBackend.from_checkpoint to let it rebuild"
                )
            options = self._options.evolve(
                custom_op_libraries=(*self._options.custom_op_libraries, library)
            )
            session = self._rebuild(options)
            self._close_bindings()
            self._adopt(session)
            self._options = options

    # -- errors and lifetime ----------------------------------------------------------------------

    def _raise_explained(self, inputs: object, exc: Exception) -> NoReturn:
        if self._session is None:
            _closed_run()
        if isinstance(exc, (BackendClosedError, RunTerminatedError)):  # said already
            raise exc
        if self._terminated or "terminate flag" in str(exc).lower():
            raise RunTerminatedError(
                "the run was stopped by OnnxBackend.terminate(); call reset_terminate() to run again"
            ) from exc
        problems = self._checker.problems(inputs)
        if problems:
            raise InputValidationError(problems) from exc
        raise RuntimeError(
            f"ONNX Runtime failed to run model {self._metadata.model_family!r} on "
            f"{list(self._providers)}: {type(exc).__name__}: {exc}"
        ) from exc

    def _explain_async(self, feed: object, error: str) -> BaseException:
        return self._explained(feed, RuntimeError(error))

    def _explained(self, feed: object, error: BaseException) -> BaseException:
        """The error a caller gets for ``error`` of a run of ``feed`` (as :meth:`run` raises it)."""
        if not isinstance(error, Exception):
            return error
        try:
            self._raise_explained(feed, error)
        except Exception as explained:
            return explained
        raise AssertionError("unreachable")  # pragma: no cover

    def _close_bindings(self) -> None:
        with self._inflight_lock:
            bindings = list(self._bindings)
            self._bindings = weakref.WeakSet()
        for binding in bindings:
            binding._close()

    def close(self) -> None:
        """Release the session and everything native made from it, even while this object and its
        bindings stay referenced; later runs raise :class:`BackendClosedError`. Idempotent.

        Under a throughput hint, queued requests fail with :class:`BackendClosedError`, runs in
        progress are stopped, and the streams' threads have ended when it returns."""
        server, self._server = self._server, None
        if server is not None:
            server.close(_CLOSED)
        self._close_bindings()
        with self._inflight_lock:
            self._inflight.clear()
            self._run_options = None
            self._session = None
        self._watch_with(None)  # a startup fallback's checks on real traffic end here
        self._run = _closed_run
        self._into = _IntoCache()  # drops every thread's run_into IO binding and OrtValues
        self._rebuild = None
        self._checkpoint = None  # the in-memory weights the session read

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._session is None else f"providers={list(self._providers)}"
        return f"<OnnxBackend {self._metadata.model_family!r} {state}>"
