"""Inputs for ``ortplug run``: ``NAME=FILE.npy`` arguments and deterministic generated tensors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..backend import InputSpec
from ..errors import MissingFileError, OptionError

__all__ = ["build_feed", "parse_input_args"]

_GENERATED_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def parse_input_args(values: Sequence[str]) -> dict[str, np.ndarray]:
    """Load ``NAME=FILE.npy`` pairs; errors name the argument and the file."""
    feed: dict[str, np.ndarray] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise OptionError(f"--input: expected NAME=FILE.npy, got {value!r}")
        file = Path(path)
        if not file.is_file():
            raise MissingFileError(f"--input {name}: file not found: {file}")
        try:
            feed[name] = np.load(file, allow_pickle=False)
        except ValueError as exc:
            raise OptionError(f"--input {name}: {file} is not a .npy array: {exc}") from exc
    return feed


def _generate(spec: InputSpec, rng: np.random.Generator) -> np.ndarray:
    dtype = _GENERATED_DTYPES.get(spec.type)
    if dtype is None:
        raise OptionError(
            f"input {spec.name!r} of type {spec.type} cannot be generated; "
            f"pass it with --input {spec.name}=FILE.npy"
        )
    shape = tuple(d if isinstance(d, int) and d > 0 else 1 for d in (spec.shape or ()))
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype is np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    return rng.integers(0, 10, shape).astype(dtype)


def build_feed(
    specs: Sequence[InputSpec], given: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], list[str]]:
    """The given arrays plus seeded random ones (dynamic dims as 1) for the rest; and which were made."""
    rng = np.random.default_rng(0)
    feed = dict(given)
    generated = []
    for spec in specs:
        if spec.name not in feed:
            feed[spec.name] = _generate(spec, rng)
            generated.append(spec.name)
    return feed, generated
