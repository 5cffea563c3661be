"""Batch inference on Ray Data with one ``OnnxBackend`` per actor (``pip install 'ortplug[ray]'``).

Sessions cannot be pickled, so what travels to the workers is a
:class:`BackendConfig` (the model, the provider chain or policy, the session
options, the column mapping); each actor builds its backend once, runs every
batch it is given through it, and closes it when the actor ends. Actors that
will run a GPU provider ask Ray for a GPU; CPU actors size their intra-op
threads to the CPUs Ray gave them, so actors sharing a node do not
oversubscribe it.

    import ray
    from ortplug.integrations.ray import predict

    ds = ray.data.read_parquet("s3://bucket/features/")
    scored = predict(ds, "model.onnx", input_columns={"features": "x"})
    scored.write_parquet("s3://bucket/scores/")
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ..backend import OnnxBackend
from ..checkpoint import CheckpointMetadata, InMemoryCheckpoint, LocalCheckpoint, ResolvedCheckpoint
from ..host import HostCapabilities
from ..plugins.manager import get_plugin_host
from ..selection import DefaultProviderPolicy
from ..session_options import SessionOptionsConfig

__all__ = ["BackendConfig", "BatchError", "OnnxPredictor", "actor_resources", "predict"]

#: Providers that need a GPU of their own per actor.
_GPU_PROVIDERS = frozenset({"CUDAExecutionProvider", "TensorrtExecutionProvider"})


def _mapping(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value or {})  # plain dicts: the config must pickle with the standard pickle too


@attrs.frozen
class BackendConfig:
    """Everything an actor needs to build its backend: picklable, unlike a session.

    ``model`` is a path every worker can read, or the model's bytes.
    ``input_columns`` maps batch columns to model inputs (default: same
    names); ``output_columns`` maps model outputs to the columns written
    (default: every output, same names).
    """

    model: str | bytes
    providers: tuple[Any, ...] | None = None
    session_options: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)
    metadata: Mapping[str, Any] | None = attrs.field(default=None, hash=False)
    input_columns: Mapping[str, str] = attrs.field(factory=dict, converter=_mapping, hash=False)
    output_columns: Mapping[str, str] = attrs.field(factory=dict, converter=_mapping, hash=False)

    def checkpoint(self) -> ResolvedCheckpoint:
        """The checkpoint, resolved on the worker."""
        metadata = CheckpointMetadata.from_dict(self.metadata) if self.metadata else None
        if isinstance(self.model, bytes):
            return InMemoryCheckpoint(self.model, metadata).resolve()
        checkpoint = LocalCheckpoint(Path(self.model)).resolve()
        return attrs.evolve(checkpoint, metadata=metadata) if metadata else checkpoint

    def build(self, threads: int | None = None) -> OnnxBackend:
        """The backend, with ``threads`` intra-op threads unless the options set their own."""
        options = SessionOptionsConfig.from_dict(dict(self.session_options))
        if threads is not None and options.intra_op_num_threads is None:
            options = options.evolve(intra_op_num_threads=threads)
        providers = list(self.providers) if self.providers is not None else None
        return OnnxBackend.from_checkpoint(self.checkpoint(), providers, options)


def actor_resources(
    config: BackendConfig, host: HostCapabilities | None = None, *, num_cpus: int = 1
) -> dict[str, float]:
    """Ray resources for one actor: a GPU when the chain (explicit or the policy's) has a GPU provider."""
    plugins = get_plugin_host()
    host = host or plugins.host_capabilities()
    if config.providers is not None:
        registry = plugins.provider_registry()
        names = [registry.parse(p).to_ort()[0] for p in config.providers]
    else:
        metadata = config.checkpoint().metadata
        names = [c.to_ort()[0] for c in DefaultProviderPolicy(plugins).select(metadata, host)]
    if _GPU_PROVIDERS & set(names):
        return {"num_cpus": 1, "num_gpus": 1}
    return {"num_cpus": num_cpus}


class BatchError(RuntimeError):
    """One batch failed; the message names the batch, the actor and the input at fault."""


def _assigned_cpus() -> int | None:
    try:
        import ray
    except ImportError:  # used outside Ray: no assignment to follow
        return None
    assigned = ray.get_runtime_context().get_assigned_resources()  # type: ignore[no-untyped-call]
    cpus = assigned.get("CPU")
    return max(1, int(cpus)) if cpus else None


class OnnxPredictor:
    """The callable class for ``Dataset.map_batches``: one backend per actor, one run per batch."""

    def __init__(self, config: BackendConfig) -> None:
        self.config = config
        self.backend = config.build(_assigned_cpus())
        inputs = config.input_columns or {name: name for name in self.backend.input_names}
        self.inputs = dict(inputs)
        outputs = config.output_columns or {name: name for name in self.backend.output_names}
        self.outputs = dict(outputs)
        self.batches = 0

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Map columns to inputs, run, and return the batch with the output columns added."""
        index = self.batches
        self.batches += 1
        missing = [column for column in self.inputs if column not in batch]
        if missing:
            raise BatchError(
                f"batch {index} (actor pid {os.getpid()}): column(s) {missing} missing; "
                f"the batch has {sorted(batch)}"
            )
        feed = {name: np.ascontiguousarray(batch[column]) for column, name in self.inputs.items()}
        try:
            results = self.backend.run(feed, list(self.outputs))
        except Exception as exc:
            rows = len(next(iter(feed.values()))) if feed else 0
            raise BatchError(
                f"batch {index} ({rows} rows, actor pid {os.getpid()}) failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        out = dict(batch)
        out.update({column: results[name] for name, column in self.outputs.items()})
        return out

    def __del__(self) -> None:
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()


def predict(
    dataset: Any,
    model: str | os.PathLike[str] | bytes,
    *,
    providers: Sequence[Any] | None = None,
    session_options: SessionOptionsConfig | Mapping[str, Any] | None = None,
    input_columns: Mapping[str, str] | None = None,
    output_columns: Mapping[str, str] | None = None,
    batch_size: int = 256,
    concurrency: int | None = None,
    num_cpus_per_actor: int = 1,
) -> Any:
    """``dataset.map_batches`` with an :class:`OnnxPredictor` per actor; returns the lazy dataset.

    Defaults: as many CPU actors as fit in the cluster's CPUs minus one (left
    to the tasks that read and feed them), ``num_cpus_per_actor`` each and as
    many intra-op threads; or one actor per GPU when the chain has a GPU
    provider. Progress is Ray Data's own.
    """
    import ray

    options = (
        session_options.to_dict()
        if isinstance(session_options, SessionOptionsConfig)
        else dict(session_options or {})
    )
    config = BackendConfig(
        model=model if isinstance(model, bytes) else os.fspath(model),
        providers=tuple(providers) if providers is not None else None,
        session_options=options,
        input_columns=input_columns or {},
        output_columns=output_columns or {},
    )
    resources = actor_resources(config, num_cpus=num_cpus_per_actor)
    if concurrency is None:
        cluster = ray.cluster_resources()  # type: ignore[no-untyped-call]
        if "num_gpus" in resources:
            concurrency = max(1, int(cluster.get("GPU", 1)))
        else:  # one CPU stays free for the tasks that read and feed the actors
            concurrency = max(1, (int(cluster.get("CPU", 1)) - 1) // num_cpus_per_actor)
    return dataset.map_batches(
        OnnxPredictor,
        fn_constructor_kwargs={"config": config},
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=concurrency),
        **resources,
    )
