"""``DefaultProviderPolicy``: the plugins' offers, ordered by the chain hook, autotune applied."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..checkpoint import CheckpointMetadata
from ..host.capabilities import HostCapabilities
from ..plugin_host.manager import PluginHost, resolve_plugin_host
from ..plugins.types import ProviderDecline, ProviderOffer
from ..providers.configs import ProviderConfig
from .autotune import apply_tuning
from .protocol import ProviderSelection, SelectionRequest

if TYPE_CHECKING:
    from ..checkpoint import ResolvedCheckpoint

__all__ = ["DefaultProviderPolicy"]


class DefaultProviderPolicy:
    """Asks every plugin for offers and lets the ``ortplug_provider_chain`` hook order them; a
    measured record for the model here comes first unless ``autotune=False``."""

    def __init__(self, plugins: PluginHost | None = None, *, autotune: bool = True) -> None:
        self._plugins = plugins
        self.autotune = autotune

    @property
    def plugins(self) -> PluginHost:
        """The plugin host this policy asks (default: the process-wide one)."""
        return resolve_plugin_host(self._plugins)

    def choose(self, request: SelectionRequest) -> ProviderSelection:
        """Offers and declines from every plugin, ordered by the chain hook, autotune applied."""
        from .variants import candidate_key, offer_reason, rank_variants  # an explicit list: none

        plugins = self._plugins or request.plugins
        items = plugins.offer_providers(request.metadata, request.host, request.checkpoint)
        offers = tuple(item for item in items if isinstance(item, ProviderOffer))
        declined = tuple(item for item in items if isinstance(item, ProviderDecline))
        reference = tuple(
            offer for offer in offers if candidate_key(offer, request.metadata) == (None, None)
        )
        chain, chain_plugin = plugins.provider_chain(
            list(reference), request.metadata, request.host
        )
        selection = ProviderSelection(
            chain=tuple(chain),
            reasons=tuple(offer_reason(config, reference) for config in chain),
            offers=reference,
            declined=declined,
            chain_plugin=chain_plugin,
        )
        ranked = rank_variants(selection, offers, request, plugins)
        if self.autotune and request.checkpoint is not None:
            ranked = apply_tuning(ranked, request.checkpoint, request.host, plugins)
        return ranked

    def explain(
        self,
        metadata: CheckpointMetadata,
        host: HostCapabilities,
        checkpoint: ResolvedCheckpoint | None = None,
    ) -> ProviderSelection:
        """The selection for ``metadata`` (and ``checkpoint`` when given) on ``host``."""
        return self.choose(SelectionRequest(metadata, host, self.plugins, checkpoint))

    def select(self, metadata: CheckpointMetadata, host: HostCapabilities) -> list[ProviderConfig]:
        """The provider chain for this checkpoint on this host."""
        return list(self.explain(metadata, host).chain)
