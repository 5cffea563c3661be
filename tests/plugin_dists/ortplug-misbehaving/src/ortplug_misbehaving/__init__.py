"""Test plugins whose provider misbehaves the way real accelerators do, on real ONNX Runtime sessions.

Register one on a plugin host, as a third party's plugin would be::

    host = make_plugin_host(("bad", MisbehavingPlugin("off")))
    OnnxBackend.from_checkpoint(checkpoint, plugins=host)  # verification rejects it

Its provider is ONNX Runtime's ``AzureExecutionProvider`` (in every ONNX Runtime
wheel; it registers and realizes, and takes no node of an ordinary graph), so the
session is ONNX Runtime's own; for every misbehaviour but ``"no_node"`` the
session is wrapped (through the kind's public ``ProviderType.session_wrapper``, which
only this plugin's type sets: a build without it never meets this module) so that it
says the provider took the graph's nodes and then misbehaves:

* ``"off"`` — float outputs shifted by a tenth of their range (bf16 on AMX, fp16 overflow);
* ``"stale"`` — an IO binding run again returns the first run's outputs (OpenVINO with
  inputs updated in place);
* ``"raises"`` — every run raises an ONNX Runtime error on inputs the CPU accepts
  (OpenVINO on a scikit-learn graph it half took);
* ``"no_node"`` — the real Azure provider: realized, but the CPU provider runs every node;
* ``"slow"`` — correct, but each run waits ``delay_s`` first (WebGPU on a software adapter);
* ``"big_batch"`` — correct, but a run with a batch of 64 rows or more raises (a provider that
  passed verification and fails on real batches).
* ``"magnitude"`` — correct, but a plain run fed any input value beyond ``magnitude`` (default 4)
  in absolute value returns shifted float outputs (a kernel that branches on its input's range;
  right on small generated inputs, wrong on real traffic).

Wrong only where a single generated input at batch 1 does not look (verification must find each):

* ``"inf_sign"`` — +inf comes back as -inf and -inf as NaN;
* ``"nan_for_inf"`` — every infinity comes back as NaN;
* ``"later_rows"`` — float outputs are shifted in every row after the first;
* ``"after_runs"`` — float outputs are shifted from the ninth run of a session on;
* ``"output_subset"`` — float outputs are shifted when only some outputs are asked for;
* ``"async_only"`` — float outputs are shifted on the ``run_async`` path;
* ``"rare_ids"`` — float outputs are shifted when an integer input holds an id of 10 or more;
* ``"inverted_scores"`` — every float value from 0 to 1 (a score beside large coordinates)
  comes back as ``1 - value``;
* ``"float64"`` — float32 outputs come back as float64 (same values);
* ``"long_sequence"`` — float outputs are shifted when an input has a dimension past the first
  longer than 16 (the generated sequence length).
* ``"concurrent"`` — float outputs are shifted when the run overlapped another run of a session
  the provider serves (each run stays in flight ``delay_s``; a provider that is not thread-safe).
* ``"crossed"`` — a run that overlapped an earlier one of the same shapes returns that run's
  outputs (a shared device buffer; each run stays in flight ``delay_s``);
* ``"reused_buffer"`` — a plain run returns one persistent array per output, overwritten by the
  next run of the same shape (a caller that keeps a result sees it change), from the run after
  ``reuse_after`` runs of the session on (0: from the first);
* ``"slow_first"`` — the first run waits ``delay_s``, later ones not; float outputs are shifted
  in every row after the first (a compile that made verification skip its probes);
* ``"mid_batches"`` — float outputs are shifted when the batch has 3 to 7 rows (what a
  throughput server stacks from one-row requests);
* ``"rows_from_8"`` — float outputs are shifted in rows 8 and beyond;
* ``"first_alone"`` — float outputs are shifted when the first output alone is asked for;
* ``"every_runs"`` — float outputs are shifted on every ``runs``-th plain run of a session
  (``"after_runs"`` takes ``runs`` too: shifted after that many);
* ``"mid_magnitude"`` — float outputs are shifted when an input's largest absolute value is
  between ``magnitude`` and 2.5 times it (beyond both x1 and x8 of a unit-scale input).

The provider's type declares concurrent runs safe only with ``concurrent_runs=True`` (by
default ortplug serialises its runs); ``MisbehavingPlugin.most_in_flight`` is the most runs of
its sessions that were ever in flight at once.

Only one misbehaving plugin fits on a host at a time (they share the provider name).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
from ortplug.plugins import ProviderOffer, ProviderType, hookimpl

__all__ = ["MISBEHAVIOURS", "MisbehavingPlugin", "MisbehavingProvider"]

#: What a misbehaving provider can do wrong.
MISBEHAVIOURS = (
    "off", "stale", "raises", "no_node", "slow", "big_batch", "magnitude", "inf_sign",
    "nan_for_inf", "later_rows", "after_runs", "output_subset", "async_only", "rare_ids",
    "inverted_scores", "float64", "long_sequence", "concurrent", "crossed", "reused_buffer",
    "slow_first", "mid_batches", "rows_from_8", "first_alone", "every_runs", "mid_magnitude",
)  # fmt: skip
_BIG_BATCH = 64  # beyond the batches verification runs (verification.probes.BATCH_SIZES)
_MAGNITUDE = 4.0
_ORT_NAME = "AzureExecutionProvider"
#: What ``"raises"`` raises: OpenVINO's words for a graph it half took.
_RUN_ERROR = (
    "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running "
    "OpenVINO-EP-subgraph_1 node. Can't set the input tensor with index: 0 (misbehaving test provider)"
)


class _InFlight:
    """Runs of the sessions one provider config serves: how many are in flight, the most ever at
    once, and how many started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = self.most = self.started = 0

    def enter(self) -> tuple[bool, int]:
        """A run starts: whether another is in flight, and its start number."""
        with self._lock:
            self.now += 1
            self.started += 1
            self.most = max(self.most, self.now)
            return self.now > 1, self.started

    def leave(self, started: int) -> bool:
        """The run that started as number ``started`` ends: whether another started meanwhile."""
        with self._lock:
            self.now -= 1
            return self.started != started


@attrs.frozen
class MisbehavingProvider:
    """The provider config of :class:`MisbehavingPlugin` (kind ``misbehaving``)."""

    kind: ClassVar[str] = "misbehaving"
    misbehaviour: str = attrs.field(default="off", validator=attrs.validators.in_(MISBEHAVIOURS))
    delay_s: float = 0.02
    magnitude: float = _MAGNITUDE
    in_flight: _InFlight = attrs.field(factory=_InFlight, eq=False, repr=False)
    runs: int = 8
    reuse_after: int = 0

    def to_ort(self) -> tuple[str, dict[str, str]]:
        # The Azure provider takes any option: the misbehaviour keys verdicts apart.
        options = {"misbehaviour": self.misbehaviour}
        if self.misbehaviour in ("magnitude", "mid_magnitude"):
            options["magnitude"] = repr(self.magnitude)
        if self.misbehaviour in ("after_runs", "every_runs") and self.runs != _QUIET_RUNS:
            options["runs"] = str(self.runs)
        if self.reuse_after:
            options["reuse_after"] = str(self.reuse_after)
        return _ORT_NAME, options

    def serve(self, session: Any) -> Any:
        """The real session as this provider serves it (its type's ``session_wrapper``)."""
        if self.misbehaviour == "no_node":
            return session
        return _Misbehaving(
            session,
            self.misbehaviour,
            self.delay_s,
            self.magnitude,
            self.in_flight,
            self.runs if self.misbehaviour != "reused_buffer" else self.reuse_after,
        )


def _served(session: Any, config: MisbehavingProvider) -> Any:
    """The ``session_wrapper`` of the misbehaving kind: the config serves the session."""
    return config.serve(session)


class MisbehavingPlugin:
    """Offers the ``misbehaving`` provider above the CPU provider, for every model, on every host."""

    def __init__(
        self,
        misbehaviour: str,
        *,
        preference: int = 95,
        delay_s: float = 0.02,
        magnitude: float = _MAGNITUDE,
        concurrent_runs: bool = False,
        runs: int = 8,
        reuse_after: int = 0,
    ) -> None:
        self.config = MisbehavingProvider(
            misbehaviour, delay_s, magnitude, runs=runs, reuse_after=reuse_after
        )
        self.preference = preference
        self.concurrent_runs = concurrent_runs

    @property
    def most_in_flight(self) -> int:
        """The most runs of sessions built from :attr:`config` ever in flight at once."""
        return self.config.in_flight.most

    @hookimpl
    def ortplug_provider_types(self) -> Iterator[ProviderType]:
        yield ProviderType(
            "misbehaving",
            _ORT_NAME,
            MisbehavingProvider,
            concurrent_runs=self.concurrent_runs,
            session_wrapper=_served,
        )

    @hookimpl
    def ortplug_offer_providers(self) -> Iterator[ProviderOffer]:
        reason = f"a test accelerator that misbehaves ({self.config.misbehaviour})"
        yield ProviderOffer(self.config, preference=self.preference, reason=reason)


def _shifted(values: Sequence[Any]) -> list[Any]:
    """Float outputs moved by a tenth of their range (at least 0.1): far beyond any tolerance."""
    shifted = []
    for value in values:
        if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
            span = float(np.max(np.abs(value))) or 1.0
            shifted.append(value + np.asarray(max(span, 1.0) * 0.1, value.dtype))
        else:
            shifted.append(value)
    return shifted


#: Runs of a session before ``"after_runs"`` starts shifting its outputs.
_QUIET_RUNS = 8
#: The generated sequence length, past which ``"long_sequence"`` shifts.
_GENERATED_LENGTH = 16
#: Ids below this are the ones generated inputs hold (0..9); ``"rare_ids"`` shifts beyond.
_COMMON_IDS = 10


def _floats(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size > 0


def _infinities(values: Sequence[Any], positive: float, negative: float) -> list[Any]:
    changed = []
    for value in values:
        if _floats(value):
            raised = np.where(np.isposinf(value), positive, value)
            changed.append(np.where(np.isneginf(value), negative, raised).astype(value.dtype))
        else:
            changed.append(value)
    return changed


def _inverted(values: Sequence[Any]) -> list[Any]:
    return [
        np.where((v >= 0) & (v <= 1), 1 - v, v).astype(v.dtype) if _floats(v) else v for v in values
    ]


def _widened(values: Sequence[Any]) -> list[Any]:
    return [v.astype(np.float64) if _floats(v) and v.dtype == np.float32 else v for v in values]


#: Misbehaviours that change every run's outputs the same way.
_ALTERED: dict[str, Callable[[Sequence[Any]], list[Any]]] = {
    "inf_sign": lambda values: _infinities(values, -np.inf, np.nan),
    "nan_for_inf": lambda values: _infinities(values, np.nan, np.nan),
    "inverted_scores": _inverted,
    "float64": _widened,
}


def _later_rows_shifted(value: Any) -> Any:
    if not (_floats(value) and value.ndim and value.shape[0] > 1):
        return value
    shifted = value.copy()
    shifted[1:] = _shifted([value[1:]])[0]
    return shifted


def _rows_shifted(value: Any, first: int) -> Any:
    if not (_floats(value) and value.ndim and value.shape[0] > first):
        return value
    shifted = value.copy()
    shifted[first:] = _shifted([value[first:]])[0]
    return shifted


def _within(feed: Any, magnitude: float) -> bool:
    """Whether the largest absolute value of ``feed``'s float inputs is between ``magnitude``
    and 2.5 times it."""
    arrays = [v for v in feed.values() if _floats(v)]
    largest = max((float(np.max(np.abs(v))) for v in arrays), default=0.0)
    return magnitude < largest < 2.5 * magnitude


def _ids_beyond(value: Any) -> bool:
    array = np.asarray(value)
    return array.dtype.kind in "iu" and array.size > 0 and int(array.max()) >= _COMMON_IDS


def _long(value: Any) -> bool:
    return any(size > _GENERATED_LENGTH for size in np.shape(value)[1:])


def _beyond(feed: Any, magnitude: float) -> bool:
    """Whether a numeric input of ``feed`` holds a value beyond ``magnitude`` in absolute value."""
    arrays = [v for v in (feed.values() if isinstance(feed, dict) else ()) if _numeric(v)]
    return any(float(np.max(np.abs(v))) > magnitude for v in arrays)


def _numeric(value: object) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in "iuf" and value.size > 0


@attrs.frozen
class _Subgraph:
    """ONNX Runtime's assignment record, with the provider this test provider claims."""

    ep_name: str
    nodes: tuple[Any, ...]

    def get_nodes(self) -> tuple[Any, ...]:
        return self.nodes


class _Binding:
    """An IO binding whose second and later runs leave the first run's outputs (``"stale"``)."""

    def __init__(self, binding: Any, misbehaviour: str) -> None:
        self._binding = binding
        self._misbehaviour = misbehaviour
        self.runs = 0
        self.overlapped = False  # whether its last run overlapped another

    def __getattr__(self, name: str) -> Any:
        return getattr(self._binding, name)

    def copy_outputs_to_cpu(self) -> list[Any]:
        outputs = list(self._binding.copy_outputs_to_cpu())
        mode = self._misbehaviour
        wrong = mode == "off" or (mode == "concurrent" and self.overlapped)
        return _shifted(outputs) if wrong else outputs


class _Misbehaving:
    """A real ONNX Runtime session, served the way the misbehaviour says."""

    def __init__(
        self,
        session: Any,
        misbehaviour: str,
        delay_s: float,
        magnitude: float = _MAGNITUDE,
        in_flight: _InFlight | None = None,
        runs: int = _QUIET_RUNS,
    ) -> None:
        self._session = session
        self._misbehaviour = misbehaviour
        self._delay_s = delay_s
        self._magnitude = magnitude
        self._quiet = runs
        self._runs = 0
        self._in_flight = _InFlight() if in_flight is None else in_flight
        self._buffers: dict[str, np.ndarray] = {}  # "reused_buffer": one array per output
        #: "crossed": the last runs as (start number, end number, outputs), and runs ended
        self._finished: list[tuple[int, int, list[Any]]] = []
        self._ended = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def get_provider_graph_assignment_info(self) -> list[_Subgraph]:
        subgraphs = self._session.get_provider_graph_assignment_info()
        return [_Subgraph(_ORT_NAME, tuple(s.get_nodes())) for s in subgraphs]

    def _before_run(self, feed: Any = None) -> None:
        if self._misbehaviour == "raises":
            raise RuntimeError(_RUN_ERROR)
        if (
            self._misbehaviour == "big_batch"
            and isinstance(feed, dict)
            and any(np.ndim(v) and np.shape(v)[0] >= _BIG_BATCH for v in feed.values())
        ):
            raise RuntimeError(_RUN_ERROR)

    def _enter(self) -> tuple[bool, int]:
        """A run starts (``"slow"``, ``"concurrent"``, ``"crossed"``: and stays in flight
        ``delay_s`` first; ``"slow_first"``: its first run)."""
        entered = self._in_flight.enter()
        if self._misbehaviour in ("slow", "concurrent", "crossed") or (
            self._misbehaviour == "slow_first" and entered[1] == 1
        ):
            time.sleep(self._delay_s)
        return entered

    def _leave(self, entered: tuple[bool, int]) -> bool:
        """The run ends: whether it overlapped another."""
        overlapped, number = entered
        return self._in_flight.leave(number) or overlapped

    def run(self, output_names: Any, input_feed: Any, run_options: Any = None) -> list[Any]:
        self._before_run(input_feed)
        seen = self._ended
        entered = self._enter()
        try:
            outputs = self._session.run(output_names, input_feed, run_options)
        finally:
            overlapped = self._leave(entered)
        self._runs += 1
        served = self._served(
            list(outputs), output_names, input_feed, asynchronous=False, overlapped=overlapped
        )
        if self._misbehaviour == "crossed":
            return self._crossed(entered, seen, served)
        if self._misbehaviour == "reused_buffer" and self._runs > self._quiet:
            return self._reused(output_names, served)
        return served

    def _crossed(self, entered: tuple[bool, int], seen: int, outputs: list[Any]) -> list[Any]:
        """The outputs of a run that was in flight when this one started and ended after it did
        (``seen``: runs ended before it started), where one did and its shapes match."""
        overlapped, number = entered
        shapes = [np.shape(value) for value in outputs]
        with self._lock:
            self._ended += 1
            earlier = next(
                (
                    done
                    for started, ended, done in reversed(self._finished)
                    if started < number and ended > seen and [np.shape(v) for v in done] == shapes
                ),
                None,
            )
            self._finished = [*self._finished[-7:], (number, self._ended, outputs)]
        if overlapped and earlier is not None:
            return [np.array(value, copy=True) for value in earlier]
        return outputs

    def _reused(self, names: Any, outputs: list[Any]) -> list[Any]:
        """Each output copied into this session's one array for it (reallocated on a new shape)."""
        every = [o.name for o in self._session.get_outputs()]
        served = []
        for name, value in zip(every if names is None else names, outputs):
            if isinstance(value, np.ndarray):
                buffer = self._buffers.get(name)
                if buffer is None or buffer.shape != value.shape or buffer.dtype != value.dtype:
                    buffer = self._buffers[name] = np.empty_like(value)
                np.copyto(buffer, value)
                served.append(buffer)
            else:
                served.append(value)
        return served

    def _served(
        self, outputs: list[Any], names: Any, feed: Any, *, asynchronous: bool, overlapped: bool
    ) -> list[Any]:
        """The outputs as this misbehaviour serves them."""
        mode = self._misbehaviour
        if mode in _ALTERED:
            return _ALTERED[mode](outputs)
        every = [o.name for o in self._session.get_outputs()]
        feed = feed if isinstance(feed, dict) else {}
        rows = next((np.shape(v)[0] for v in feed.values() if np.ndim(v)), 0)
        wrong = (
            mode == "off"
            or (mode == "after_runs" and self._runs > self._quiet)
            or (mode == "every_runs" and not asynchronous and self._runs % self._quiet == 0)
            or (mode == "mid_batches" and 3 <= rows <= 7)
            or (mode == "first_alone" and names is not None and list(names) == every[:1])
            or (mode == "mid_magnitude" and _within(feed, self._magnitude))
            or (mode == "output_subset" and names is not None and list(names) != every)
            or (mode == "async_only" and asynchronous)
            or (mode == "magnitude" and not asynchronous and _beyond(feed, self._magnitude))
            or (mode == "rare_ids" and any(_ids_beyond(value) for value in feed.values()))
            or (mode == "long_sequence" and any(_long(value) for value in feed.values()))
            or (mode == "concurrent" and overlapped)
        )
        if mode in ("later_rows", "slow_first"):
            return [_later_rows_shifted(value) for value in outputs]
        if mode == "rows_from_8":
            return [_rows_shifted(value, 8) for value in outputs]
        return _shifted(outputs) if wrong else outputs

    def io_binding(self) -> _Binding:
        return _Binding(self._session.io_binding(), self._misbehaviour)

    def run_with_iobinding(self, binding: Any, run_options: Any = None) -> None:
        self._before_run()
        wrapper = binding if isinstance(binding, _Binding) else None
        if wrapper is not None:
            wrapper.runs += 1
            if self._misbehaviour == "stale" and wrapper.runs > 1:
                return  # the bound outputs keep what the first run wrote
            binding = wrapper._binding
        entered = self._enter()
        try:
            self._session.run_with_iobinding(binding, run_options)
        finally:
            overlapped = self._leave(entered)
        if wrapper is not None:
            wrapper.overlapped = overlapped

    def run_async(
        self,
        output_names: Any,
        input_feed: Any,
        callback: Any,
        user_data: Any,
        run_options: Any = None,
    ) -> Any:
        self._before_run()
        entered = self._enter()

        def served(results: Any, data: Any, error: str) -> None:
            overlapped = self._leave(entered)
            if not error:
                results = self._served(
                    list(results),
                    output_names,
                    input_feed,
                    asynchronous=True,
                    overlapped=overlapped,
                )
            callback(results, data, error)

        try:
            return self._session.run_async(output_names, input_feed, served, user_data, run_options)
        except BaseException:
            self._leave(entered)
            raise
