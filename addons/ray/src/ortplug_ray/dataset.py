"""``predict``: a Ray Dataset through the model, one :class:`OnnxPredictor` per actor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ortplug.errors import OptionError
from ortplug.providers.session_options import SessionOptionsConfig

from ._rows import column_clash
from .checkpoint import CheckpointLike
from .config import BackendConfig
from .errors import require_ray
from .predictor import OnnxPredictor
from .resources import (
    actor_pool,
    chain_names,
    concurrent_calls,
    default_batch_size,
    resources_for,
)

__all__ = ["predict"]


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
    clash = column_clash(config, config.checkpoint().metadata.output_names, columns)
    if clash:
        raise OptionError(f"predict: {clash}")
    chain = chain_names(config, None)
    resources = resources_for(chain, num_cpus_per_actor)
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
        compute=actor_pool(
            ray, concurrency, concurrent_calls(performance_hint, gpu, num_cpus_per_actor)
        ),
        udf_modifying_row_count=False,
        **resources,
    )
