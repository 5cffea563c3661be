"""``Binding``: inputs and outputs bound to a session once, run many times (ONNX Runtime IO
binding: no feed converted, no output allocated per call)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from ..errors import BackendClosedError, OptionError, OptionTypeError, RunTerminatedError
from .introspection import ValueInfo

__all__ = ["Binding", "accumulates", "bindable"]


class _BackendClosedError(BackendClosedError):
    """The backend that made the binding was closed."""


def _closed(*_: object) -> NoReturn:
    raise _BackendClosedError("this Binding's OnnxBackend is closed; bind again on a new backend")


#: Output kinds ONNX Runtime appends to on each run of an IO binding that keeps them bound.
_ACCUMULATING = ("sequence", "map")


def accumulates(info: ValueInfo) -> bool:
    """Whether a bound output of this type grows by each run's items (a sequence or map, also
    as an optional's element) instead of being overwritten."""
    if info.kind == "optional" and info.element is not None:
        return accumulates(info.element)
    return info.kind in _ACCUMULATING


def bindable(info: ValueInfo) -> bool:
    """Whether ONNX Runtime's IO binding takes a value of this type: not a string tensor (it
    refuses a bound string input, and a bound string output corrupts memory when copied out)."""
    if info.kind == "optional" and info.element is not None:
        return bindable(info.element)
    return not (info.kind == "tensor" and info.element_type == "string")


def _unbindable(what: str, info: ValueInfo) -> str:
    return (
        f"{what}: {info.name!r} is {info.type}, which ONNX Runtime's IO binding cannot hold; "
        "run it with backend.run() instead"
    )


class _ClosedIoBinding:
    """Stands in for the released IO binding of a closed backend: every method raises."""

    def __getattr__(self, _name: str) -> Callable[..., NoReturn]:
        return _closed


class Binding:
    """Made by :meth:`OnnxBackend.bind`; not safe to share between threads.

    A bound numpy input is read at each :meth:`run` (in-place updates are seen; one not
    C-contiguous of the input's dtype is copied before each run); outputs are allocated again
    for a new input shape, and sequence and map outputs before each run.
    """

    def __init__(
        self,
        session: Any,
        run_options: Any,
        inputs: Sequence[ValueInfo],
        outputs: Sequence[ValueInfo],
        ort_value: Any,
    ) -> None:
        self._binding = session.io_binding()
        self._providers = tuple(session.get_providers())
        self._run_with_iobinding = session.run_with_iobinding
        self._run_options = run_options
        self._inputs = {info.name: info for info in inputs}
        self._outputs = {info.name: info for info in outputs}
        self._ort_value = ort_value
        self._bound_outputs: list[str] = []
        self._keep: dict[str, Any] = {}  # arrays backing bound values must outlive the binding
        self._copies: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # name: (caller's, bound)
        self._shapes: dict[str, tuple[int, ...]] = {}  # each input's shape when it was bound
        self._allocated: dict[str, tuple[str, int]] = {}  # ORT-allocated outputs: (device, id)
        self._accumulating = frozenset(info.name for info in outputs if accumulates(info))
        self._rebound: dict[str, tuple[str, int]] = {}  # allocated ones bound afresh each run
        self._unwritten: set[str] = set()  # ORT-allocated outputs no run has written yet

    def bind_input(self, name: str, value: Any) -> Binding:
        """Bind an input (or overridable initializer) to a numpy array or an ``OrtValue``."""
        if name not in self._inputs:
            raise OptionError(
                f"bind_input: {name!r} is not an input of the model; inputs: {list(self._inputs)}"
            )
        if not bindable(self._inputs[name]):
            raise OptionError(_unbindable("bind_input", self._inputs[name]))
        self._copies.pop(name, None)
        if isinstance(value, self._ort_value):
            self._binding.bind_ortvalue_input(name, value)
            shape = tuple(value.shape())
        else:
            array = np.ascontiguousarray(value)
            expected = self._inputs[name].dtype
            if expected is not None and array.dtype != expected:
                raise OptionError(
                    f"bind_input: input {name!r} expects dtype {expected} "
                    f"({self._inputs[name].type}), got {array.dtype}"
                )
            self._binding.bind_cpu_input(name, array)
            self._keep[name] = array
            if isinstance(value, np.ndarray) and array is not value:
                self._copies[name] = (value, array)  # re-copied before each run
            shape = array.shape
        if self._shapes.get(name, shape) != shape:
            self._reallocate_outputs()
        self._shapes[name] = shape
        return self

    def _reallocate_outputs(self) -> None:
        """Let ONNX Runtime allocate its outputs afresh: the last run's have the old shapes."""
        for name, (device, device_id) in self._allocated.items():
            self._binding.bind_output(name, device, device_id)
            self._unwritten.add(name)

    def bind_output(
        self, name: str, target: Any = None, *, device: str = "cpu", device_id: int = 0
    ) -> Binding:
        """Bind an output: into ``target`` (a numpy array or ``OrtValue``), or let ONNX Runtime
        allocate it on ``device`` (``"cpu"``, or ``"cuda"`` to keep it on the GPU)."""
        info = self._outputs.get(name)
        if info is None:
            raise OptionError(
                f"bind_output: {name!r} is not an output of the model; outputs: {list(self._outputs)}"
            )
        if not bindable(info):
            raise OptionError(_unbindable("bind_output", info))
        if target is None:
            if not isinstance(device, str) or not device:
                raise OptionError(
                    f"bind_output: device: expected a name like 'cpu' or 'cuda', got {device!r}"
                )
            self._check_device(device)
            self._binding.bind_output(name, device, device_id)
        elif isinstance(target, self._ort_value):
            self._binding.bind_ortvalue_output(name, target)
        elif isinstance(target, np.ndarray):
            if info.dtype is None or target.dtype != info.dtype:
                raise OptionError(
                    f"bind_output: output {name!r} is {info.type}, got an array of dtype {target.dtype}"
                )
            if not (target.flags.c_contiguous and target.flags.writeable):
                raise OptionError(
                    f"bind_output: output {name!r}: expected a writeable C-contiguous array"
                )
            self._binding.bind_ortvalue_output(name, self._ort_value.ortvalue_from_numpy(target))
            self._keep["->" + name] = target
        else:
            raise OptionTypeError(
                f"bind_output: target: expected a numpy array, an OrtValue or None, got {type(target).__name__}"
            )
        if target is None:
            self._allocated[name] = (device, device_id)
            if name in self._accumulating:
                self._rebound[name] = (device, device_id)
            self._unwritten.add(name)
        else:
            self._allocated.pop(name, None)
            self._rebound.pop(name, None)
            self._unwritten.discard(name)
        if name not in self._bound_outputs:
            self._bound_outputs.append(name)
        return self

    def _check_device(self, device: str) -> None:
        """A device no provider of this session runs on would fail only at run time: refuse it now."""
        wanted = device.lower()
        if wanted == "cpu":
            return
        from ..plugin_host.first_party import io_device_providers  # deferred: only a device binding

        owners = io_device_providers(wanted)  # the kinds whose ortplug.json names this device
        if not any(provider in owners for provider in self._providers):
            served = ", ".join(self._providers)
            raise OptionError(
                f"bind_output: device {device!r} is not a device of this session (its providers: "
                f"{served}); bind to 'cpu', or build the backend with a provider for {device!r}"
            )

    def run(self) -> None:
        """Run the model on the bound inputs into the bound outputs."""
        for source, bound in self._copies.values():
            np.copyto(bound, source)
        for name, (device, device_id) in self._rebound.items():  # else items join the last run's
            self._binding.bind_output(name, device, device_id)
            self._unwritten.add(name)
        try:
            self._run_with_iobinding(self._binding, self._run_options)
            self._unwritten.clear()
        except _BackendClosedError:
            raise
        except Exception as exc:
            if self._run_options.terminate:  # ORT says so with a plain Fail: read the flag
                raise RunTerminatedError(
                    "the bound run was stopped by OnnxBackend.terminate(); call "
                    "reset_terminate() to run again"
                ) from exc
            if "pre-allocated output" in str(exc):
                raise RuntimeError(
                    "the bound run failed: an output array bound with bind_output(name, array) "
                    "has another shape than this run computes; bind an array of the new shape, "
                    f"or bind_output(name) to let ONNX Runtime allocate it ({exc})"
                ) from exc
            raise RuntimeError(f"the bound run failed: {type(exc).__name__}: {exc}") from exc

    def _check_written(self, method: str) -> None:
        """ONNX Runtime crashes reading an output it has not allocated yet: refuse instead."""
        if self._unwritten:
            names = ", ".join(repr(n) for n in self._bound_outputs if n in self._unwritten)
            raise RuntimeError(
                f"{method}: output(s) {names} are allocated by the next run(); call run() first"
            )

    def outputs(self) -> dict[str, np.ndarray]:
        """The bound outputs as numpy arrays, copied to the CPU when they live on a device."""
        self._check_written("outputs()")
        return dict(zip(self._bound_outputs, self._binding.copy_outputs_to_cpu()))

    def ort_values(self) -> dict[str, Any]:
        """The bound outputs as ``OrtValue`` objects, where they are (no copy)."""
        self._check_written("ort_values()")
        return dict(zip(self._bound_outputs, self._binding.get_outputs()))

    def synchronize_inputs(self) -> None:
        """Wait until device copies of the inputs are done."""
        self._binding.synchronize_inputs()

    def synchronize_outputs(self) -> None:
        """Wait until the outputs are written."""
        self._binding.synchronize_outputs()

    def clear_inputs(self) -> None:
        """Forget every bound input."""
        self._binding.clear_binding_inputs()
        self._keep = {k: v for k, v in self._keep.items() if k.startswith("->")}
        self._copies.clear()
        self._shapes.clear()

    def clear_outputs(self) -> None:
        """Forget every bound output."""
        self._binding.clear_binding_outputs()
        self._bound_outputs.clear()
        self._allocated.clear()
        self._rebound.clear()
        self._unwritten.clear()
        self._keep = {k: v for k, v in self._keep.items() if not k.startswith("->")}

    @property
    def run_options(self) -> Any:
        """The ONNX Runtime run options its runs use (``None`` once released)."""
        return self._run_options

    def release(self) -> None:
        """Release the IO binding, run options and bound arrays; later runs raise (the backend
        calls it when it closes or rebuilds its session)."""
        self._binding = _ClosedIoBinding()
        self._run_with_iobinding = _closed
        self._run_options = None
        self._keep = {}
        self._copies = {}
