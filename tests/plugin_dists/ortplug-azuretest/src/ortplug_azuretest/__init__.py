"""A third-party provider plugin used by ortplug's tests: one module, one entry-point line.

It maps the kind ``azure`` to ONNX Runtime's ``AzureExecutionProvider`` (in
every CPU wheel) and offers it only for checkpoints whose metadata asks for it
with ``extra={"ortplug_azuretest": true}``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import attrs
from ortplug.plugins import (
    CheckpointMetadata,
    HostCapabilities,
    MetadataKey,
    ProviderOffer,
    ProviderType,
    hookimpl,
)


@attrs.frozen
class AzureProvider:
    """ONNX Runtime's Azure provider, which takes no options here."""

    kind: ClassVar[str] = "azure"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "AzureExecutionProvider", {}


@hookimpl
def ortplug_provider_types() -> Iterable[ProviderType]:
    yield ProviderType("azure", "AzureExecutionProvider", AzureProvider, aliases=("cloud",))


@hookimpl
def ortplug_metadata_keys() -> Iterable[MetadataKey]:
    yield MetadataKey("ortplug_azuretest", bool, "true asks for the Azure provider")


@hookimpl
def ortplug_offer_providers(
    metadata: CheckpointMetadata, host: HostCapabilities
) -> Iterable[ProviderOffer]:
    if metadata.extra.get("ortplug_azuretest") and host.has_provider("AzureExecutionProvider"):
        yield ProviderOffer(AzureProvider(), preference=50, reason="asked for by the checkpoint")
