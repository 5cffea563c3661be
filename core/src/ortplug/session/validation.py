"""Explains a failed ``run``: which input is missing, unknown, or of the wrong dtype, rank or
shape (checked only once ONNX Runtime rejected a feed)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import numpy as np

__all__ = ["InputChecker", "InputSpec"]

_NUMPY_TYPES: dict[str, Any] = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int8)": np.int8,
    "tensor(int16)": np.int16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
}


@attrs.frozen
class InputSpec:
    """One model input as ONNX Runtime reports it: name, type string and (symbolic) shape."""

    name: str
    type: str
    shape: tuple[int | str | None, ...] | None

    @property
    def shape_text(self) -> str:
        """The shape as people read it: ``[batch, 3, 224, 224]``."""
        if self.shape is None:
            return "[any]"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"


def _dtype_problem(spec: InputSpec, array: np.ndarray) -> str | None:
    if spec.type == "tensor(string)":
        if array.dtype.kind in "OUS":
            return None
        return f"input {spec.name!r}: expected strings (tensor(string)), got dtype {array.dtype}"
    expected = _NUMPY_TYPES.get(spec.type)
    if expected is None or array.dtype == expected:
        return None
    return (
        f"input {spec.name!r}: expected dtype {np.dtype(expected)} ({spec.type}), got {array.dtype}"
    )


@attrs.frozen
class InputChecker:
    """Per-session knowledge of the inputs, used to turn an ORT rejection into a clear error."""

    inputs: tuple[InputSpec, ...]
    overridable: frozenset[str] = frozenset()

    @classmethod
    def from_session(cls, session: Any) -> InputChecker:
        """Read the input specs of a live ``InferenceSession`` once."""
        specs = tuple(
            InputSpec(
                name=arg.name,
                type=arg.type,
                shape=tuple(arg.shape) if isinstance(arg.shape, (list, tuple)) else None,
            )
            for arg in session.get_inputs()
        )
        overridable = frozenset(arg.name for arg in session.get_overridable_initializers())
        return cls(inputs=specs, overridable=overridable)

    @property
    def names(self) -> list[str]:
        """The model's input names in order."""
        return [spec.name for spec in self.inputs]

    def problems(self, feed: object) -> list[str]:
        """Everything wrong with ``feed``; empty when the checker finds nothing to blame."""
        if not isinstance(feed, Mapping):
            return [
                "inputs: expected a mapping of input name to array "
                f"(the model's inputs are {self.names}), got {type(feed).__name__}"
            ]
        problems = self._name_problems(feed)
        fed = [(spec, np.asarray(feed[spec.name])) for spec in self.inputs if spec.name in feed]
        for spec, array in fed:
            problem = _dtype_problem(spec, array) or self._shape_problem(spec, array)
            if problem:
                problems.append(problem)
        problems.extend(self._symbolic_problems(fed))
        return problems

    def _name_problems(self, feed: Mapping[Any, Any]) -> list[str]:
        names = self.names
        problems = [
            f"missing input {name!r}; the model's inputs are {names}"
            for name in names
            if name not in feed
        ]
        for key in feed:
            if key in names or key in self.overridable:
                continue
            import difflib  # only for a wrong name: not on every start-up

            lowered = {name.lower(): name for name in names}
            close = difflib.get_close_matches(str(key).lower(), list(lowered), n=1)
            hint = f" (did you mean {lowered[close[0]]!r}?)" if close else ""
            problems.append(f"unknown input {key!r}{hint}; the model's inputs are {names}")
        return problems

    @staticmethod
    def _shape_problem(spec: InputSpec, array: np.ndarray) -> str | None:
        if spec.shape is None or not spec.type.startswith("tensor("):
            return None
        if array.ndim != len(spec.shape):
            return (
                f"input {spec.name!r}: expected rank {len(spec.shape)} (shape {spec.shape_text}), "
                f"got rank {array.ndim} (shape {tuple(array.shape)})"
            )
        for axis, (want, got) in enumerate(zip(spec.shape, array.shape)):
            if isinstance(want, int) and want >= 0 and want != got:
                return (
                    f"input {spec.name!r}: dimension {axis} must be {want} "
                    f"(shape {spec.shape_text}), got {got} (shape {tuple(array.shape)})"
                )
        return None

    @staticmethod
    def _symbolic_problems(items: Iterable[tuple[InputSpec, np.ndarray]]) -> list[str]:
        seen: dict[str, tuple[str, int]] = {}
        problems = []
        for spec, array in items:
            if spec.shape is None or array.ndim != len(spec.shape):
                continue
            for want, got in zip(spec.shape, array.shape):
                if not isinstance(want, str):
                    continue
                first = seen.setdefault(want, (spec.name, got))
                if first[1] != got:
                    problems.append(
                        f"inputs {first[0]!r} and {spec.name!r} disagree on dimension "
                        f"{want!r}: {first[1]} vs {got}"
                    )
        return problems
