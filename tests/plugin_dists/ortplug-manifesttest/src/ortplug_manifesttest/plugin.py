"""The plugin's one hook: its kind, config class and probe come from ortplug.json."""

from __future__ import annotations

from collections.abc import Iterable

from ortplug.plugins import CheckpointMetadata, HostCapabilities, ProviderOffer, hookimpl

from .config import ManifestAzureProvider


@hookimpl
def ortplug_offer_providers(
    metadata: CheckpointMetadata, host: HostCapabilities
) -> Iterable[ProviderOffer]:
    """The kind, for a checkpoint that asks for it, where the declared probe says it is usable."""
    if metadata.extra.get("ortplug_manifesttest") and host.fact("manifesttest", "usable"):
        yield ProviderOffer(ManifestAzureProvider(), preference=50, reason="asked for")
