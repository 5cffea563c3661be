"""Creating an ONNX Runtime session for a provider chain: capture ORT's messages, enforce the chain.

Sessions are created with ORT's print-and-retry fallback disabled. What ORT
says while building (Python warnings and its C++ log) is captured so an error
or warning can name the cause. An explicit chain is strict: a requested
accelerator that is not realized raises. A policy chain is graceful: an
accelerator that fails to initialize is dropped and the next one tried, and a
warning is raised only when no accelerator at all was realized.

Capturing takes only what ORT says on the building thread, so builds of different
models run side by side; builds of one model (same fingerprint) run one at a time,
so they never race for its caches, and ``load_timeout_s`` counts from the moment a
build holds its model's lock, not while it waits for it.

ORT's logger callback is process-wide and ORT offers no getter for it, so
ortplug wraps ``onnxruntime.set_default_logger_callback`` and
``set_default_logger_severity`` to remember what the user sets: from the import
of this module (``from ortplug import OnnxBackend``) when ``onnxruntime`` is
already imported, else from the import of ``onnxruntime``. During a build
ortplug's own callback is installed: it keeps the building thread's lines
(severity >= warning) and hands every line the user's severity admits to the
user's callback (without one, to stderr, as ORT's own logger would); after the
build the user's callback and severity are put back. A callback set before
that point, or through ``onnxruntime.capi._pybind_state`` directly, is unknown
to ortplug, which then puts ORT's own logger back after a build.

ORT's Python warnings while building (an unavailable or duplicate provider)
come from ``onnxruntime.capi.onnxruntime_inference_collection``: its
``warnings`` is replaced by a stand-in that makes a building thread's warnings
the build's messages and hands every other thread's to Python unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

import attrs

from .. import _log
from ..checkpoint import ResolvedCheckpoint
from ..errors import (
    BuildTimeoutError,
    ModelLoadError,
    ProviderFallbackWarning,
    ProviderNotRealizedError,
)
from ..host._import_hook import after_import
from ..host._runtime import require_onnxruntime
from ..host.ep_libraries import EpLibrary, devices_for, ensure_library
from ..providers.configs import CPU_EP, ProviderConfig
from ..providers.session_options import SessionOptionsConfig, settings_kept
from ._plan import SessionPlan

__all__ = [
    "SessionBuild",
    "cancel_builds",
    "capture_messages",
    "create_planned",
    "create_session",
    "model_key",
]


class _ModelLocks:
    """One lock per model (:func:`model_key`), kept while a build holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.RLock, int]] = {}

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(key, (threading.RLock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)


_MODEL_LOCKS = _ModelLocks()

#: SessionOptions of the builds under way, so that exiting can cancel them (see cancel_builds).
_UNDER_WAY: set[Any] = set()
_CAPTURED_SEVERITY = 2  # ORT's warning: lines at or above it become build messages
_SEVERITY_LETTERS = "VIWEF"  # ORT's own logger prefixes a line with its severity's letter

# ORT error classes that describe the model, not a provider: never retried without a provider.
_MODEL_ERRORS = frozenset({"InvalidProtobuf", "InvalidGraph", "NoSuchFile", "NotImplemented"})


@attrs.frozen
class SessionBuild:
    """A created session with the chain that was asked for and what ORT said while building."""

    session: Any
    requested: tuple[str, ...]
    messages: tuple[str, ...]


class _Building(threading.local):
    """The messages of the build running on this thread; ``None`` outside a build."""

    messages: list[str] | None = None


_BUILDING = _Building()


@attrs.define
class _Logger:
    """ORT's logger functions as ortplug found them, and what the user last set through them."""

    set_callback: Callable[..., None] | None = None
    set_severity: Callable[[int], None] | None = None
    callback: Callable[..., object] | None = None
    severity: int = _CAPTURED_SEVERITY  # ORT's default
    capturing: bool = False  # a build runs: ortplug's callback is installed
    builds: int = 0  # builds capturing now (several models build side by side)
    hooked: bool = False  # the setters are wrapped (once per process)


_LOGGER = _Logger()
_LOGGER_LOCK = threading.Lock()  # never taken by _dispatch: ORT may hold its own lock then


def _dispatch(severity: int, category: str, logid: str, location: str, message: str) -> None:
    """ORT's logger callback during a build: keeps the building thread's lines, hands on all."""
    messages = _BUILDING.messages
    if messages is not None and severity >= _CAPTURED_SEVERITY:
        messages.append(message)
    callback = _LOGGER.callback
    if severity < _LOGGER.severity:
        return
    if callback is not None:
        callback(severity, category, logid, location, message)
    elif messages is None:  # another thread's line: where ORT's own logger would have put it
        letter = _SEVERITY_LETTERS[severity] if 0 <= severity < 5 else "?"
        sys.stderr.write(f"[{letter}:{category}:{logid}, {location}] {message}\n")


def _apply_logger() -> None:
    """Install ortplug's callback during a build, else the user's settings (lock held)."""
    set_callback, set_severity = _LOGGER.set_callback, _LOGGER.set_severity
    if set_callback is None or set_severity is None:
        return
    if _LOGGER.capturing:
        set_callback(_dispatch, min(_LOGGER.severity, _CAPTURED_SEVERITY))
    elif _LOGGER.callback is not None:
        set_callback(_LOGGER.callback, _LOGGER.severity)
    else:
        set_callback(None)
        set_severity(_LOGGER.severity)


def _remembering(set_callback: Callable[..., None]) -> Callable[..., None]:
    """``onnxruntime.set_default_logger_callback``, remembered to be put back after builds."""

    @functools.wraps(set_callback)
    def remembered(callback: Callable[..., object] | None, severity: int = 2) -> None:
        with _LOGGER_LOCK:
            set_callback(callback, severity)  # ORT checks the arguments
            _LOGGER.callback = callback
            if callback is not None:
                _LOGGER.severity = int(severity)
            if _LOGGER.capturing:
                _apply_logger()

    return remembered


def _remembering_severity(set_severity: Callable[[int], None]) -> Callable[[int], None]:
    """``onnxruntime.set_default_logger_severity``, remembered to be put back after builds."""

    @functools.wraps(set_severity)
    def remembered(severity: int) -> None:
        with _LOGGER_LOCK:
            set_severity(severity)
            _LOGGER.severity = int(severity)
            if _LOGGER.capturing:
                _apply_logger()

    return remembered


class _OrtWarnings:
    """``warnings`` inside ORT's session module: a building thread's warnings become the build's
    messages; every other thread's go to Python's ``warnings`` unchanged."""

    def __getattr__(self, name: str) -> Any:
        return getattr(warnings, name)

    @staticmethod
    def warn(
        message: Any, category: Any = None, stacklevel: int = 1, source: Any = None, **kwargs: Any
    ) -> None:
        """Record ``message`` for this thread's build, or warn as ORT asked (from ORT's frame)."""
        messages = _BUILDING.messages
        if messages is None:
            warnings.warn(message, category, stacklevel + 1, source, **kwargs)
        else:
            messages.append(str(message))


def _hook_onnxruntime(ort: ModuleType) -> None:
    """Once per process: wrap ORT's logger setters and its session module's ``warnings``."""
    with _LOGGER_LOCK:
        if _LOGGER.hooked:
            return
        _LOGGER.hooked = True
        set_callback = getattr(ort, "set_default_logger_callback", None)
        set_severity = getattr(ort, "set_default_logger_severity", None)
        if set_callback is not None and set_severity is not None:
            _LOGGER.set_callback, _LOGGER.set_severity = set_callback, set_severity
            vars(ort).update(
                set_default_logger_callback=_remembering(set_callback),
                set_default_logger_severity=_remembering_severity(set_severity),
            )
        session_module = sys.modules.get("onnxruntime.capi.onnxruntime_inference_collection")
        if getattr(session_module, "warnings", None) is warnings:
            session_module.warnings = _OrtWarnings()  # type: ignore[union-attr]


if isinstance(sys.modules.get("onnxruntime"), ModuleType):
    _hook_onnxruntime(sys.modules["onnxruntime"])
elif "onnxruntime" not in sys.modules:  # hooked right after its import, before a user's logger
    after_import("onnxruntime", _hook_onnxruntime)


def _set_capturing(starting: bool) -> None:
    """Start or end a build's capture of ORT's log: ortplug's callback while any build runs."""
    with _LOGGER_LOCK:
        _LOGGER.builds += 1 if starting else -1
        if _LOGGER.capturing != (_LOGGER.builds > 0):
            _LOGGER.capturing = _LOGGER.builds > 0
            _apply_logger()


def model_key(checkpoint: ResolvedCheckpoint) -> str:
    """Which model a build is of, for its lock: the file's real path, or the bytes object.

    Cheap on purpose: keying the lock by the weights' digest read the whole model at every
    build (and at every call while the file was just written).
    """
    if checkpoint.weights_path is not None:
        return os.path.realpath(checkpoint.weights_path)
    return f"<model bytes at {id(checkpoint.model_bytes):#x}>"


@contextlib.contextmanager
def capture_messages(ort: ModuleType, model: str) -> Iterator[list[str]]:
    """Hold the lock of ``model`` (:func:`model_key`); collect ORT's warnings and log lines
    (severity >= warning) that this thread emits inside the block."""
    _hook_onnxruntime(ort)
    messages: list[str] = []
    with _MODEL_LOCKS.hold(model):
        _set_capturing(True)
        _BUILDING.messages = messages
        try:
            yield messages
        finally:
            _BUILDING.messages = None
            _set_capturing(False)


def _in_memory_weights(ort: ModuleType, ort_options: Any, checkpoint: ResolvedCheckpoint) -> None:
    """Hand ONNX Runtime the initializers and external-data files the checkpoint holds in memory.

    ONNX Runtime reads these buffers in place: the backend keeps the checkpoint
    (which owns them, contiguous) alive as long as the session.
    """
    if checkpoint.initializers:
        names = list(checkpoint.initializers)
        values = [ort.OrtValue.ortvalue_from_numpy(checkpoint.initializers[n]) for n in names]
        ort_options.add_external_initializers(names, values)
    if checkpoint.external_data:
        files = list(checkpoint.external_data)
        buffers = [checkpoint.external_data[f] for f in files]
        ort_options.add_external_initializers_from_files_in_memory(
            files, buffers, [len(b) for b in buffers]
        )


class _NoDevice(Exception):
    """A provider of a plugin-EP library offers no device on this host (ortplug's finding)."""

    def __init__(self, ep_name: str, reason: str) -> None:
        super().__init__(reason)
        self.ep_name = ep_name


def _cause(error: Exception) -> str:
    """Who said it and what: ONNX Runtime's error class and message, or ortplug's own check."""
    if isinstance(error, _NoDevice):
        return f"ortplug: {error}"
    return f"ONNX Runtime {type(error).__name__}: {error}"


def _add_devices(ort_options: Any, chain: Sequence[tuple[str, dict[str, str]]]) -> None:
    """Append each provider with its devices, in chain order (the plugin-EP library path)."""
    for name, provider_options in chain:
        devices = devices_for(name)
        if not devices:
            raise _NoDevice(name, f"{name} offers no device on this host")
        ort_options.add_provider_for_devices(devices, provider_options)


def _try_create(
    ort: ModuleType,
    checkpoint: ResolvedCheckpoint,
    options: SessionOptionsConfig,
    chain: Sequence[tuple[str, dict[str, str]]],
    *,
    by_devices: bool,
    device_policy: str | None,
) -> tuple[Any, Exception | None, list[str]]:
    """One attempt with ``(ort_name, options)`` pairs: ``(session, None, msgs)`` or ``(None, error, msgs)``.

    A caller's own ``SessionOptions`` (the drop-in's ``ort_base``) gets its settings back after.
    """
    with settings_kept(options.ort_base):
        return _attempt(
            ort, checkpoint, options, chain, by_devices=by_devices, device_policy=device_policy
        )


def _attempt(
    ort: ModuleType,
    checkpoint: ResolvedCheckpoint,
    options: SessionOptionsConfig,
    chain: Sequence[tuple[str, dict[str, str]]],
    *,
    by_devices: bool,
    device_policy: str | None,
) -> tuple[Any, Exception | None, list[str]]:
    source = checkpoint.source
    ort_options = options.to_ort(ort)
    _in_memory_weights(ort, ort_options, checkpoint)
    if device_policy is not None:
        policy = getattr(ort.OrtExecutionProviderDevicePolicy, device_policy)
        ort_options.set_provider_selection_policy(policy)
        by_devices = True  # no providers= list: ONNX Runtime chooses
    elif by_devices:
        try:
            _add_devices(ort_options, chain)
        except _NoDevice as exc:
            return None, exc, []
    providers = (
        {}
        if by_devices
        else {
            "providers": [name for name, _ in chain],
            "provider_options": [opts for _, opts in chain],
        }
    )
    with capture_messages(ort, model_key(checkpoint)) as captured:
        timer = None
        if options.load_timeout_s is not None:  # started once the model's lock is held
            timer = threading.Timer(
                options.load_timeout_s, ort_options.set_load_cancellation_flag, (True,)
            )
            timer.daemon = True
            timer.start()
        _UNDER_WAY.add(ort_options)
        try:
            # ONNX Runtime's own class, also under ortplug.patch() (whose drop-in builds here)
            session_class = getattr(ort.InferenceSession, "ort_class", ort.InferenceSession)
            session = session_class(source, sess_options=ort_options, enable_fallback=0, **providers)
        except Exception as exc:
            return None, exc, captured
        finally:
            _UNDER_WAY.discard(ort_options)
            if timer is not None:
                timer.cancel()
    return session, None, captured


def cancel_builds() -> None:
    """Ask every session build under way to stop (ONNX Runtime's load cancellation flag).

    For an exiting interpreter: a build still running in a background thread
    when the process ends aborts it from native code.
    """
    for ort_options in list(_UNDER_WAY):
        ort_options.set_load_cancellation_flag(True)


def _library_messages(libraries: Sequence[EpLibrary | None]) -> list[str]:
    """Register the chain's plugin-EP libraries (once per process); their problems, if any."""
    problems = [ensure_library(lib).problem() for lib in libraries if lib is not None]
    return [p for p in problems if p]


def _split_mixed_chain(
    chain: list[tuple[str, dict[str, str]]],
    libraries: Sequence[EpLibrary | None],
    requested: tuple[str, ...],
    strict: bool,
    messages: list[str],
    *,
    declines: Callable[[Sequence[str]], Mapping[str, str]],
) -> tuple[list[tuple[str, dict[str, str]]], bool]:
    """Library providers are appended by device; a built-in without devices cannot join them.

    Such a chain keeps its built-ins (graceful) or is refused naming both (strict).
    """
    deviceless = [
        name for (name, _), lib in zip(chain, libraries) if lib is None and not devices_for(name)
    ]
    if not deviceless:
        return chain, True
    library_eps = [name for (name, _), lib in zip(chain, libraries) if lib is not None]
    cause = (
        f"ortplug: {', '.join(library_eps)} (plugin-EP library) cannot share a session with "
        f"{', '.join(deviceless)}, for which ONNX Runtime lists no device"
    )
    if strict:
        raise ProviderNotRealizedError(requested, (), library_eps, cause, declines(library_eps))
    messages.append(cause)
    _log.warning("dropping %s from the chain: %s", ", ".join(library_eps), cause)
    kept = [entry for entry, lib in zip(chain, libraries) if lib is None]
    return kept, False


def create_session(
    checkpoint: ResolvedCheckpoint,
    options: SessionOptionsConfig,
    chain: Sequence[ProviderConfig],
    *,
    strict: bool,
    libraries: Sequence[EpLibrary | None] = (),
    device_policy: str | None = None,
    explain_declines: Callable[[Sequence[str]], Mapping[str, str]] = lambda kinds: {},
) -> SessionBuild:
    """Create the session for ``chain`` (strict or graceful, see the module docstring).

    When a provider of the chain lives in a plugin-EP library, the whole chain
    is appended by device (``add_provider_for_devices``) in chain order.
    ``explain_declines(kinds)`` gives the plugins' reasons for providers that
    did not run, for the error or warning.
    """
    ort = require_onnxruntime()
    label = checkpoint.label
    remaining = [config.to_ort() for config in chain]
    requested = tuple(name for name, _ in remaining)
    kind_of = {config.to_ort()[0]: config.kind for config in chain}

    def declines(ort_names: Sequence[str]) -> Mapping[str, str]:
        return explain_declines([kind_of[name] for name in ort_names if name in kind_of])

    by_devices = any(lib is not None for lib in libraries)
    messages: list[str] = _library_messages(libraries)
    if by_devices:
        remaining, by_devices = _split_mixed_chain(
            remaining, libraries, requested, strict, messages, declines=declines
        )
    while True:
        session, error, captured = _try_create(
            ort, checkpoint, options, remaining, by_devices=by_devices, device_policy=device_policy
        )
        messages.extend(captured)
        if error is None:
            break
        kind = type(error).__name__
        if kind == "ModelLoadCanceled":
            raise BuildTimeoutError(
                f"building the session for {label} on {list(requested)} took longer than "
                f"load_timeout_s={options.load_timeout_s}; raise it (a first TensorRT engine "
                "build can take minutes and is cached afterwards)"
            ) from error
        cause = _cause(error)
        accelerators = [name for name, _ in remaining if name != CPU_EP]
        if (
            kind in _MODEL_ERRORS
            or not accelerators
            or (isinstance(error, _NoDevice) and error.ep_name == CPU_EP)
        ):
            raise ModelLoadError(f"could not load {label}: {cause}") from error
        culprit = error.ep_name if isinstance(error, _NoDevice) else accelerators[0]
        if strict:
            raise ProviderNotRealizedError(
                requested, (), [culprit], _join(messages, cause), declines([culprit])
            ) from error
        _log.warning("dropping %s from the chain: %s", culprit, cause)
        messages.append(cause)
        remaining.remove(next(entry for entry in remaining if entry[0] == culprit))
    session = _as_served(session, chain)
    realized = tuple(session.get_providers())
    _enforce(requested, realized, messages, strict, declines)
    _log.info("session for %s: requested %s, realized %s", label, requested, realized)
    return SessionBuild(session, requested, tuple(messages))


def _as_served(session: Any, chain: Sequence[ProviderConfig]) -> Any:
    """The session as the chain's test providers serve it (``ortplug.testing.misbehaving``)."""
    for config in chain:
        wrap = getattr(config, "ortplug_testing_wrap", None)
        if callable(wrap):
            session = wrap(session)
    return session


def _join(messages: Sequence[str], extra: str = "") -> str:
    parts = [m.strip() for m in (*messages, extra) if m and m.strip()]
    return "; ".join(dict.fromkeys(parts))


def _enforce(
    requested: Sequence[str],
    realized: Sequence[str],
    messages: Sequence[str],
    strict: bool,
    declines: Callable[[Sequence[str]], Mapping[str, str]],
) -> None:
    accelerators = [name for name in requested if name != CPU_EP]
    missing = [name for name in accelerators if name not in realized]
    if not missing:
        return
    if strict:
        raise ProviderNotRealizedError(
            requested, realized, missing, _join(messages), declines(missing)
        )
    if len(missing) == len(accelerators):
        reasons = "; ".join(f"{k}: {r}" for k, r in declines(missing).items())
        warnings.warn(
            f"no accelerator was realized: requested {list(requested)}, running on "
            f"{list(realized)}; ONNX Runtime said: {_join(messages) or 'nothing'}"
            f"{'; the plugins say: ' + reasons if reasons else ''}",
            ProviderFallbackWarning,
            stacklevel=4,
        )


def create_planned(
    checkpoint: ResolvedCheckpoint, plan: SessionPlan, options: SessionOptionsConfig
) -> SessionBuild:
    """Create the session ``plan`` describes, with ``options`` (the plan's, or changed ones)."""
    return create_session(
        checkpoint,
        options,
        plan.chain,
        strict=plan.strict,
        libraries=plan.libraries,
        device_policy=plan.device_policy,
        explain_declines=plan.explain_declines,
    )
