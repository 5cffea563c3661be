"""Helpers shared by the serving add-on's tests: the models they serve and callers at once.

Real models built with ``onnx.helper`` (the repository's ``tests/models.py`` builds them) and
real threads: one whose rows are computed one by one, one whose rows mix.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import models
import numpy as np
from onnx import TensorProto, helper, numpy_helper

#: The weight of :func:`rows_model`: ``y = x @ WEIGHT``.
WEIGHT = np.arange(12, dtype=np.float32).reshape(4, 3)


def rows_model() -> bytes:
    """y = x @ w, x [batch, 4]: rows computed one by one."""
    return models.graph_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(WEIGHT, "w")],
    )


def mixing_model() -> bytes:
    """y = x - mean(x over the batch): rows mix, so requests must never share a run."""
    return models.graph_model(
        [
            helper.make_node("ReduceMean", ["x"], ["mean"], axes=[0], keepdims=1),
            helper.make_node("Sub", ["x", "mean"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
    )


def callers(count: int, call: Callable[[int], Any], threads: int | None = None) -> list[Any]:
    """``call(i)`` for each ``i < count`` from ``threads`` threads started together (default:
    one per call), thread ``t`` making calls ``t``, ``t + threads``...; each call's result or
    exception."""
    results: list[Any] = [None] * count
    width = count if threads is None else min(threads, count)
    start = threading.Barrier(width)

    def run(first: int) -> None:
        start.wait()
        for index in range(first, count, width):
            try:
                results[index] = call(index)
            except Exception as exc:
                results[index] = exc

    started = [threading.Thread(target=run, args=(i,)) for i in range(width)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return results
