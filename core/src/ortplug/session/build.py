"""Creating an ONNX Runtime session for a provider chain: capture ORT's messages, enforce the
chain, one build per model at a time."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

import attrs

from .. import log as _log
from ..checkpoint import ResolvedCheckpoint
from ..errors import (
    BuildTimeoutError,
    ModelLoadError,
    ProviderFallbackWarning,
    ProviderNotRealizedError,
)
from ..host.ep_libraries import EpLibrary, devices_for, ensure_library
from ..host.import_hook import after_import
from ..host.ort_log import captured, hook_onnxruntime, owned_session_severity
from ..host.runtime import require_onnxruntime
from ..log import user_stacklevel
from ..plugin_host.manager import PluginHost, resolve_plugin_host
from ..providers.configs import CPU_EP, ProviderConfig
from ..providers.session_options import SessionOptionsConfig, settings_kept
from .ort_errors import is_cancelled, is_model_error
from .plan import SessionPlan
from .serial import serialised

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


@attrs.frozen
class SessionBuild:
    """A created session with the chain that was asked for and what ORT said while building."""

    session: Any
    requested: tuple[str, ...]
    messages: tuple[str, ...]


if isinstance(sys.modules.get("onnxruntime"), ModuleType):
    hook_onnxruntime(sys.modules["onnxruntime"])
elif "onnxruntime" not in sys.modules:  # hooked right after its import, before a user's logger
    after_import("onnxruntime", hook_onnxruntime)


def model_key(checkpoint: ResolvedCheckpoint) -> str:
    """Which model a build is of, for its lock: the file's real path, or the bytes object (cheap,
    unlike the weights' digest)."""
    if checkpoint.weights_path is not None:
        return os.path.realpath(checkpoint.weights_path)
    return f"<model bytes at {id(checkpoint.model_bytes):#x}>"


@contextlib.contextmanager
def capture_messages(ort: ModuleType, model: str) -> Iterator[list[str]]:
    """Hold the lock of ``model`` (:func:`model_key`); collect ORT's warnings and log lines
    (severity >= warning) that this thread emits inside the block."""
    with _MODEL_LOCKS.hold(model), captured(ort) as messages:
        yield messages


def _in_memory_weights(ort: ModuleType, ort_options: Any, checkpoint: ResolvedCheckpoint) -> None:
    """Hand ONNX Runtime the in-memory initializers and external-data files, read in place (the
    backend keeps the checkpoint alive as long as the session)."""
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


#: The device chain appended to each caller's own SessionOptions (the drop-in's): ONNX Runtime
#: can neither copy one nor take a provider off it, and refuses a provider appended twice.
_APPENDED: weakref.WeakKeyDictionary[Any, tuple[tuple[str, tuple[tuple[str, str], ...]], ...]] = (
    weakref.WeakKeyDictionary()
)


def _add_devices(
    ort_options: Any, chain: Sequence[tuple[str, dict[str, str]]], callers: bool
) -> bool:
    """Append each provider with its devices, in chain order (the plugin-EP library path); on a
    caller's own SessionOptions (``callers``) once: a later build of the same chain reuses it, a
    CPU-only one is built by name (ONNX Runtime then runs only the named providers). Whether the
    session is to be built by devices."""
    wanted = tuple((name, tuple(sorted(options.items()))) for name, options in chain)
    appended = _APPENDED.get(ort_options) if callers else None
    if appended == wanted:
        return True
    if appended is not None:
        if [name for name, _ in chain] == [CPU_EP]:
            return False
        names = ", ".join(name for name, _ in appended)
        raise _NoDevice(
            chain[0][0],
            f"the caller's SessionOptions already carries [{names}] from an earlier session "
            "(ONNX Runtime cannot take a provider off it); pass a new onnxruntime.SessionOptions() "
            "to each session to build on another chain",
        )
    found = [(name, devices_for(name), provider_options) for name, provider_options in chain]
    for name, devices, _ in found:
        if not devices:
            raise _NoDevice(name, f"{name} offers no device on this host")
    if callers:
        _APPENDED[ort_options] = wanted
    for _, devices, provider_options in found:
        ort_options.add_provider_for_devices(devices, provider_options)
    return True


def _try_create(
    ort: ModuleType,
    checkpoint: ResolvedCheckpoint,
    options: SessionOptionsConfig,
    chain: Sequence[tuple[str, dict[str, str]]],
    *,
    by_devices: bool,
    device_policy: str | None,
) -> tuple[Any, Exception | None, list[str]]:
    """One attempt with ``(ort_name, options)`` pairs: ``(session, None, msgs)`` or ``(None, error, msgs)``."""
    source = checkpoint.source
    ort_options = options.to_ort(ort)
    severity = owned_session_severity()
    if severity is not None and options.log_severity_level is None and options.ort_base is None:
        ort_options.log_severity_level = severity  # a caller's own SessionOptions decides itself
    _in_memory_weights(ort, ort_options, checkpoint)
    if device_policy is not None:
        policy = getattr(ort.OrtExecutionProviderDevicePolicy, device_policy)
        ort_options.set_provider_selection_policy(policy)
        by_devices = True  # no providers= list: ONNX Runtime chooses
    elif by_devices:
        try:
            by_devices = _add_devices(ort_options, chain, options.ort_base is not None)
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
            session = session_class(
                source, sess_options=ort_options, enable_fallback=0, **providers
            )
        except Exception as exc:
            return None, exc, captured
        finally:
            _UNDER_WAY.discard(ort_options)
            if timer is not None:
                timer.cancel()
    return session, None, captured


def cancel_builds() -> None:
    """Ask every session build under way to stop (ONNX Runtime's load cancellation flag): one still
    running in a thread at exit aborts the process from native code."""
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
    """Create the session for ``chain``: strict for an explicit chain, graceful for a policy's
    (by device where a provider is a plugin-EP library's); ``explain_declines(kinds)`` gives
    the plugins' reasons for providers that did not run."""
    ort = require_onnxruntime()
    label = checkpoint.label
    remaining = [config.to_ort() for config in chain]
    requested = tuple(name for name, _ in remaining)
    kind_of = {config.to_ort()[0]: config.kind for config in chain}

    def declines(ort_names: Sequence[str]) -> Mapping[str, str]:
        return explain_declines([kind_of[name] for name in ort_names if name in kind_of])

    checkpoint.note_build()  # what is verified on the session is cached only for these files
    by_devices = any(lib is not None for lib in libraries)
    messages: list[str] = _library_messages(libraries)
    if by_devices:
        remaining, by_devices = _split_mixed_chain(
            remaining, libraries, requested, strict, messages, declines=declines
        )
    while True:
        with settings_kept(options.ort_base):  # a caller's own SessionOptions gets them back
            session, error, captured = _try_create(
                ort,
                checkpoint,
                options,
                remaining,
                by_devices=by_devices,
                device_policy=device_policy,
            )
        messages.extend(captured)
        if error is None:
            break
        if is_cancelled(error):
            raise BuildTimeoutError(
                f"building the session for {label} on {list(requested)} took longer than "
                f"load_timeout_s={options.load_timeout_s}; raise it (a first TensorRT engine "
                "build can take minutes and is cached afterwards)"
            ) from error
        cause = _cause(error)
        accelerators = [name for name, _ in remaining if name != CPU_EP]
        if (
            is_model_error(error)
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
    realized = tuple(session.get_providers())
    _enforce(requested, realized, messages, strict, declines)
    _log.info("session for %s: requested %s, realized %s", label, requested, realized)
    return SessionBuild(session, requested, tuple(messages))


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
            stacklevel=user_stacklevel(),
        )


def create_planned(
    checkpoint: ResolvedCheckpoint, plan: SessionPlan, options: SessionOptionsConfig
) -> SessionBuild:
    """Create the session ``plan`` describes, with ``options`` (the plan's, or changed ones);
    its runs are serialised where a realized provider does not declare concurrent runs."""
    build = create_session(
        checkpoint,
        options,
        plan.chain,
        strict=plan.strict,
        libraries=plan.libraries,
        device_policy=plan.device_policy,
        explain_declines=plan.explain_declines,
    )
    plugins = resolve_plugin_host(plan.plugins)
    session = _wrapped(build.session, plan.chain, plugins)
    return attrs.evolve(build, session=serialised(session, plugins))


def _wrapped(session: Any, chain: Sequence[ProviderConfig], plugins: PluginHost) -> Any:
    """``session`` as the chain's realized providers serve it (``ProviderType.session_wrapper``)."""
    realized = set(session.get_providers())
    registry = plugins.provider_registry()
    for config in chain:
        if config.to_ort()[0] not in realized or not registry.has_kind(config.kind):
            continue
        wrapper = registry.lookup(config.kind).type.session_wrapper
        if wrapper is not None:
            session = wrapper(session, config)
    return session
