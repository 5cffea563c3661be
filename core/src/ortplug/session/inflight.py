"""The run options a backend's runs are using, so that ``terminate()`` reaches each of them."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import OptionTypeError
from ..providers.run_options import RunOptionsConfig

if TYPE_CHECKING:
    from .binding import Binding

__all__ = ["RunOptionsInFlight"]


class RunOptionsInFlight:
    """The shared run options, the callers' own while their runs last, and the bindings'."""

    def __init__(self, ort: Any) -> None:
        self._ort = ort
        #: The run options of every run given none (``None`` once closed).
        self.shared: Any = RunOptionsConfig().to_ort(ort)
        self.terminated = False
        self._own: set[Any] = set()
        self._bindings: weakref.WeakSet[Binding] = weakref.WeakSet()
        self._lock = threading.Lock()

    def own(self, config: RunOptionsConfig) -> Any:
        """ONNX Runtime run options for ``config``, registered until :meth:`forget`."""
        if not isinstance(config, RunOptionsConfig):
            raise OptionTypeError(
                f"run_options: expected a RunOptionsConfig, got {type(config).__name__}"
            )
        options = config.to_ort(self._ort)
        with self._lock:
            options.terminate = self.terminated
            self._own.add(options)
        return options

    def forget(self, options: Any) -> None:
        """A run with its own ``options`` ended (``None``: it had none of its own)."""
        if options is not None:
            with self._lock:
                self._own.discard(options)

    @contextlib.contextmanager
    def scoped(self, config: RunOptionsConfig | None) -> Iterator[Any]:
        """The shared run options, or ``config``'s own for the duration of one run."""
        if config is None:
            yield self.shared
            return
        options = self.own(config)
        try:
            yield options
        finally:
            self.forget(options)

    def for_binding(self, config: RunOptionsConfig | None) -> Any:
        """The run options a new IO binding runs with (its own when ``config`` is given)."""
        if config is None:
            return self.shared
        options = config.to_ort(self._ort)
        options.terminate = self.terminated
        return options

    def add_binding(self, binding: Binding) -> None:
        """Reach ``binding``'s run options from :meth:`set_terminate` while it lives."""
        with self._lock:
            self._bindings.add(binding)

    def set_terminate(self, terminate: bool) -> None:
        """Set the flag on the shared options, every run's own and every binding's."""
        with self._lock:
            self.terminated = terminate
            shared = () if self.shared is None else (self.shared,)
            bound = (b.run_options for b in self._bindings)
            for options in (*shared, *self._own, *bound):
                if options is not None:
                    options.terminate = terminate

    def take_bindings(self) -> list[Binding]:
        """The live bindings, forgotten here (to be closed)."""
        with self._lock:
            bindings = list(self._bindings)
            self._bindings = weakref.WeakSet()
        return bindings

    def close(self) -> None:
        """Forget every run's options; the shared ones are gone (``shared`` is ``None``)."""
        with self._lock:
            self._own.clear()
            self.shared = None
