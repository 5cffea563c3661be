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
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import attrs
import numpy as np

from .._runtime import require_onnxruntime
from ..checkpoint import ResolvedCheckpoint
from ..errors import ProviderFallbackWarning, ProviderNotRealizedError
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
    """Hand ONNX Runtime the initializers and external-data files the checkpoint holds in memory."""
    if checkpoint.initializers:
        names = list(checkpoint.initializers)
        values = [
            ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(checkpoint.initializers[n]))
            for n in names
        ]
        ort_options.add_external_initializers(names, values)
    if checkpoint.external_data:
        files = list(checkpoint.external_data)
        buffers = [checkpoint.external_data[f] for f in files]
        ort_options.add_external_initializers_from_files_in_memory(
            files, buffers, [len(b) for b in buffers]
        )


def _try_create(
    ort: ModuleType,
    checkpoint: ResolvedCheckpoint,
    options: SessionOptionsConfig,
    chain: Sequence[tuple[str, dict[str, str]]],
) -> tuple[Any, Exception | None, list[str]]:
    """One attempt with ``(ort_name, options)`` pairs: ``(session, None, msgs)`` or ``(None, error, msgs)``."""
    source = checkpoint.source
    ort_options = options.to_ort(ort)
    _in_memory_weights(ort, ort_options, checkpoint)
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
                source,
                sess_options=ort_options,
                providers=[name for name, _ in chain],
                provider_options=[opts for _, opts in chain],
                enable_fallback=0,
            )
        except Exception as exc:
            return None, exc, captured
        finally:
            if timer is not None:
                timer.cancel()
    return session, None, captured


def create_session(
    checkpoint: ResolvedCheckpoint,
    options: SessionOptionsConfig,
    chain: Sequence[ProviderConfig],
    *,
    strict: bool,
) -> SessionBuild:
    """Create the session for ``chain`` (strict or graceful, see the module docstring)."""
    ort = require_onnxruntime()
    label = checkpoint.label
    remaining = [config.to_ort() for config in chain]
    requested = tuple(name for name, _ in remaining)
    messages: list[str] = []
    while True:
        session, error, captured = _try_create(ort, checkpoint, options, remaining)
        messages.extend(captured)
        if error is None:
            break
        kind = type(error).__name__
        if kind == "ModelLoadCanceled":
            raise TimeoutError(
                f"building the session for {label} on {list(requested)} took longer than "
                f"load_timeout_s={options.load_timeout_s}; raise it (a first TensorRT engine "
                "build can take minutes and is cached afterwards)"
            ) from error
        cause = f"{kind}: {error}"
        accelerators = [name for name, _ in remaining if name != CPU_EP]
        if kind in _MODEL_ERRORS or not accelerators:
            raise ValueError(f"ONNX Runtime could not load {label}: {cause}") from error
        if strict:
            raise ProviderNotRealizedError(
                requested, (), accelerators, _join(messages, cause)
            ) from error
        _log.warning("dropping %s from the chain: %s", accelerators[0], cause)
        messages.append(cause)
        remaining.remove(next(entry for entry in remaining if entry[0] != CPU_EP))
    realized = tuple(session.get_providers())
    _enforce(requested, realized, messages, strict)
    _log.info("session for %s: requested %s, realized %s", label, requested, realized)
    return SessionBuild(session, requested, tuple(messages))


def _join(messages: Sequence[str], extra: str = "") -> str:
    parts = [m.strip() for m in (*messages, extra) if m and m.strip()]
    return "; ".join(dict.fromkeys(parts))


def _enforce(
    requested: Sequence[str], realized: Sequence[str], messages: Sequence[str], strict: bool
) -> None:
    accelerators = [name for name in requested if name != CPU_EP]
    missing = [name for name in accelerators if name not in realized]
    if not missing:
        return
    if strict:
        raise ProviderNotRealizedError(requested, realized, missing, _join(messages))
    if len(missing) == len(accelerators):
        warnings.warn(
            f"no accelerator was realized: requested {list(requested)}, running on "
            f"{list(realized)}; cause reported by ONNX Runtime: {_join(messages) or 'none given'}",
            ProviderFallbackWarning,
            stacklevel=4,
        )
