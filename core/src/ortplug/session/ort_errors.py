"""ONNX Runtime's exceptions read by their class: the one place that says what an ORT error means."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ..errors import InputValidationError, RunFailedError, RunTerminatedError

__all__ = ["TERMINATED", "is_cancelled", "is_model_error", "run_failure"]

#: What a terminated run raises, for every run form.
TERMINATED = "the run was stopped by OnnxBackend.terminate(); call reset_terminate() to run again"
#: The classes that describe the model, not a provider: retrying without a provider cannot help.
_MODEL_CLASSES = ("InvalidProtobuf", "InvalidGraph", "NoSuchFile", "NotImplemented", "NoModel")
#: What a build that ran past ``load_timeout_s`` raises (``SessionOptions`` cancelled it).
_CANCELLED = ("ModelLoadCanceled",)


@functools.cache
def _classes(names: tuple[str, ...]) -> tuple[type[BaseException], ...]:
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    return tuple(getattr(state, name) for name in names if hasattr(state, name))


def is_model_error(error: BaseException) -> bool:
    """Whether ONNX Runtime refused the model itself (a bad file, graph or operator)."""
    return isinstance(error, _classes(_MODEL_CLASSES))


def is_cancelled(error: BaseException) -> bool:
    """Whether a session build was cancelled (it ran past its load time-out)."""
    return isinstance(error, _classes(_CANCELLED))


def run_failure(
    error: BaseException,
    *,
    model: str,
    providers: Sequence[str],
    terminated: bool,
    problems: Sequence[str] = (),
) -> Exception:
    """The error a caller gets for ONNX Runtime's ``error`` in a run: terminated, the caller's
    inputs (``problems`` found in them), or a :class:`~ortplug.errors.RunFailedError`."""
    if terminated:
        return RunTerminatedError(TERMINATED)
    if problems:
        return InputValidationError(list(problems))
    return RunFailedError(
        f"ONNX Runtime failed to run model {model!r} on {list(providers)}: "
        f"{type(error).__name__}: {error}"
    )
