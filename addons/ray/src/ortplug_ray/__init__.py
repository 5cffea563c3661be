"""Batch inference on Ray Data with one ``OnnxBackend`` per actor (``pip install 'ortplug[ray]'``).

Sessions cannot be pickled, so what travels to the workers is a :class:`BackendConfig`: the
checkpoint as a :class:`PortableCheckpoint` (the weights, the metadata read on the driver,
in-memory initializers and external data), the provider chain or policy, the session options
and the column mapping. Each actor builds its backend once, runs every batch it is given
through it (in runs of the model's batch when that is static), and closes it when the actor
ends. Actors that will run a GPU provider ask Ray for a GPU; CPU actors size their intra-op
threads to the CPUs Ray gave them, so actors sharing a node do not oversubscribe it.

With ``performance_hint="throughput"`` (the serving add-on) each actor serves with the
throughput hint, its streams measured within the CPUs Ray gave it: a batch is cut into one part
per stream, queued at once, so the streams run its parts side by side, and Ray may hand an actor
as many batches at once as it may have streams (Ray >= 2.47 runs them concurrently).

    import ray
    from ortplug_ray import predict

    ds = ray.data.read_parquet("s3://bucket/features/")
    scored = predict(ds, LocalCheckpoint("model.onnx"), input_columns={"features": "x"})
    scored.write_parquet("s3://bucket/scores/")

Also ``ortplug batch`` (a folder of inputs, locally or with ``--ray``), registered in the
``ortplug.commands`` entry-point group. Importing this package imports no Ray, and no
numpy until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checkpoint import CheckpointLike, PortableCheckpoint
    from .config import BackendConfig
    from .dataset import predict
    from .errors import BatchError, RayNotInstalledError, require_ray, worker_error
    from .predictor import OnnxPredictor
    from .resources import actor_resources, default_batch_size

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

#: Where each public name lives, imported on first use (``ortplug --help`` imports the
#: ``batch`` command, which needs none of them: no numpy, no backend).
_LAZY = {
    "BackendConfig": ".config",
    "BatchError": ".errors",
    "CheckpointLike": ".checkpoint",
    "OnnxPredictor": ".predictor",
    "PortableCheckpoint": ".checkpoint",
    "RayNotInstalledError": ".errors",
    "actor_resources": ".resources",
    "default_batch_size": ".resources",
    "predict": ".dataset",
    "require_ray": ".errors",
    "worker_error": ".errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
