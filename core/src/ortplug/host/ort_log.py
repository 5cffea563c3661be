"""ONNX Runtime's log as ortplug shares it with the program: captured where ortplug acts, left
to ONNX Runtime where the program's own sessions are built (how: docs/internals.md)."""

from __future__ import annotations

import _thread  # threading is not imported by ONNX Runtime: ~0.6 ms more at its import under exec
import contextlib
import functools
import sys
import warnings
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

__all__ = ["captured", "hook_onnxruntime", "left_to_ort", "owned_session_severity"]

_CAPTURED_SEVERITY = 2  # ORT's warning: lines at or above it become messages
_FATAL = 4  # ORT's fatal: what ortplug's own sessions log at (nothing a run or build says)
_SEVERITY_LETTERS = "VIWEF"  # ORT's own logger prefixes a line with its severity's letter


class _Thread(_thread._local):
    """This thread's capture: its messages, and whether its ORT log lines are among them."""

    messages: list[str] | None = None  # a capture runs (ORT's Python warnings go here)
    logged: bool = False  # ortplug's callback takes this thread's log lines into ``messages``
    echo: bool = False  # and also writes them where ORT's logger would (ORTPLUG_DEBUG)
    left_to_ort: bool = False  # sessions built and run here log as the program set ORT's logger


_THREAD = _Thread()


class _Logger:
    """ORT's logger functions as ortplug found them, and what the program last set through them
    (a plain class: the drop-in imports this module at ``import onnxruntime``, attrs costs ~15 ms)."""

    set_callback: Callable[..., None] | None = None
    set_severity: Callable[[int], None] | None = None
    callback: Callable[..., object] | None = None
    severity: int = _CAPTURED_SEVERITY  # ORT's default
    capturing: bool = False  # a capture runs: ortplug's callback is installed
    captures: int = 0  # captures running now (several threads capture side by side)
    hooked: bool = False  # the setters are wrapped (once per process)
    left_to_ort: int = 0  # drop-in builds under way (on any thread): captures leave the logger


_LOGGER = _Logger()
_LOGGER_LOCK = _thread.allocate_lock()  # never taken by _dispatch: ORT may hold its own lock then


def _dispatch(severity: int, category: str, logid: str, location: str, message: str) -> None:
    """ORT's logger callback during a capture: keeps the capturing thread's lines, hands on all."""
    own = _THREAD.messages if _THREAD.logged else None
    if own is not None and severity >= _CAPTURED_SEVERITY:
        own.append(message)
    callback = _LOGGER.callback
    if severity < _LOGGER.severity:
        return
    if callback is not None:
        callback(severity, category, logid, location, message)
    elif own is None or _THREAD.echo:  # where ORT's own logger would have put it
        letter = _SEVERITY_LETTERS[severity] if 0 <= severity < 5 else "?"
        sys.stderr.write(f"[{letter}:{category}:{logid}, {location}] {message}\n")


def _apply_logger() -> None:
    """Install ortplug's callback during a capture, else the program's settings (lock held)."""
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
    """``onnxruntime.set_default_logger_callback``, remembered to be put back after captures."""

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
    """``onnxruntime.set_default_logger_severity``, remembered to be put back after captures."""

    @functools.wraps(set_severity)
    def remembered(severity: int) -> None:
        with _LOGGER_LOCK:
            set_severity(severity)
            _LOGGER.severity = int(severity)
            if _LOGGER.capturing:
                _apply_logger()

    return remembered


class _OrtWarnings:
    """``warnings`` inside ORT's session module: a capturing thread's warnings become its
    messages; every other thread's go to Python's ``warnings`` unchanged."""

    def __getattr__(self, name: str) -> Any:
        return getattr(warnings, name)

    @staticmethod
    def warn(
        message: Any, category: Any = None, stacklevel: int = 1, source: Any = None, **kwargs: Any
    ) -> None:
        """Record ``message`` for this thread's capture, or warn as ORT asked (from ORT's frame)."""
        messages = _THREAD.messages
        if messages is None:
            warnings.warn(message, category, stacklevel + 1, source, **kwargs)
        else:
            messages.append(str(message))


def hook_onnxruntime(ort: ModuleType) -> None:
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


def _set_capturing(starting: bool) -> None:
    """Start or end a capture of ORT's log: ortplug's callback while any capture runs."""
    with _LOGGER_LOCK:
        _LOGGER.captures += 1 if starting else -1
        if _LOGGER.capturing != (_LOGGER.captures > 0):
            _LOGGER.capturing = _LOGGER.captures > 0
            _apply_logger()


def _debug() -> bool:
    """``ORTPLUG_DEBUG=1``: ONNX Runtime's own log shows."""
    from ..settings import settings  # deferred: read when a log is captured, not at import

    return settings().debug


@contextlib.contextmanager
def captured(ort: ModuleType) -> Iterator[list[str]]:
    """Collect ORT's warnings and log lines (severity >= warning) this thread emits in the block;
    while a :func:`left_to_ort` block runs anywhere, only its Python warnings."""
    hook_onnxruntime(ort)
    logged = not _LOGGER.left_to_ort
    messages: list[str] = []
    outer = (_THREAD.messages, _THREAD.logged, _THREAD.echo)
    if logged:
        _set_capturing(True)
    _THREAD.messages, _THREAD.logged, _THREAD.echo = messages, logged, _debug()
    try:
        yield messages
    finally:
        _THREAD.messages, _THREAD.logged, _THREAD.echo = outer
        if logged:
            _set_capturing(False)


@contextlib.contextmanager
def left_to_ort() -> Iterator[None]:
    """Sessions built and run on this thread in the block log as ONNX Runtime's own class would:
    at the program's severity, to the program's logger, build-time lines included (the drop-in)."""
    outer = _THREAD.left_to_ort
    _THREAD.left_to_ort = True
    with _LOGGER_LOCK:
        _LOGGER.left_to_ort += 1
    try:
        yield
    finally:
        with _LOGGER_LOCK:
            _LOGGER.left_to_ort -= 1
        _THREAD.left_to_ort = outer


def owned_session_severity() -> int | None:
    """The log severity of a session ortplug builds for itself when its options name none:
    fatal, so neither its build nor its runs write ONNX Runtime's log to stderr (ortplug's
    errors carry ONNX Runtime's message); ``None`` (ONNX Runtime's default logger decides)
    with ``ORTPLUG_DEBUG=1`` and inside :func:`left_to_ort`."""
    return None if _THREAD.left_to_ort or _debug() else _FATAL
