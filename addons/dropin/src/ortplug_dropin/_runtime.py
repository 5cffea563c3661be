"""The ONNX Runtime releases the drop-in is made for: it subclasses ``InferenceSession`` and shares
its session object through ONNX Runtime's internals (``_sess``, ``_bind_session``,
``_check_session_can_be_recreated``, ``_model_path``...), which change between releases.

The runtime wheel is the core's extras' choice (``onnxruntime``, ``onnxruntime-gpu``...), so the
range is checked here, at the first drop-in session, not by pip: outside it the drop-in says so in
one line and ONNX Runtime's own class stays.
"""

from __future__ import annotations

from ortplug.errors import OrtplugError

__all__ = ["TESTED_ONNXRUNTIME", "UnsupportedRuntimeError", "runtime_problem"]

#: ``(lowest, first not tested)`` ONNX Runtime ``(major, minor)``: 1.31 and older lack
#: ``InferenceSession._bind_session``; a newer release is added once the tests pass on it.
TESTED_ONNXRUNTIME = ((1, 32), (1, 33))


class UnsupportedRuntimeError(OrtplugError, ImportError):
    """The installed ONNX Runtime is outside the releases the drop-in is tested on."""


def _release(version: str) -> tuple[int, int] | None:
    parts = version.split(".")[:2]
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        return None
    return int(parts[0]), int(parts[1])


def _text(release: tuple[int, int]) -> str:
    return f"{release[0]}.{release[1]}"


def runtime_problem(version: str) -> str | None:
    """Why the drop-in cannot work on ONNX Runtime ``version`` (``None``: it is tested there)."""
    low, high = TESTED_ONNXRUNTIME
    release = _release(version)
    if release is not None and low <= release < high:
        return None
    return (
        f"the drop-in (ortplug-dropin) works on onnxruntime>={_text(low)},<{_text(high)}, whose "
        f"InferenceSession internals it uses; this is onnxruntime {version}: install a release "
        "in that range, or an ortplug-dropin made for this one"
    )
