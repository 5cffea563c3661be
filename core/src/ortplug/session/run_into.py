"""``run_into``: a run that writes its outputs into the caller's arrays, through one IO binding per
thread and session, bound again only when shapes, dtypes or arrays change."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from .feeds import check_into_outputs

if TYPE_CHECKING:
    from .introspection import ValueInfo

__all__ = ["IntoRunner"]


class _Bound(threading.local):
    """One thread's IO binding and the OrtValues wrapping the caller's arrays."""

    binding: Any = None
    signature: object = None  # (input names/shapes/dtypes, output names/array ids) last bound
    outputs: dict[str, tuple[np.ndarray, Any]]

    def __init__(self) -> None:
        self.outputs = {}


class IntoRunner:
    """``run_into`` on one session (a new runner for a new session: bindings belong to one)."""

    def __init__(self, session: Any, ort_value: Any) -> None:
        self._session = session
        self._ort_value = ort_value
        self._bound = _Bound()
        self._infos: tuple[tuple[ValueInfo, ...], tuple[ValueInfo, ...]] | None = None

    def _described(self) -> tuple[tuple[ValueInfo, ...], tuple[ValueInfo, ...]]:
        """The session's inputs and outputs, read once (it holds no reference to its owner, so an
        unclosed backend is freed when its last reference goes, not by the cycle collector)."""
        if self._infos is None:
            from .introspection import value_infos  # its classes: only for run_into callers

            session = self._session
            self._infos = (value_infos(session.get_inputs()), value_infos(session.get_outputs()))
        return self._infos

    def run(
        self,
        feed: Mapping[str, Any],
        outputs: Mapping[str, np.ndarray],
        run_options: Any,
        failed: Callable[[Mapping[str, Any], Exception], NoReturn],
    ) -> Mapping[str, np.ndarray]:
        """Run ``feed`` into ``outputs``; ``failed(feed, error)`` raises a run's error."""
        bound = self._bound
        signature = (
            tuple(
                (n, getattr(v, "shape", None), getattr(v, "dtype", None)) for n, v in feed.items()
            ),
            tuple((n, id(a)) for n, a in outputs.items()) if isinstance(outputs, Mapping) else None,
        )
        if signature != bound.signature:
            self._bind(bound, feed, outputs)
            bound.signature = signature
        binding = bound.binding
        try:
            for name, value in feed.items():
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
            self._session.run_with_iobinding(binding, run_options)
        except Exception as exc:
            bound.signature = None
            failed(feed, exc)
        return outputs

    def _bind(self, bound: _Bound, feed: Mapping[str, Any], outputs: object) -> None:
        """Check the caller's output arrays for these inputs and bind them (on a new signature)."""
        inputs, described = self._described()
        targets = check_into_outputs(outputs, described, inputs, feed)
        if bound.binding is None:
            bound.binding = self._session.io_binding()
        binding = bound.binding
        binding.clear_binding_inputs()
        binding.clear_binding_outputs()
        for name, array in targets.items():
            known = bound.outputs.get(name)
            if known is None or known[0] is not array:
                known = bound.outputs[name] = (array, self._ort_value.ortvalue_from_numpy(array))
            binding.bind_ortvalue_output(name, known[1])
