"""Provider policies: how a chain of execution providers is picked from a checkpoint and a host."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from .checkpoint import CheckpointMetadata
from .host import HostCapabilities
from .plugins.types import ProviderDecline, ProviderOffer
from .providers import ProviderConfig

if TYPE_CHECKING:
    from .checkpoint import ResolvedCheckpoint
    from .plugins.manager import PluginHost

__all__ = ["DefaultProviderPolicy", "ProviderPolicy", "ProviderSelection"]


@runtime_checkable
class ProviderPolicy(Protocol):
    """Chooses the ordered provider chain for a checkpoint on a host.

    A chain chosen by a policy is enforced gracefully: the backend warns only
    when none of its accelerators was realized.
    """

    def select(self, metadata: CheckpointMetadata, host: HostCapabilities) -> list[ProviderConfig]:
        """Return provider configs in priority order."""
        ...


@attrs.frozen
class ProviderSelection:
    """A chosen chain with every offer that was considered and every decline, with reasons."""

    chain: tuple[ProviderConfig, ...]
    offers: tuple[ProviderOffer, ...]
    declined: tuple[ProviderDecline, ...] = ()

    def reason_for(self, config: ProviderConfig) -> str:
        """The reason of the offer that put ``config`` in the chain."""
        for offer in self.offers:
            if offer.config == config:
                return f"{offer.reason} [{offer.plugin}]"
        return "chosen by a provider-chain plugin"


class DefaultProviderPolicy:
    """Asks every plugin for offers and lets the ``ortplug_provider_chain`` hook order them."""

    def __init__(self, plugins: PluginHost | None = None) -> None:
        if plugins is None:
            from .plugins.manager import get_plugin_host

            plugins = get_plugin_host()
        self.plugins = plugins

    def explain(
        self,
        metadata: CheckpointMetadata,
        host: HostCapabilities,
        checkpoint: ResolvedCheckpoint | None = None,
    ) -> ProviderSelection:
        """The chain, the offers behind it and the declines, for ``ortplug info`` and ``run``.

        ``checkpoint`` lets plugins use facts that need the weights (a cached
        engine for this exact model); without it they decide from metadata.
        """
        items = self.plugins.offer_providers(metadata, host, checkpoint)
        offers = [item for item in items if isinstance(item, ProviderOffer)]
        declined = [item for item in items if isinstance(item, ProviderDecline)]
        chain = self.plugins.provider_chain(offers, metadata, host)
        return ProviderSelection(chain=tuple(chain), offers=tuple(offers), declined=tuple(declined))

    def select(self, metadata: CheckpointMetadata, host: HostCapabilities) -> list[ProviderConfig]:
        """The provider chain for this checkpoint on this host."""
        return list(self.explain(metadata, host).chain)
