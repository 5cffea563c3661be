"""The argument handling of the run forms: feeds by name or position, output selection, run_into checks.

Each helper runs only on the path that needs it; a plain ``run(dict)`` calls none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import OptionError, OptionTypeError

if TYPE_CHECKING:
    from .introspection import ValueInfo

__all__ = ["bfloat16_as_ort_values", "check_into_outputs", "feed_by_name", "select_outputs"]

_BFLOAT16 = 16  # ONNX TensorProto.BFLOAT16


def feed_by_name(
    inputs: object, input_names: Sequence[str], overridable: Sequence[str]
) -> dict[str, Any]:
    """A feed dict from a mapping, or from a sequence in model order (then overridable initializers)."""
    if isinstance(inputs, Mapping):
        return dict(inputs)
    if isinstance(inputs, (list, tuple)):
        slots = [*input_names, *overridable]
        if len(inputs) > len(slots):
            raise OptionError(
                f"inputs: got {len(inputs)} positional values, the model takes at most "
                f"{len(slots)} ({slots})"
            )
        return dict(zip(slots, inputs))
    raise OptionTypeError(
        "inputs: expected a mapping of input name to value, or a list in model order "
        f"({list(input_names)}), got {type(inputs).__name__}"
    )


def select_outputs(requested: object, output_names: Sequence[str]) -> list[str]:
    """Validate an output subset (names, or one name); errors list the model's outputs."""
    names = [requested] if isinstance(requested, str) else requested
    if not isinstance(names, (list, tuple)) or not names:
        raise OptionError(
            f"outputs: expected a non-empty list of output names from {list(output_names)}, "
            f"got {requested!r}"
        )
    unknown = [name for name in names if name not in output_names]
    if unknown:
        raise OptionError(
            f"outputs: {unknown} not outputs of the model; its outputs are {list(output_names)}"
        )
    return list(names)


def _dims_from_feed(inputs: Sequence[ValueInfo], feed: Mapping[str, Any]) -> dict[str, int]:
    """Symbolic dimension -> size, as the fed arrays fix them."""
    sizes: dict[str, int] = {}
    for info in inputs:
        value = feed.get(info.name)
        shape = getattr(value, "shape", None)
        if info.shape is None or shape is None or len(shape) != len(info.shape):
            continue
        for dim, size in zip(info.shape, shape):
            if isinstance(dim, str):
                sizes.setdefault(dim, int(size))
    return sizes


def check_into_outputs(
    targets: object,
    outputs: Sequence[ValueInfo],
    inputs: Sequence[ValueInfo],
    feed: Mapping[str, Any],
) -> dict[str, np.ndarray]:
    """Check caller-owned output arrays before ONNX Runtime runs: names, dtype, layout, shape."""
    if not isinstance(targets, Mapping) or not targets:
        raise OptionTypeError(
            "outputs: expected a mapping of output name to a preallocated numpy array, "
            f"got {type(targets).__name__}"
        )
    by_name = {info.name: info for info in outputs}
    sizes = _dims_from_feed(inputs, feed)
    problems = []
    for name, array in targets.items():
        info = by_name.get(name)
        if info is None:
            problems.append(
                f"{name!r} is not an output of the model; its outputs are {list(by_name)}"
            )
            continue
        if not isinstance(array, np.ndarray):
            problems.append(f"output {name!r}: expected a numpy array, got {type(array).__name__}")
            continue
        if info.dtype is None or info.element_type == "string":
            problems.append(f"output {name!r} is {info.type}; run_into writes numeric tensors only")
            continue
        if array.dtype != info.dtype:
            problems.append(
                f"output {name!r}: expected dtype {info.dtype} ({info.type}), got {array.dtype}"
            )
        if not (array.flags.c_contiguous and array.flags.writeable):
            problems.append(f"output {name!r}: expected a writeable C-contiguous array")
        expected = _expected_shape(info, sizes)
        if expected is not None and (
            len(expected) != array.ndim
            or any(want is not None and want != got for want, got in zip(expected, array.shape))
        ):
            shown = tuple("?" if d is None else d for d in expected)
            problems.append(
                f"output {name!r}: expected shape {shown} for these inputs, got {array.shape}"
            )
    if problems:
        raise OptionError("run_into: " + "; ".join(problems))
    return dict(targets)


def _expected_shape(info: ValueInfo, sizes: Mapping[str, int]) -> tuple[int | None, ...] | None:
    if info.shape is None:
        return None
    return tuple(
        d if isinstance(d, int) and d >= 0 else sizes.get(d) if isinstance(d, str) else None
        for d in info.shape
    )


def bfloat16_as_ort_values(feed: Mapping[str, Any], ort_value: Any) -> dict[str, Any] | None:
    """The feed with ``ml_dtypes.bfloat16`` arrays wrapped as ``OrtValue`` (which ORT accepts), or
    ``None`` when there is none: numpy has no bfloat16 of its own, so ORT rejects such arrays."""
    converted = {
        name: ort_value.ortvalue_from_numpy_with_onnx_type(
            np.ascontiguousarray(value).view(np.uint16), _BFLOAT16
        )
        for name, value in feed.items()
        if getattr(getattr(value, "dtype", None), "name", "") == "bfloat16"
    }
    return {**feed, **converted} if converted else None
