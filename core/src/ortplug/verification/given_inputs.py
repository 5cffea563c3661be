"""Inputs a caller gives verification (``verify_inputs=``, ``ortplug verify --input``), checked in
one :class:`~ortplug.errors.GivenInputsError` line naming the input."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import GivenInputsError
from ..session.validation import InputChecker, InputSpec

__all__ = ["given_inputs", "given_problem", "refused_problem"]


def given_inputs(value: object, names: Sequence[str]) -> dict[str, np.ndarray]:
    """``value`` (``verify_inputs``) as arrays by input name, each named input one of ``names``
    (the model's) and each value a numpy array that is not of objects."""
    if not isinstance(value, Mapping):
        raise GivenInputsError(
            f"expected a mapping of input name to numpy array, got {type(value).__name__}"
        )
    arrays = {}
    for name, array in value.items():
        if name not in names:
            raise GivenInputsError(
                f"input {name!r}: expected one of the model's inputs ({', '.join(names)})"
            )
        if not isinstance(array, np.ndarray) or array.dtype.hasobject:
            got = f"dtype {array.dtype}" if isinstance(array, np.ndarray) else type(array).__name__
            raise GivenInputsError(f"input {name!r}: expected a numeric numpy array, got {got}")
        arrays[str(name)] = array
    return arrays


def given_problem(specs: Sequence[InputSpec], given: Mapping[str, np.ndarray]) -> str | None:
    """The first way ``given`` does not fit the inputs ``specs`` describe (the CPU reference's):
    a dtype, a rank, a fixed dimension, two given inputs that disagree on a named one."""
    checker = InputChecker(tuple(spec for spec in specs if spec.name in given))
    return next(iter(checker.problems(given)), None)


def refused_problem(given: Mapping[str, np.ndarray], reason: str) -> str:
    """Why the CPU reference refused every feed made with ``given`` (``reason``: what it raised)."""
    shapes = ", ".join(f"{name} {a.dtype} {tuple(a.shape)}" for name, a in given.items())
    expected = "expected arrays the CPU reference runs, got ones it refused"
    return f"input(s) {shapes}: {expected}: {reason}"
