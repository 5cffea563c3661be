"""The core's own plugin: the default chain ordering, registered ``trylast`` like any plugin."""

from __future__ import annotations

from collections.abc import Sequence

from ..plugins.hookspecs import hookimpl
from ..plugins.types import MetadataKey, ProviderOffer
from ..providers.configs import ProviderConfig, is_accelerator

__all__ = ["ortplug_metadata_keys", "ortplug_provider_chain"]


@hookimpl
def ortplug_metadata_keys() -> list[MetadataKey]:
    """The ``extra`` keys the core itself reads."""
    return [
        MetadataKey(
            "dim_ranges",
            dict,
            "per input, per symbolic dimension: [min, opt, max], for generated inputs and "
            "accelerator profiles",
        ),
        MetadataKey(
            "samples",
            str,
            "folder of <input>.npy sample inputs (relative to the weights) that verification "
            "and int8 calibration use instead of generated ones",
        ),
        MetadataKey(
            "sample_rate",
            int,
            "the audio sample rate (Hz) the model takes: generated audio inputs are seconds of it",
        ),
        MetadataKey(
            "output_checks",
            dict,
            "per output, how verification judges it: {metric: allclose|topk|cosine|exact, "
            "rtol, atol, k, min_cosine}",
        ),
    ]


@hookimpl(trylast=True)
def ortplug_provider_chain(offers: Sequence[ProviderOffer]) -> list[ProviderConfig]:
    """Kinds in their declared order (``ProviderOffer.place``), each kind's highest preference
    first, one config per kind, CPU last (it is the universal fallback)."""
    ranked = sorted(offers, key=ProviderOffer.rank)
    chain: list[ProviderConfig] = []
    seen: set[str] = set()
    for offer in ranked:
        if offer.config.kind not in seen:
            seen.add(offer.config.kind)
            chain.append(offer.config)
    return sorted(chain, key=lambda config: not is_accelerator(config))
