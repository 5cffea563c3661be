"""``ortplug.InferenceSession``: ONNX Runtime's class, with ortplug's choice behind ``providers=None``.

A subclass of ``onnxruntime.InferenceSession`` (``isinstance`` checks pass) that
only changes how the session is built; ``run`` and everything else are ONNX
Runtime's own, so a run costs what it costs there and nothing keeps its inputs.

* providers in ONNX Runtime's forms (names ending in ``ExecutionProvider``,
  ``(name, options)`` tuples, ``provider_options``): ONNX Runtime's constructor, as is;
* ``providers=None``: the chain ``OnnxBackend.from_checkpoint`` would choose, built
  by that same path (planning, verification, options), whose ONNX Runtime session
  this object then is. A model ortplug cannot read (ORT format, a bad file), or
  arguments that path does not take (``disabled_optimizers``, a ``SessionOptions``
  that already holds providers), leave the choice to ONNX Runtime, which then
  raises its own errors;
* ortplug's forms (``"cuda"``, ``{"kind": "cuda", ...}``, config objects): that
  path too, strictly (a requested accelerator that is not realized raises).

A ``SessionOptions`` whose config entry ``ortplug.performance_hint`` is ``throughput`` or
``cumulative_throughput`` serves many callers through ortplug's request queue (see
``OnnxBackend.from_checkpoint``): this object's ``run`` then goes through it; its IO bindings
keep the session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from ortplug.host.ort_log import hook_onnxruntime, left_to_ort
from ortplug.log import count_as_ortplug

from ._runtime import UnsupportedRuntimeError, runtime_problem
from ._variants import VARIANTS_ENTRY, say_variant, variant_opt_in, warn_once

if TYPE_CHECKING:
    from ortplug.backend import OnnxBackend
    from ortplug.pipeline.report import ProviderReport
    from ortplug.providers.configs import ProviderConfig
    from ortplug.providers.session_options import SessionOptionsConfig

__all__ = ["InferenceSession", "SessionRecord"]

# Only ONNX Runtime (imported already under a patch) and ortplug's hook of its logger at import:
# ortplug's build path is imported by the first session it builds, so that ``ortplug exec``
# costs a program little.
try:
    import onnxruntime as _ort
except ImportError:  # pragma: no cover - ortplug's error names the command to install it
    from ortplug.host.runtime import require_onnxruntime

    _ort = require_onnxruntime()

_problem = runtime_problem(str(getattr(_ort, "__version__", "unknown")))
if _problem is not None:
    raise UnsupportedRuntimeError(_problem)

count_as_ortplug(__file__)  # a warning of a drop-in build points at the user's line

# The program's logger settings are remembered from here on (under ``ortplug exec``: from its
# ``import onnxruntime``), so that ortplug's own captures put them back as they were.
hook_onnxruntime(_ort)

#: ONNX Runtime's own classes, as they were before any patch.
_OrtSession: Any = _ort.capi.onnxruntime_inference_collection.InferenceSession
_Session: Any = _ort.capi.onnxruntime_inference_collection.Session
_CPU = "CPUExecutionProvider"


def _loaded(module: str, name: str) -> Any:
    """``module.name`` when ``module`` is imported, else ``None`` (a value of it cannot exist)."""
    return getattr(sys.modules.get(f"ortplug.{module}"), name, None)


#: The methods that run the session (or bind for a run): held on the object itself, through the
#: backend's locks, when its providers do not all declare concurrent runs.
_RUNS = (
    "run",
    "run_async",
    "run_with_ort_values",
    "run_with_ortvaluevector",
    "run_with_iobinding",
    "io_binding",
)


class _OwnMethods:
    """ONNX Runtime's methods of a drop-in session, whatever its instance holds by their names;
    each bound once, on first use (a serialised run looks its method up on every call)."""

    def __init__(self, session: InferenceSession) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        method = getattr(_OrtSession, name).__get__(self._session)
        setattr(self, name, method)
        return method


class SessionRecord(NamedTuple):
    """A session built under :func:`ortplug.patch`: its model, realized chain and why."""

    model: str
    providers: tuple[str, ...]
    why: str

    def line(self) -> str:
        """One line for people: ``MODEL: CHAIN (WHY)``."""
        return f"{self.model}: {', '.join(self.providers)} ({self.why})"


def _is_ortplug_form(item: object) -> bool:
    """A name ortplug knows (``"cuda"``), a ``{"kind": ...}`` dict or a config object; anything
    else (names ending in ``ExecutionProvider``, tuples, unknown names, junk) is ONNX Runtime's
    to judge."""
    if isinstance(item, str):
        if item.endswith("ExecutionProvider"):
            return False
        from ortplug.plugin_host.manager import get_plugin_host

        return get_plugin_host().provider_registry().knows(item)
    config_class = _loaded("providers.configs", "ProviderConfig")
    return isinstance(item, Mapping) or (
        config_class is not None and isinstance(item, config_class)
    )


def _names_cpu(item: object) -> bool:
    return item == _CPU or (isinstance(item, tuple) and item[:1] == (_CPU,))


def _ortplug_chain(
    providers: object, provider_options: object
) -> tuple[ProviderConfig, ...] | None:
    """``providers`` parsed, once, when it uses ortplug's forms: the chain the build takes as
    given (``None``: ONNX Runtime's to judge)."""
    if provider_options is not None or not isinstance(providers, (list, tuple)):
        return None
    if not any(_is_ortplug_form(item) for item in providers):
        return None
    from ortplug.plugin_host.manager import get_plugin_host
    from ortplug.session.plan import parse_providers

    return parse_providers(providers, get_plugin_host())


def _taken_over(rule: str, providers: Sequence[Any]) -> bool:
    """Whether ``rule`` lets ortplug's policy replace this explicit ONNX Runtime list."""
    if rule == "all":
        return True
    return rule == "cpu" and bool(providers) and all(_names_cpu(item) for item in providers)


def _left_to_ort(sess_options: object, kwargs: Mapping[str, object]) -> str | None:
    """Why ONNX Runtime rather than ortplug chooses for these arguments (``None``: ortplug may)."""
    unsupported = sorted(set(kwargs) - {"enable_fallback"})
    if unsupported:
        return f"arguments ortplug's build does not take: {', '.join(unsupported)}"
    if os.environ.get("ORT_LOAD_CONFIG_FROM_MODEL") == "1":
        return "ORT_LOAD_CONFIG_FROM_MODEL=1"
    has_providers = getattr(sess_options, "has_providers", None)
    if callable(has_providers) and has_providers():
        return "the SessionOptions already holds providers"
    return None


class _Entries:
    """The ``ortplug.*`` config entries of a caller's ``SessionOptions`` (ONNX Runtime reads
    only the entries it knows, and ignores the rest)."""

    def __init__(self, sess_options: object) -> None:
        self._get = getattr(sess_options, "get_session_config_entry", None)

    def get(self, name: str) -> str | None:
        """The entry ``name``, if the options hold it."""
        if not callable(self._get):
            return None
        try:
            return str(self._get(name))
        except Exception:  # ONNX Runtime raises for an entry it does not hold
            return None

    def hint(self) -> str | None:
        """The performance hint the options carry; one that is none of the hints is warned of
        once and left out (ONNX Runtime ignores an entry it does not know: the app runs on)."""
        from ortplug.backend import HINT_ENTRY, HINTS

        hint = self.get(HINT_ENTRY)
        if hint is None or hint in HINTS:
            return hint
        warn_once(
            f"session config entry {HINT_ENTRY!r}: expected one of {', '.join(HINTS)}, got "
            f"{hint!r}; ignored (the session serves with the latency hint)"
        )
        return "latency"


def _checkpoint(model: str | bytes, variants: bool) -> Any:
    """The app's model; its precision variants are left out unless the user opted in (an app
    gave a file: another file never serves in its place unasked)."""
    import attrs
    from ortplug.checkpoint import InMemoryCheckpoint, LocalCheckpoint

    if isinstance(model, bytes):
        resolved = InMemoryCheckpoint(model).resolve()
    else:
        resolved = LocalCheckpoint(model).resolve()
    if variants or not resolved.metadata.variants:
        return resolved
    return attrs.evolve(resolved, metadata=attrs.evolve(resolved.metadata, variants=()))


class _OrtRaised(Exception):
    """ONNX Runtime's constructor raised ``error``: ``__init__`` raises it as ONNX Runtime would."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def _below_ortplug(traceback: TracebackType | None) -> TracebackType | None:
    """``traceback`` from its first frame that is not ortplug's: ONNX Runtime's own frames."""
    while traceback is not None and traceback.tb_frame.f_globals.get("__name__", "").startswith(
        ("ortplug.", "ortplug_dropin.")
    ):
        traceback = traceback.tb_next
    return traceback


class _ServedRun:
    """The drop-in's ``run`` under a throughput hint: ``run(output_names, input_feed,
    run_options=None)``, through the backend's request queue, errors as ONNX Runtime raises them."""

    def __init__(self, backend: OnnxBackend) -> None:
        self._backend = backend

    def __call__(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: Any = None,
    ) -> list[Any]:
        dispatcher = self._backend.dispatcher
        if dispatcher is None:  # closed
            return list(self._backend.ort_session.run(output_names, input_feed, run_options))
        names = list(output_names) if output_names else self._backend.output_names
        return dispatcher.submit(dict(input_feed), names, run_options).result()


class InferenceSession(_OrtSession):  # type: ignore[misc]
    """A drop-in for ``onnxruntime.InferenceSession`` whose ``providers=None`` is ortplug's choice.

    Same constructor and methods as ONNX Runtime's class (it is one). Also
    :attr:`report` (why the session runs where it runs) and :attr:`backend`
    (the :class:`~ortplug.OnnxBackend` sharing the session, when ortplug built it).
    """

    #: Which explicit ONNX Runtime lists ortplug's policy takes over (``ortplug.patch`` sets it).
    takeover: ClassVar[str] = "none"
    #: ONNX Runtime's own class (ortplug's build path creates sessions with it under a patch).
    ort_class: ClassVar[type] = _OrtSession
    #: Called with each session built (``ortplug.patch`` records them).
    _recorder: ClassVar[Callable[[SessionRecord], None] | None] = None
    _backend: OnnxBackend | None = None
    _why = "ONNX Runtime's own"

    def __init__(
        self,
        path_or_bytes: str | bytes | os.PathLike[str],
        sess_options: Any = None,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[dict[Any, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            self._choose(path_or_bytes, sess_options, providers, provider_options, kwargs)
        except _OrtRaised as raised:
            error: Exception | None = raised.error
        else:
            error = None
        if error is not None:  # raised outside the except block: nothing of ortplug's chained
            raise error.with_traceback(_below_ortplug(error.__traceback__))
        recorder = type(self)._recorder
        if recorder is not None:
            model = self._model_path or f"<model bytes, {len(self._model_bytes or b'')} B>"
            recorder(SessionRecord(str(model), tuple(self.get_providers()), self._why))

    def _choose(
        self,
        model: Any,
        sess_options: Any,
        providers: Sequence[Any] | None,
        provider_options: Any,
        kwargs: dict[str, Any],
    ) -> None:
        """Build through ortplug or ONNX Runtime, as the module docstring says."""
        options_class = _loaded("providers.session_options", "SessionOptionsConfig")
        config = sess_options if options_class and isinstance(sess_options, options_class) else None
        if config is not None:
            sess_options = config.to_ort(_ort)  # what ONNX Runtime's path takes
        chain = None if providers is None else _ortplug_chain(providers, provider_options)
        strict = chain is not None
        why = "providers=None: ortplug's policy"
        if strict:
            why = f"providers={list(providers or ())} in ortplug's forms (strict)"
        elif providers is not None:
            if not _taken_over(self.takeover, providers):
                self._ort_init(model, sess_options, providers, provider_options, kwargs)
                return
            why = f"{list(providers)} taken over (takeover={self.takeover!r}): ortplug's policy"
        refusal = _left_to_ort(sess_options, kwargs)
        if refusal is not None:
            if strict:  # only ortplug reads its forms, and it cannot honour these
                from ortplug.errors import OptionError

                raise OptionError(
                    f"InferenceSession: {refusal}, with providers in ortplug's forms "
                    f"({list(providers or ())}); name ONNX Runtime's providers "
                    "(e.g. 'CPUExecutionProvider') to let ONNX Runtime build it"
                )
            self._ort_init(model, sess_options, providers, provider_options, kwargs, refusal)
            return
        from ortplug.errors import (
            CheckpointError,
            MissingFileError,
            ModelLoadError,
            NoProviderError,
        )

        # What ortplug failing to plan means for providers=None: ONNX Runtime chooses instead.
        unplanned = (CheckpointError, MissingFileError, ModelLoadError, NoProviderError)
        try:
            self._build(model, sess_options, config, chain, kwargs)
        except unplanned as exc:
            if strict:
                raise
            refusal = f"ortplug: {type(exc).__name__}: {exc}"
        if refusal is not None:  # outside the except block: ONNX Runtime's error chains nothing
            self._ort_init(model, sess_options, providers, provider_options, kwargs, refusal)
            return
        self._why = f"{why}: {self._reasons()}"

    def _ort_init(
        self,
        model: Any,
        sess_options: Any,
        providers: Any,
        provider_options: Any,
        kwargs: dict[str, Any],
        refusal: str | None = None,
    ) -> None:
        """ONNX Runtime's constructor, exactly; its error is raised on by ``__init__``."""
        try:
            _OrtSession.__init__(self, model, sess_options, providers, provider_options, **kwargs)
        except Exception as exc:
            raise _OrtRaised(exc) from None
        self._serve(None)
        self._backend = None
        self._why = "ONNX Runtime's own" + (f" ({refusal})" if refusal else "")

    def _build(
        self,
        model: Any,
        sess_options: Any,
        config: SessionOptionsConfig | None,
        chain: tuple[ProviderConfig, ...] | None,
        kwargs: Mapping[str, Any],
    ) -> None:
        """``OnnxBackend.from_checkpoint``'s path; this object becomes its session.

        A caller's ``SessionOptions`` is what the session is built on: ortplug fills in only
        what it leaves at ONNX Runtime's defaults (as the plugins do for ``OnnxBackend``).
        """
        from ortplug.backend import OnnxBackend
        from ortplug.providers.session_options import SessionOptionsConfig
        from ortplug.session.plan import RECORD_ASSIGNMENT

        # Node placement is recorded only when the caller asks, as ONNX Runtime's class does
        # (get_provider_graph_assignment_info fails otherwise); the report then counts no nodes.
        # A caller's SessionOptions is left as given: ortplug adds no entry to it.
        if config is None and sess_options is not None:
            config = SessionOptionsConfig.from_ort(sess_options)
        else:
            config = (config or SessionOptionsConfig()).with_config_entries(
                {RECORD_ASSIGNMENT: "0"}
            )

        source: str | bytes
        if isinstance(model, (str, os.PathLike)):
            source = os.fspath(model)
        elif isinstance(model, bytes):
            source = model
        else:
            raise TypeError(f"Unable to load from type '{type(model)}'")  # ONNX Runtime's words
        entries = _Entries(config.ort_base)
        hint = entries.hint()
        opt_in = variant_opt_in(entries.get(VARIANTS_ENTRY))
        checkpoint = _checkpoint(source, opt_in is not None)
        with left_to_ort():  # the program's session logs as ONNX Runtime's class would
            backend = OnnxBackend.from_checkpoint(
                checkpoint, chain, session_options=config, performance_hint=hint
            )
        if opt_in is not None:
            say_variant(backend, source if isinstance(source, str) else "<model bytes>", opt_in)
        _Session.__init__(self, enable_fallback=int(kwargs.get("enable_fallback", 1)) == 1)
        self._model_path = source if isinstance(source, str) else None
        self._model_bytes = source if isinstance(source, bytes) else None
        self._sess_options_initial = sess_options
        self._read_config_from_model = False
        self._fallback_providers = [_CPU]
        self._bind_session(backend.ort_session._sess)  # ONNX Runtime's own (the pinned range)
        self._backend = backend
        self._serve(backend.run_lock)
        if backend.performance_hint != "latency":
            self.run = _ServedRun(backend)  # the server's queue and streams (their own locks)

    def _serve(self, lock: Any) -> None:
        """Run as the backend runs: through its ``lock`` when its providers do not all declare
        concurrent runs (``OnnxBackend.run_lock``); else, or for ``None``, with ONNX Runtime's
        own methods, nothing added."""
        for name in _RUNS:
            self.__dict__.pop(name, None)
        if lock is not None:
            from ortplug.session.serial import SerialSession

            serial = SerialSession(_OwnMethods(self), lock)
            for name in _RUNS:
                setattr(self, name, getattr(serial, name))

    def _reasons(self) -> str:
        backend = self._backend
        reasons = backend.chain_reasons if backend is not None else ()
        return "; ".join(f"{kind}: {reason}" for kind, reason in reasons) or "no reason given"

    # -- ortplug's additions ------------------------------------------------------------------

    @property
    def backend(self) -> OnnxBackend | None:
        """The :class:`~ortplug.OnnxBackend` that built this session (``None``: ONNX Runtime did)."""
        return self._backend

    @property
    def why(self) -> str:
        """Who chose the providers, and their reasons."""
        return self._why

    @property
    def report(self) -> ProviderReport:
        """Requested and realized chain, options, placement and reasons (``backend.report``)."""
        if self._backend is not None:
            return self._backend.report
        from ortplug.pipeline.report import ProviderReport

        realized = tuple(self.get_providers())
        return ProviderReport(
            requested=realized,
            realized=realized,
            provider_options=self.get_provider_options(),
            nodes={},
            messages=(),
            reasons=tuple((name, self._why) for name in realized),
            declined=(),
            host={},
        )

    def set_providers(self, providers: Any = None, provider_options: Any = None) -> None:
        """Re-create the session: ONNX Runtime's forms as ONNX Runtime does, ``None`` and
        ortplug's forms planned again by ortplug."""
        self._check_session_can_be_recreated("set_providers")
        chain = None if providers is None else _ortplug_chain(providers, provider_options)
        if providers is not None and chain is None:
            _OrtSession.set_providers(self, providers, provider_options)
            self._serve(None)
            self._backend = None
            self._why = "ONNX Runtime's own (set_providers)"
            return
        release = getattr(self, "_release_captured_graphs", None)
        if release is not None:
            release()
        model = self._model_path or self._model_bytes
        fallback = {"enable_fallback": self._enable_fallback}
        self._build(model, self._sess_options_initial, None, chain, fallback)
        self._why = f"set_providers({providers!r}): ortplug: {self._reasons()}"
