"""The core's own plugin: the default chain ordering, registered ``trylast`` like any plugin."""

from __future__ import annotations

from collections.abc import Sequence

from ..providers import ProviderConfig, is_accelerator
from .hookspecs import hookimpl
from .types import ProviderOffer

__all__ = ["ortplug_provider_chain"]


@hookimpl(trylast=True)
def ortplug_provider_chain(offers: Sequence[ProviderOffer]) -> list[ProviderConfig]:
    """Highest preference first, one config per kind, CPU last (it is the universal fallback)."""
    ranked = sorted(offers, key=lambda offer: offer.preference, reverse=True)
    chain: list[ProviderConfig] = []
    seen: set[str] = set()
    for offer in ranked:
        if offer.config.kind not in seen:
            seen.add(offer.config.kind)
            chain.append(offer.config)
    return sorted(chain, key=lambda config: not is_accelerator(config))
