"""Creating an ONNX Runtime session for a provider chain: capture ORT's messages, enforce the chain.

Sessions are created with ORT's print-and-retry fallback disabled. What ORT
says while building (Python warnings and its C++ log) is captured so an error
or warning can name the cause. An explicit chain is strict: a requested
accelerator that is not realized raises. A policy chain is graceful: an
accelerator that fails to initialize is dropped and the next one tried, and a
warning is raised only when no accelerator at all was realized.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

import attrs

from .._runtime import require_onnxruntime
from ..checkpoint import ResolvedCheckpoint
from ..ep_libraries import EpLibrary, devices_for, ensure_library
from ..errors import (
    BuildTimeoutError,
    ModelLoadError,
    ProviderFallbackWarning,
    ProviderNotRealizedError,
)
from ..providers import CPU_EP, ProviderConfig
from ..session_options import SessionOptionsConfig

__all__ = ["SessionBuild", "create_session"]

_log = logging.getLogger("ortplug")

# ORT's logger callback and Python's warning filters are process-global.
_CAPTURE_LOCK = threading.Lock()

# ORT error classes that describe the model, not a provider: never retried without a provider.
_MODEL_ERRORS = frozenset({"InvalidProtobuf", "InvalidGraph", "NoSuchFile", "NotImplemented"})


@attrs.frozen
class SessionBuild:
    """A created session with the chain that was asked for and what ORT said while building."""

    session: Any
    requested: tuple[str, ...]
    messages: tuple[str, ...]


@contextlib.contextmanager
def _capture_messages(ort: ModuleType) -> Iterator[list[str]]:
    """Collect ORT's warnings and log lines (severity >= warning) emitted inside the block."""
    messages: list[str] = []
    set_callback = getattr(ort, "set_default_logger_callback", None)
    with _CAPTURE_LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if set_callback is not None:
            set_callback(lambda _sev, _cat, _id, _loc, message: messages.append(message), 2)
        try:
            yield messages
        finally:
            if set_callback is not None:
                set_callback(None)
    for item in caught:
        if "onnxruntime" in (item.filename or ""):
            messages.append(str(item.message))
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


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
    """One attempt with ``(ort_name, options)`` pairs: ``(session, None, msgs)`` or ``(None, error, msgs)``."""
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
    timer = None
    if options.load_timeout_s is not None:
        timer = threading.Timer(
            options.load_timeout_s, ort_options.set_load_cancellation_flag, (True,)
        )
        timer.daemon = True
        timer.start()
    with _capture_messages(ort) as captured:
        try:
            session = ort.InferenceSession(
                source, sess_options=ort_options, enable_fallback=0, **providers
            )
        except Exception as exc:
            return None, exc, captured
        finally:
            if timer is not None:
                timer.cancel()
    return session, None, captured


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
            stacklevel=4,
        )
