"""What one actor asks Ray for (a GPU when its chain runs on one), rows per batch, the actor pool."""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Sequence
from typing import Any

from ortplug.errors import OptionError
from ortplug.host.capabilities import HostCapabilities
from ortplug.plugin_host.manager import get_plugin_host
from ortplug.selection import DefaultProviderPolicy, SelectionRequest, select_providers

from .config import BackendConfig

__all__ = [
    "actor_pool",
    "actor_resources",
    "chain_names",
    "concurrent_calls",
    "default_batch_size",
    "resources_for",
    "static_batch",
]

#: Model input per Ray batch: enough that Ray's cost per batch (milliseconds) is small beside
#: the runs, bounded in rows for tiny inputs; a GPU gets more so each run fills it.
_BATCH_BYTES = {False: 16 << 20, True: 128 << 20}
_BATCH_ROWS = {False: 1 << 16, True: 1 << 18}


def chain_names(config: BackendConfig, host: HostCapabilities | None) -> list[str]:
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
    return resources_for(chain_names(config, host), num_cpus)


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


def resources_for(chain: Sequence[str], num_cpus: int) -> dict[str, float]:
    if _on_gpu(chain):
        return {"num_cpus": 1, "num_gpus": 1}
    return {"num_cpus": num_cpus}


def static_batch(shapes: Iterable[tuple[int | str | None, ...] | None]) -> int | None:
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
    static = static_batch(shapes)
    if static is not None:
        rows = max(static, rows // static * static)
    return max(1, rows)


def concurrent_calls(hint: str, gpu: bool, cpus: int) -> int:
    """Batches one actor may take at once: as many as its streams may be under a throughput
    hint (its CPUs; an accelerator measures 1 or 2 streams), else one."""
    if hint == "latency":
        return 1
    return 2 if gpu else max(1, cpus)


def actor_pool(ray: Any, size: int, calls: int) -> Any:
    """Ray's pool of ``size`` actors, each running up to ``calls`` batches side by side where
    this Ray can (its ``ActorPoolStrategy`` takes ``enable_true_multi_threading``); else one."""
    strategy = ray.data.ActorPoolStrategy
    takes = inspect.signature(strategy).parameters
    if calls > 1 and "enable_true_multi_threading" in takes:
        return strategy(
            size=size, max_concurrent_calls_per_actor=calls, enable_true_multi_threading=True
        )
    return strategy(size=size)
