"""Batch inference on Ray Data with one ``OnnxBackend`` per actor (``pip install 'ortplug[ray]'``).

Sessions cannot be pickled, so what travels to the workers is a
:class:`BackendConfig`: the checkpoint as a :class:`PortableCheckpoint` (the
weights, the metadata read on the driver, in-memory initializers and external
data), the provider chain or policy, the session options and the column
mapping. Each actor builds its backend once, runs every batch it is given
through it (in runs of the model's batch when that is static), and closes it
when the actor ends. Actors that will run a GPU provider ask Ray for a GPU; CPU
actors size their intra-op threads to the CPUs Ray gave them, so actors
sharing a node do not oversubscribe it.

With ``performance_hint="throughput"`` each actor serves with the throughput hint, its
streams measured within the CPUs Ray gave it: a batch is cut into one part per stream,
queued at once, so the streams run its parts side by side, and Ray may hand an actor as many
batches at once as it may have streams (Ray >= 2.47 runs them concurrently).

    import ray
    from ortplug.integrations.ray import predict

    ds = ray.data.read_parquet("s3://bucket/features/")
    scored = predict(ds, LocalCheckpoint("model.onnx"), input_columns={"features": "x"})
    scored.write_parquet("s3://bucket/scores/")
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import math
import os
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import attrs
import numpy as np

from ..backend import HINTS, OnnxBackend, ServingConfig
from ..checkpoint import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    LocalCheckpoint,
    ResolvedCheckpoint,
    select_variant,
)
from ..errors import MissingFileError, OptionError, OptionTypeError, OrtplugError
from ..host.capabilities import HostCapabilities
from ..host.install_command import pip_install
from ..plugin_host.manager import get_plugin_host
from ..providers.run_options import RunOptionsConfig
from ..providers.session_options import SessionOptionsConfig
from ..selection import DefaultProviderPolicy, SelectionRequest, select_providers
from ..session.introspection import ValueInfo

__all__ = [
    "BackendConfig",
    "BatchError",
    "CheckpointLike",
    "OnnxPredictor",
    "PortableCheckpoint",
    "RayNotInstalledError",
    "actor_resources",
    "default_batch_size",
    "predict",
    "require_ray",
    "worker_error",
]

#: Model input per Ray batch: enough that Ray's cost per batch (milliseconds) is small beside
#: the runs, bounded in rows for tiny inputs; a GPU gets more so each run fills it.
_BATCH_BYTES = {False: 16 << 20, True: 128 << 20}
_BATCH_ROWS = {False: 1 << 16, True: 1 << 18}


class RayNotInstalledError(OrtplugError, ImportError):
    """Ray Data is not importable; the message names the command that installs it."""


class BatchError(OrtplugError, RuntimeError):
    """One batch failed; the one-line message names the batch, the actor, the rows and the cause.

    ``ids`` holds the failing rows' values of the id column, when one was given.
    On the driver Ray raises its own exception around this one; :func:`worker_error`
    gets it back.
    """

    def __init__(self, message: str, ids: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.ids = tuple(ids)

    def __str__(self) -> str:
        return self.message  # one line, though Ray appends its retry advice to ``args``


def worker_error(error: BaseException) -> OrtplugError | None:
    """The ortplug error a worker raised (a ``BatchError`` first), out of what Ray raised here.

    Ray keeps a batch's error in its ``cause`` when
    ``DataContext.raise_original_map_exception`` is set (``ortplug batch --ray``
    sets it); otherwise Ray Data wraps it in a ``UserCodeException`` that keeps
    only its traceback text.
    """
    found: list[OrtplugError] = []
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        cause = getattr(current, "cause", None)  # a RayTaskError: the worker's own exception
        if isinstance(cause, BaseException):
            pending.append(cause)
        elif isinstance(current, OrtplugError):  # not Ray's copy that subclasses it
            found.append(current)
        pending += [current.__context__, current.__cause__]
    batch = [e for e in found if isinstance(e, BatchError)]
    return (batch or found or [None])[0]


def require_ray() -> Any:
    """The ``ray`` module with Ray Data, or :class:`RayNotInstalledError` naming the install command."""
    try:
        import ray
        import ray.data  # ray without the [data] extra lacks its dependencies
    except ImportError as exc:
        raise RayNotInstalledError(
            f"Ray Data is not installed (import failed: {exc}); install it with: "
            f"{pip_install('ortplug[ray]')}"
        ) from exc
    return ray


def _plain(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value or {})  # plain dicts: the config must pickle with the standard pickle too


def _options_dict(value: SessionOptionsConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    return value.to_dict() if isinstance(value, SessionOptionsConfig) else _plain(value)


@attrs.frozen
class PortableCheckpoint:
    """A checkpoint in a form that pickles, resolved again on each worker.

    ``source`` is a path every worker can read or the model's bytes;
    ``metadata`` is the metadata the driver resolved (a separate metadata file
    and ``extra`` included) as a dict; ``initializers`` and ``external_data``
    are the in-memory arrays and files of an ``InMemoryCheckpoint``; ``variant``
    the precision variant of these weights that serves (``None``: these weights).
    """

    source: str | bytes = attrs.field(repr=lambda s: s if isinstance(s, str) else "<model bytes>")
    metadata: dict[str, Any] = attrs.field(converter=_plain, hash=False)
    initializers: dict[str, np.ndarray] = attrs.field(
        factory=dict, converter=_plain, eq=False, repr=False
    )
    external_data: dict[str, bytes] = attrs.field(
        factory=dict, converter=_plain, eq=False, repr=False
    )
    #: The precision variant of these (reference) weights that serves, by name: chosen again on
    #: the worker, so its outputs are still checked against the reference's.
    variant: str | None = None

    @classmethod
    def of(cls, checkpoint: CheckpointLike) -> PortableCheckpoint:
        """Resolve ``checkpoint`` here (reading its metadata file) into what travels to workers.

        A variant travels as its reference and its name (alone, it would be its own reference:
        nothing would check it).
        """
        if isinstance(checkpoint, PortableCheckpoint):
            return checkpoint
        resolved = _resolved_here(checkpoint)
        if resolved.variant is not None and resolved.reference is not None:
            return attrs.evolve(cls.of(resolved.reference), variant=resolved.variant)
        return cls(
            source=str(resolved.weights_path) if resolved.model_bytes is None else resolved.source,
            metadata=resolved.metadata.to_dict(),
            initializers=dict(resolved.initializers),
            external_data=dict(resolved.external_data),
        )

    def resolve(self) -> ResolvedCheckpoint:
        """The checkpoint on this worker, with the metadata the driver resolved."""
        reference = self._reference()
        return reference if self.variant is None else select_variant(reference, self.variant)

    def _reference(self) -> ResolvedCheckpoint:
        metadata = CheckpointMetadata.from_dict(self.metadata)
        if isinstance(self.source, bytes):
            return InMemoryCheckpoint(
                self.source,
                metadata,
                initializers=self.initializers,
                external_data=self.external_data,
            ).resolve()
        if not Path(self.source).is_file():
            raise MissingFileError(
                f"ONNX model not found on node {_placement()[0] or 'here'}: {self.source}; "
                "expected a path every Ray worker can read (or pass InMemoryCheckpoint(bytes))"
            )
        return ResolvedCheckpoint(
            Path(self.source),
            metadata,
            initializers=self.initializers,
            external_data=self.external_data,
        )


#: What ``predict`` and ``BackendConfig`` accept as the model.
CheckpointLike = Union[
    LocalCheckpoint,
    ResolvedCheckpoint,
    InMemoryCheckpoint,
    PortableCheckpoint,
    str,
    "os.PathLike[str]",
    bytes,
]


def _resolved_here(checkpoint: object) -> ResolvedCheckpoint:
    if isinstance(checkpoint, ResolvedCheckpoint):
        return checkpoint
    if isinstance(checkpoint, (LocalCheckpoint, InMemoryCheckpoint)):
        return checkpoint.resolve()
    if isinstance(checkpoint, bytes):
        return InMemoryCheckpoint(checkpoint).resolve()
    if isinstance(checkpoint, (str, os.PathLike)):
        return LocalCheckpoint(Path(checkpoint)).resolve()
    raise OptionTypeError(
        "checkpoint: expected a LocalCheckpoint, ResolvedCheckpoint, InMemoryCheckpoint, "
        f"a path or the model's bytes, got {type(checkpoint).__name__}"
    )


def _columns(names: Iterable[str] | None) -> tuple[str, ...] | None:
    """``keep_columns`` as a tuple; a lone string would become its letters, so it is refused."""
    if isinstance(names, str):
        raise OptionTypeError(
            f"keep_columns: expected a list of column names, got the string {names!r} "
            f"(write [{names!r}])"
        )
    return None if names is None else tuple(names)


def _one_column_per_input(_: object, __: attrs.Attribute[Any], columns: dict[str, str]) -> None:
    """``input_columns`` maps each model input from one column (two would feed it twice)."""
    seen: dict[str, str] = {}
    for column, name in columns.items():
        if name in seen:
            raise OptionError(
                f"input_columns: expected one column per model input, got {seen[name]!r} and "
                f"{column!r} both for input {name!r}"
            )
        seen[name] = column


def _hint_choice(_: object, __: attrs.Attribute[Any], hint: object) -> None:
    if hint not in HINTS:
        raise OptionError(f"performance_hint: expected one of {', '.join(HINTS)}, got {hint!r}")


def _portable(checkpoint: CheckpointLike) -> PortableCheckpoint:
    """:meth:`PortableCheckpoint.of` as a function (mypy's attrs plugin takes no classmethod)."""
    return PortableCheckpoint.of(checkpoint)


@attrs.frozen
class BackendConfig:
    """Everything an actor needs to build its backend and map columns: picklable, unlike a session.

    ``model`` takes any :data:`CheckpointLike`, resolved on the driver. ``policy``
    (a picklable provider policy) chooses the chain on each worker when
    ``providers`` is ``None``. ``input_columns`` maps batch columns to model
    inputs (default: same names); ``output_columns`` maps model outputs to the
    columns written (default: every output, same names). ``keep_columns`` are
    the batch columns copied to the output (default: all; ``["id"]`` spares
    copying large inputs back into the object store). ``id_column`` names rows
    in errors; ``chain_column``, when set, gets each row's actor report.
    ``performance_hint`` is the backend's (``"throughput"``: streams measured within the CPUs
    Ray gave the actor, each batch's parts run side by side).
    """

    model: PortableCheckpoint = attrs.field(converter=_portable)
    providers: tuple[Any, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(tuple)
    )
    session_options: dict[str, Any] = attrs.field(factory=dict, converter=_options_dict, hash=False)
    policy: Any = attrs.field(default=None, eq=False)
    input_columns: dict[str, str] = attrs.field(
        factory=dict, converter=_plain, validator=_one_column_per_input, hash=False
    )
    output_columns: dict[str, str] = attrs.field(factory=dict, converter=_plain, hash=False)
    keep_columns: tuple[str, ...] | None = attrs.field(default=None, converter=_columns)
    id_column: str | None = None
    chain_column: str | None = None
    performance_hint: str = attrs.field(default="latency", validator=_hint_choice)

    def checkpoint(self) -> ResolvedCheckpoint:
        """The checkpoint, resolved where this runs (on a worker: from the portable form)."""
        return self.model.resolve()

    def build(self, threads: int | None = None) -> OnnxBackend:
        """The backend, with ``threads`` intra-op threads unless the options set their own; under
        a throughput hint its streams share ``threads`` CPUs (the CPUs Ray gave the actor)."""
        options = SessionOptionsConfig.from_dict(self.session_options)
        if threads is not None and options.intra_op_num_threads is None:
            options = options.evolve(intra_op_num_threads=threads)
        providers = list(self.providers) if self.providers is not None else None
        hint = self.performance_hint
        serving = ServingConfig(cpus=threads) if hint != "latency" and threads else None
        return OnnxBackend.from_checkpoint(
            self.checkpoint(),
            providers,
            options,
            policy=self.policy,
            performance_hint=hint,
            serving=serving,
        )


def _chain_names(config: BackendConfig, host: HostCapabilities | None) -> list[str]:
    """ONNX Runtime names of the chain an actor will ask for: explicit, or the policy's here."""
    plugins = get_plugin_host()
    if config.providers is not None:
        registry = plugins.provider_registry()
        return [registry.parse(p).to_ort()[0] for p in config.providers]
    checkpoint = config.checkpoint()
    request = SelectionRequest(
        checkpoint.metadata, host or plugins.host_capabilities(), plugins, checkpoint
    )
    selection = select_providers(config.policy or DefaultProviderPolicy(plugins), request)
    return [c.to_ort()[0] for c in selection.chain]


def actor_resources(
    config: BackendConfig, host: HostCapabilities | None = None, *, num_cpus: int = 1
) -> dict[str, float]:
    """Ray resources for one actor: a GPU when the chain (explicit or the policy's) has a GPU provider."""
    return _resources(_chain_names(config, host), num_cpus)


def _on_gpu(chain: Sequence[str]) -> bool:
    """Whether a provider of the chain runs on a GPU Ray schedules: its kind's declared device
    class is ``gpu`` (the plugins' ortplug.json says so; no provider is named here)."""
    registry = get_plugin_host().provider_registry()
    for name in chain:
        try:
            if registry.lookup(name).type.device == "gpu":
                return True
        except OptionError:  # a provider no plugin holds here: it reserves nothing
            continue
    return False


def _resources(chain: Sequence[str], num_cpus: int) -> dict[str, float]:
    if _on_gpu(chain):
        return {"num_cpus": 1, "num_gpus": 1}
    return {"num_cpus": num_cpus}


def _static_batch(shapes: Iterable[tuple[int | str | None, ...] | None]) -> int | None:
    """The batch every input fixes as its first dimension, or ``None`` when it is dynamic."""
    firsts = {shape[0] for shape in shapes if shape and isinstance(shape[0], int) and shape[0] > 0}
    return firsts.pop() if len(firsts) == 1 else None


def default_batch_size(config: BackendConfig, *, gpu: bool = False) -> int:
    """Rows per Ray batch for this model: ~16 MiB of input for a CPU, ~128 MiB for a GPU.

    Row sizes count 4 bytes per element of each input's per-row shape (unknown
    dimensions count 1); a static model batch makes it a multiple of that batch.
    """
    shapes = list(config.checkpoint().input_shapes().values())
    elements = sum(
        math.prod(d if isinstance(d, int) and d > 0 else 1 for d in shape[1:])
        for shape in shapes
        if shape
    )
    rows = min(_BATCH_BYTES[gpu] // (4 * max(1, elements)), _BATCH_ROWS[gpu])
    static = _static_batch(shapes)
    if static is not None:
        rows = max(static, rows // static * static)
    return max(1, rows)


def _running_ray() -> Any:
    """The ``ray`` module when this process is part of a running Ray instance, else ``None``.

    A Ray process has imported ``ray``; outside Ray (``ortplug batch`` without ``--ray``) it
    is not imported here (about a second)."""
    ray = sys.modules.get("ray")
    return ray if ray is not None and ray.is_initialized() else None


def _assigned_cpus() -> int | None:
    ray = _running_ray()
    if ray is None:
        return None
    context = ray.get_runtime_context()
    if context.worker.mode != ray.WORKER_MODE:  # the driver: nothing assigned to follow
        return None
    assigned = context.get_assigned_resources()
    cpus = assigned.get("CPU")
    return max(1, int(cpus)) if cpus else None


def _placement() -> tuple[str | None, str | None]:
    """This process's Ray node id and IP, or ``(None, None)`` outside Ray."""
    ray = _running_ray()
    if ray is None:
        return None, None
    node = ray.get_runtime_context().get_node_id()
    return str(node), str(ray.util.get_node_ip_address())


def _dims(shape: Sequence[int | str | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _fits(given: tuple[int, ...], expected: Sequence[int | str | None]) -> bool:
    return len(given) == len(expected) and all(
        not isinstance(e, int) or e == g for g, e in zip(given, expected)
    )


def _row_array(value: Any) -> np.ndarray:
    """One row of an object column (nested arrays or lists) as one array; ``ValueError`` if ragged."""
    if value is None:
        raise ValueError("the value is null")
    array = np.asarray(value)
    if array.dtype == object:
        if array.ndim == 0:
            raise ValueError(f"{value!r} is not a number or an array")
        array = np.stack([_row_array(item) for item in array])
    return array


class _Rows:
    """How one batch's rows are named in errors: by the id column, else by position (counted
    from ``first``: the batch's first row in the whole input, where one process runs it all)."""

    def __init__(self, where: str, ids: np.ndarray | None, first: int = 0) -> None:
        self.where = where
        self.ids = ids
        self.first = first

    def text(self, start: int, stop: int) -> str:
        """``rows 3..7 (ids 103..107)``-like, for rows ``start`` to ``stop - 1`` of the batch."""
        low, high = self.first + start, self.first + stop - 1
        span = f"row {low}" if low == high else f"rows {low}..{high}"
        if self.ids is None:
            return span
        ids = self.ids[start:stop].tolist()
        if len(ids) == 1:
            return f"{span} (id {ids[0]!r})"
        contiguous = all(isinstance(i, int) for i in ids) and ids == list(
            range(ids[0], ids[0] + len(ids))
        )
        shown = (
            f"{ids[0]}..{ids[-1]}"
            if contiguous
            else ", ".join(map(repr, ids[:3])) + (f", … {ids[-1]!r}" if len(ids) > 3 else "")
        )
        return f"{span} (ids {shown})"

    def error(self, start: int, stop: int, reason: str) -> BatchError:
        """A ``BatchError`` for rows ``start`` to ``stop - 1``, carrying their ids."""
        ids = self.ids[start:stop].tolist() if self.ids is not None else ()
        where = f"{self.where}, " if self.where else ""
        return BatchError(f"{where}{self.text(start, stop)}: {reason}", ids)


def _reason(exc: BaseException) -> str:
    """An exception as one line (every problem of an ``InputValidationError``, joined)."""
    problems = getattr(exc, "problems", None)
    text = "; ".join(problems) if problems else str(exc)
    return f"{type(exc).__name__}: " + "; ".join(
        line.strip() for line in text.splitlines() if line.strip()
    )


def _empty(info: ValueInfo) -> np.ndarray:
    """No rows of a tensor, with its declared per-row shape (unknown dimensions as 0)."""
    dims = [d if isinstance(d, int) else 0 for d in (info.shape or (None, None))[1:]]
    return np.empty((0, *dims), info.dtype or object)


def _streams(backend: OnnxBackend) -> int:
    """The streams a backend serves with: 1 under the latency hint."""
    serving = backend.serving
    return 1 if serving is None else serving.streams


class _Parallel:
    """Feeds queued at once on a throughput backend's streams (``run_async``), waited for."""

    def __init__(self, backend: OnnxBackend, outputs: list[str], options: Any) -> None:
        self.backend, self.outputs, self.options = backend, outputs, options

    def run(
        self, feeds: Sequence[Mapping[str, np.ndarray]]
    ) -> list[tuple[Mapping[str, Any] | None, Exception | None]]:
        """Each feed's outputs or error, in order."""
        results: list[tuple[Mapping[str, Any] | None, Exception | None]] = [(None, None)] * len(
            feeds
        )
        left = [len(feeds)]
        lock, done = threading.Lock(), threading.Event()

        def settle(
            index: int, outputs: Mapping[str, Any] | None, error: BaseException | None
        ) -> None:
            failure = None if error is None else _as_exception(error)
            results[index] = (outputs, failure)
            with lock:
                left[0] -= 1
                if not left[0]:
                    done.set()

        for index, feed in enumerate(feeds):
            try:
                self.backend.run_async(
                    dict(feed),
                    functools.partial(settle, index),
                    self.outputs,
                    run_options=self.options,
                )
            except Exception as exc:  # not queued (closed, bad inputs): its part's error
                settle(index, None, exc)
        done.wait()
        return results


def _as_exception(error: BaseException) -> Exception:
    return error if isinstance(error, Exception) else RuntimeError(str(error))


def _padded(rows: np.ndarray, static: int) -> np.ndarray:
    """``rows`` with its last row repeated up to the static batch."""
    buffer = np.empty((static, *rows.shape[1:]), rows.dtype)
    _filled(buffer, rows)
    return buffer


def _filled(buffer: np.ndarray, rows: np.ndarray) -> None:
    """Copy ``rows`` into a static-batch buffer, repeating the last row into what is left."""
    buffer[: len(rows)] = rows
    buffer[len(rows) :] = rows[-1]


def _column_clash(
    config: BackendConfig, output_names: Iterable[str], batch_columns: Iterable[str]
) -> str | None:
    """What would overwrite what in a batch's output (an input column, another output's, the
    chain column), naming both columns; ``None`` when every written column is distinct."""
    outputs = config.output_columns or {name: name for name in output_names}
    kept = batch_columns if config.keep_columns is None else config.keep_columns
    owners = {column: f"input column {column!r}" for column in kept}
    writers = [(f"output {name!r}", column) for name, column in outputs.items()]
    if config.chain_column:
        writers.append(("chain_column", config.chain_column))
    for writer, column in writers:
        if column in owners:
            return (
                f"{writer} would be written as column {column!r} over {owners[column]}: map it "
                "to another name (output_columns= or chain_column=), or leave the input "
                "column out with keep_columns="
            )
        owners[column] = f"the column of {writer}"
    return None


class OnnxPredictor:
    """The callable class for ``Dataset.map_batches``: one backend per actor, batches shaped for it.

    A model with a static batch dimension gets each Ray batch in runs of that
    batch (the last one padded with its last row) through one IO binding; a
    dynamic one gets the batch whole. Object columns (lists per row, as
    pandas and pyarrow write them) are stacked to the input's dtype and shape.
    Under a throughput hint with several streams, a batch is cut into one part per stream
    (runs of the static batch, each padded) queued at once, so the streams run them side by side.
    """

    def __init__(self, config: BackendConfig, run_options: RunOptionsConfig | None = None) -> None:
        self.config = config
        self.run_options = run_options  # every run's (ortplug batch: ONNX Runtime's log kept quiet)
        self.threads = _assigned_cpus()
        self.backend = config.build(self.threads)
        inputs = config.input_columns or {name: name for name in self.backend.input_names}
        self.inputs = dict(inputs)
        outputs = config.output_columns or {name: name for name in self.backend.output_names}
        self.outputs = dict(outputs)
        specs = (*self.backend.inputs, *self.backend.overridable_initializers)
        self.specs = {info.name: info for info in specs if info.name in self.inputs.values()}
        self.static_batch = _static_batch(info.shape for info in self.specs.values())
        #: Streams the backend serves with: a batch is cut into this many parts (1: whole).
        self.streams = _streams(self.backend)
        node, ip = _placement()
        self.where = f"actor pid {os.getpid()}" + (f" on node {node[:8]}" if node else "")
        self.report = json.dumps(
            {
                "node": node,
                "ip": ip,
                "pid": os.getpid(),
                "threads": self.backend.session_options.intra_op_num_threads
                if self.backend.session_options
                else None,
                "providers": list(self.backend.providers),
                "reasons": dict(self.backend.chain_reasons),
                "performance_hint": self.backend.performance_hint,
                "streams": self.streams,
            },
            sort_keys=True,
        )
        self._batches = itertools.count()  # calls may run side by side (a throughput hint)

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Map columns to inputs, run, and return the batch (its kept columns) plus the outputs."""
        index = next(self._batches)
        return self._predict(batch, f"batch {index} ({self.where})", 0)

    def rows_from(self, batch: Mapping[str, np.ndarray], first_row: int) -> dict[str, np.ndarray]:
        """As a call, for one process running a whole input in batches (``ortplug batch``
        without Ray): errors name rows by their place in the input, from ``first_row``."""
        return self._predict(batch, "", first_row)

    def _predict(
        self, batch: Mapping[str, np.ndarray], where: str, first_row: int
    ) -> dict[str, np.ndarray]:
        prefix = f"{where}: " if where else ""
        id_column = self.config.id_column
        keep = self.config.keep_columns
        wanted = [*self.inputs, *([id_column] if id_column else []), *(keep or ())]
        missing = [column for column in wanted if column not in batch]
        if missing:
            raise BatchError(f"{prefix}column(s) {missing} missing; the batch has {sorted(batch)}")
        clash = _column_clash(self.config, self.outputs, batch)
        if clash:
            raise BatchError(f"{prefix}{clash}")
        rows = _Rows(where, np.asarray(batch[id_column]) if id_column else None, first_row)
        count = len(next(iter(batch.values()))) if batch else 0
        feed = {
            name: self._column(column, batch[column], name, rows)
            for column, name in self.inputs.items()
        }
        results = self._run(feed, count, rows)
        out = dict(batch) if keep is None else {column: batch[column] for column in keep}
        for name, column in self.outputs.items():
            value = results[name]
            if np.shape(value)[:1] != (count,):
                raise rows.error(
                    0,
                    count,
                    f"output {name!r} has shape {list(np.shape(value))}; expected {count} rows "
                    f"first, one per input row, to write it as column {column!r}",
                )
            out[column] = value
        if self.config.chain_column:
            out[self.config.chain_column] = np.full(count, self.report)
        return out

    def _column(self, column: str, values: np.ndarray, name: str, rows: _Rows) -> np.ndarray:
        """The column as the input's array: object columns stacked; the per-row shape checked."""
        spec = self.specs.get(name)
        if spec is None or spec.shape is None:
            return np.ascontiguousarray(values)
        expected = spec.shape[1:]
        shape_text = (
            f"expected shape {_dims(expected)} per row (input {name!r} is {_dims(spec.shape)})"
        )
        if values.dtype == object and spec.dtype is not None and spec.dtype != object:
            return self._stacked(column, values, spec, rows, shape_text)
        if not _fits(values.shape[1:], expected):
            raise rows.error(
                0, len(values), f"column {column!r}: {shape_text}, got {_dims(values.shape[1:])}"
            )
        return np.ascontiguousarray(values)

    def _stacked(
        self, column: str, values: np.ndarray, spec: ValueInfo, rows: _Rows, shape_text: str
    ) -> np.ndarray:
        """An object column (an array or list per row) stacked into one array of the input's dtype."""
        assert spec.shape is not None and spec.dtype is not None
        arrays: list[np.ndarray] = []
        for position, value in enumerate(values):
            try:
                array = _row_array(value)
            except ValueError as exc:
                raise rows.error(
                    position, position + 1, f"column {column!r}: {shape_text}, got a value that "
                    f"is not one ({exc})"
                ) from None  # fmt: skip
            if not _fits(array.shape, spec.shape[1:]) or (
                arrays and array.shape != arrays[0].shape
            ):
                other = f" (row 0 has {_dims(arrays[0].shape)})" if arrays else ""
                raise rows.error(
                    position,
                    position + 1,
                    f"column {column!r}: {shape_text}, got {_dims(array.shape)}{other}",
                )
            arrays.append(array)
        stacked = np.stack(arrays) if arrays else _empty(spec)
        try:
            return stacked.astype(spec.dtype, casting="same_kind", copy=False)
        except TypeError:
            raise rows.error(
                0,
                len(values),
                f"column {column!r}: values of dtype {stacked.dtype} do not cast to "
                f"{spec.dtype} ({spec.type}) for input {spec.name!r}",
            ) from None

    def _run(self, feed: dict[str, np.ndarray], count: int, rows: _Rows) -> Mapping[str, Any]:
        """The whole batch in one run, or in runs of the model's static batch (or, with several
        streams, in parts run side by side)."""
        static = self.static_batch
        if self.streams > 1 and count > 1:
            return self._side_by_side(feed, count, rows)
        if static is None or count == static:
            return self._run_once(feed, 0, count, rows)
        if count == 0:  # nothing to pad a static run with: empty columns of the declared shapes
            infos = {info.name: info for info in self.backend.outputs}
            return {name: _empty(infos[name]) for name in self.outputs}
        head: dict[str, np.ndarray] = {}
        for name, array in feed.items():
            head[name] = np.empty((static, *array.shape[1:]), array.dtype)
            _filled(head[name], array[:static])
        first = self._run_once(head, 0, min(static, count), rows)
        cut = [name for name, value in first.items() if np.shape(value)[:1] != (static,)]
        if cut:
            raise rows.error(
                0,
                count,
                f"output(s) {cut} do not have the model's static batch of {static} first "
                f"(shapes {[list(np.shape(first[n])) for n in cut]}); expected one row per input row",
            )
        out = {
            n: np.empty((count, *np.shape(v)[1:]), np.asarray(v).dtype) for n, v in first.items()
        }
        for name, value in first.items():
            out[name][: min(static, count)] = value[:count]
        if count <= static:
            return out
        bindable = all(v.dtype != object for v in (*head.values(), *out.values()))
        binding = self.backend.bind(self.run_options) if bindable else None
        results = {n: np.empty_like(v) for n, v in first.items()} if binding else {}
        if binding is not None:
            for name, buffer in head.items():
                binding.bind_input(name, buffer)
            for name, buffer in results.items():
                binding.bind_output(name, buffer)
        for start in range(static, count, static):
            stop = min(start + static, count)
            for name, array in feed.items():
                _filled(head[name], array[start:stop])
                if binding is not None:  # bound again: plugin EPs (WebGPU, OpenVINO) copy
                    binding.bind_input(name, head[name])  # a CPU input when it is bound
            if binding is None:
                results = dict(self._run_once(head, start, stop, rows))
            else:
                try:
                    binding.run()
                except Exception as exc:
                    raise rows.error(start, stop, _reason(exc)) from exc
            for name, value in results.items():
                out[name][start:stop] = value[: stop - start]
        return out

    def _side_by_side(
        self, feed: dict[str, np.ndarray], count: int, rows: _Rows
    ) -> Mapping[str, Any]:
        """The batch in parts queued at once on the throughput hint's streams: one part per
        stream, or runs of the static batch (each padded); the outputs joined in row order."""
        static = self.static_batch
        size = static or -(-count // self.streams)
        parts: list[tuple[int, int, dict[str, np.ndarray]]] = []
        for start in range(0, count, size):
            stop = min(start + size, count)
            part = {name: array[start:stop] for name, array in feed.items()}
            if static is not None and stop - start < static:
                part = {name: _padded(array, static) for name, array in part.items()}
            parts.append((start, stop, part))
        results = _Parallel(self.backend, list(self.outputs), self.run_options).run(
            [part for _, _, part in parts]
        )
        joined: dict[str, list[Any]] = {name: [] for name in self.outputs}
        for (start, stop, part), (outputs, failed) in zip(parts, results):
            if failed is not None:
                low, high, error = 0, stop - start, failed
                if static is None:
                    low, high, error = self._failing_rows(part, failed)
                raise rows.error(start + low, start + high, _reason(error)) from failed
            for name, value in (outputs or {}).items():
                expected = len(next(iter(part.values())))
                if np.shape(value)[:1] != (expected,):
                    raise rows.error(
                        start,
                        stop,
                        f"output {name!r} has shape {list(np.shape(value))} for a run of "
                        f"{expected} rows; expected one row per input row",
                    )
                joined[name].append(value[: stop - start])
        return {name: np.concatenate(values) for name, values in joined.items()}

    def _run_once(
        self, feed: Mapping[str, np.ndarray], start: int, stop: int, rows: _Rows
    ) -> Mapping[str, Any]:
        try:
            return self.backend.run(dict(feed), list(self.outputs), run_options=self.run_options)
        except Exception as exc:
            low, high, error = self._failing_rows(feed, exc)
            raise rows.error(start + low, start + high, _reason(error)) from exc

    def _failing_rows(
        self, feed: Mapping[str, np.ndarray], error: Exception
    ) -> tuple[int, int, Exception]:
        """Which of the rows that failed together fail: where only one half of them fails
        alone, that half, down to one row; else all of them (the fault is no one row's). Only
        a dynamic batch can run a part of its rows; a static one keeps them all."""
        count = len(next(iter(feed.values()))) if feed else 0
        low, high = 0, count
        if self.static_batch is not None or any(
            np.ndim(array) == 0 or len(array) != count for array in feed.values()
        ):
            return low, high, error
        while high - low > 1:
            middle = (low + high) // 2
            failing = []
            for part in ((low, middle), (middle, high)):
                failure = self._failure({n: a[part[0] : part[1]] for n, a in feed.items()})
                if failure is not None:
                    failing.append((part, failure))
            if len(failing) != 1:
                break
            (low, high), error = failing[0]
        return low, high, error

    def _failure(self, feed: Mapping[str, np.ndarray]) -> Exception | None:
        """What running ``feed`` raises (``None``: it runs)."""
        try:
            self.backend.run(dict(feed), list(self.outputs), run_options=self.run_options)
        except Exception as exc:
            return exc
        return None

    def __del__(self) -> None:
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()


def _calls(hint: str, gpu: bool, cpus: int) -> int:
    """Batches one actor may take at once: as many as its streams may be under a throughput
    hint (its CPUs; an accelerator measures 1 or 2 streams), else one."""
    if hint == "latency":
        return 1
    return 2 if gpu else max(1, cpus)


def _actor_pool(ray: Any, size: int, calls: int) -> Any:
    """Ray's pool of ``size`` actors, each running up to ``calls`` batches side by side where
    this Ray can (its ``ActorPoolStrategy`` takes ``enable_true_multi_threading``); else one."""
    strategy = ray.data.ActorPoolStrategy
    takes = inspect.signature(strategy).parameters
    if calls > 1 and "enable_true_multi_threading" in takes:
        return strategy(
            size=size, max_concurrent_calls_per_actor=calls, enable_true_multi_threading=True
        )
    return strategy(size=size)


def predict(
    dataset: Any,
    checkpoint: CheckpointLike,
    *,
    providers: Sequence[Any] | None = None,
    policy: Any = None,
    session_options: SessionOptionsConfig | Mapping[str, Any] | None = None,
    input_columns: Mapping[str, str] | None = None,
    output_columns: Mapping[str, str] | None = None,
    keep_columns: Sequence[str] | None = None,
    id_column: str | None = None,
    chain_column: str | None = None,
    batch_size: int | None = None,
    concurrency: int | None = None,
    num_cpus_per_actor: int = 1,
    performance_hint: str = "latency",
) -> Any:
    """``dataset.map_batches`` with an :class:`OnnxPredictor` per actor; returns the lazy dataset.

    ``checkpoint`` is a ``LocalCheckpoint`` (a separate metadata file
    included), ``ResolvedCheckpoint``, ``InMemoryCheckpoint``, a path or bytes.
    ``keep_columns`` limits the batch columns carried to the output (default:
    all). ``id_column`` names rows in errors; ``chain_column`` adds a column
    saying, per row, which node, process, threads and provider chain ran it (JSON).
    Defaults: :func:`default_batch_size` rows per batch; as many CPU actors as
    fit in the cluster's CPUs minus one (left to the tasks that read and feed
    them), ``num_cpus_per_actor`` each and as many intra-op threads; or one
    actor per GPU when the chain has a GPU provider. Progress is Ray Data's own.
    ``performance_hint="throughput"``: each actor serves with the throughput hint, its streams
    measured within its ``num_cpus_per_actor`` CPUs (give it several), and Ray may hand it that
    many batches at once (2 for a GPU actor), where Ray runs an actor's calls side by side.
    """
    ray = require_ray()
    if batch_size is not None and batch_size < 1:
        raise OptionError(f"batch_size: expected a positive count of rows, got {batch_size}")
    config = BackendConfig(
        model=checkpoint,
        providers=providers,
        session_options=session_options,
        policy=policy,
        input_columns=input_columns,
        output_columns=output_columns,
        keep_columns=keep_columns,
        id_column=id_column,
        chain_column=chain_column,
        performance_hint=performance_hint,
    )
    columns = () if config.keep_columns is not None else dataset.columns() or ()
    clash = _column_clash(config, config.checkpoint().metadata.output_names, columns)
    if clash:
        raise OptionError(f"predict: {clash}")
    chain = _chain_names(config, None)
    resources = _resources(chain, num_cpus_per_actor)
    gpu = "num_gpus" in resources
    cluster = ray.cluster_resources()
    if gpu and not cluster.get("GPU"):  # Ray would wait for one forever
        raise OptionError(
            f"predict: the chain [{', '.join(chain)}] needs a GPU per actor, and the Ray cluster has none "
            "(ray.cluster_resources() lists no GPU); pass providers=['cpu'] or join a cluster "
            "with GPUs"
        )
    if concurrency is None:
        if gpu:
            concurrency = max(1, int(cluster.get("GPU", 1)))
        else:  # one CPU stays free for the tasks that read and feed the actors
            concurrency = max(1, (int(cluster.get("CPU", 1)) - 1) // num_cpus_per_actor)
    return dataset.map_batches(
        OnnxPredictor,
        fn_constructor_kwargs={"config": config},
        batch_size=batch_size or default_batch_size(config, gpu=gpu),
        batch_format="numpy",
        compute=_actor_pool(ray, concurrency, _calls(performance_hint, gpu, num_cpus_per_actor)),
        udf_modifying_row_count=False,
        **resources,
    )
