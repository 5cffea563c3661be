"""Runs of sessions whose providers do not declare concurrent runs safe, one at a time per kind."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import OptionError

if TYPE_CHECKING:
    from ..plugin_host.manager import PluginHost

__all__ = ["KindLocks", "SerialSession", "concurrent_runs", "serial_lock", "serialised"]

_guard = threading.Lock()
_locks: dict[str, threading.Lock] = {}


def _lock_of(kind: str) -> threading.Lock:
    with _guard:
        return _locks.setdefault(kind, threading.Lock())


class KindLocks:
    """The locks of the kinds a session's runs wait for, taken in kind order (two sessions that
    share kinds never wait for each other's)."""

    def __init__(self, kinds: Sequence[str]) -> None:
        self.kinds = tuple(sorted(set(kinds)))
        self._locks = [_lock_of(kind) for kind in self.kinds]

    def acquire(self) -> None:
        for lock in self._locks:
            lock.acquire()

    def release(self) -> None:
        for lock in reversed(self._locks):
            lock.release()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()


def _serialised_kinds(providers: Sequence[str], plugins: PluginHost) -> list[str]:
    """The kinds of ``providers`` (ONNX Runtime names) whose type does not declare concurrent
    runs; a name no plugin registers stands for itself."""
    registry = plugins.provider_registry()
    kinds = []
    for name in providers:
        try:
            ptype = registry.lookup(name).type
        except OptionError:  # no plugin holds it: nothing says its runs may overlap
            kinds.append(name)
            continue
        if not ptype.concurrent_runs:
            kinds.append(ptype.kind)
    return kinds


def concurrent_runs(providers: Sequence[str], plugins: PluginHost) -> bool:
    """Whether every provider of ``providers`` (ONNX Runtime names) declares concurrent runs."""
    return not _serialised_kinds(providers, plugins)


def serialised(session: Any, plugins: PluginHost) -> Any:
    """``session`` as it is served: a :class:`SerialSession` when one of its realized providers
    does not declare concurrent runs, else ``session`` itself."""
    if isinstance(session, SerialSession):
        return session
    kinds = _serialised_kinds(list(session.get_providers()), plugins)
    return SerialSession(session, KindLocks(kinds)) if kinds else session


def serial_lock(session: object) -> KindLocks | None:
    """The locks ``session``'s runs take (``None``: it runs concurrently, without a lock)."""
    return session.lock if isinstance(session, SerialSession) else None


def _unwrapped(binding: object) -> object:
    return binding._inner if isinstance(binding, _SerialBinding) else binding


class _SerialBinding:
    """An IO binding of a :class:`SerialSession`: each call holds the session's locks (binding a
    CPU input copies it to the device, reading an output copies it back)."""

    def __init__(self, inner: Any, lock: KindLocks) -> None:
        self._inner = inner
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value
        lock = self._lock

        def locked(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return value(*args, **kwargs)

        return locked


class SerialSession:
    """An ONNX Runtime session whose runs hold :attr:`lock`; everything else is the session's."""

    def __init__(self, inner: Any, lock: KindLocks) -> None:
        self._inner = inner
        self.lock = lock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def inner(self) -> Any:
        """The ONNX Runtime session whose runs this serialises."""
        return self._inner

    def run(self, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return self._inner.run(*args, **kwargs)

    def run_with_ort_values(self, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return self._inner.run_with_ort_values(*args, **kwargs)

    def run_with_ortvaluevector(self, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return self._inner.run_with_ortvaluevector(*args, **kwargs)

    def run_with_iobinding(self, iobinding: Any, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return self._inner.run_with_iobinding(_unwrapped(iobinding), *args, **kwargs)

    def io_binding(self) -> _SerialBinding:
        return _SerialBinding(self._inner.io_binding(), self.lock)

    def run_async(
        self,
        output_names: Any,
        input_feed: Any,
        callback: Callable[[Any, Any, str], None],
        user_data: Any = None,
        run_options: Any = None,
    ) -> Any:
        """ONNX Runtime's ``run_async``, the locks held from the call until its callback starts
        (released first: a callback may start the next run)."""
        release = _once(self.lock.release)

        def done(results: Any, data: Any, error: str) -> None:
            release()
            callback(results, data, error)

        self.lock.acquire()
        try:
            return self._inner.run_async(output_names, input_feed, done, user_data, run_options)
        except BaseException:
            release()
            raise


def _once(function: Callable[[], None]) -> Callable[[], None]:
    """``function``, run by the first call only (the callback, or a start that failed)."""
    first = threading.Lock()

    def call() -> None:
        if first.acquire(blocking=False):
            function()

    return call
