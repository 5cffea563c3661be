"""Plugin machinery: hook specs with their call contracts, the values hooks return, the provider
registry and the plugin host that calls them."""

from ..host import HostProbe
from .hookspecs import CONTRACTS, PROJECT, CallMode, HookContract, hookimpl, hookspec
from .manager import (
    PluginHost,
    get_plugin_host,
    parse_provider,
    reset_plugin_host,
    resolve_plugin_host,
)
from .registry import ProviderRegistry, ProviderSpec, ProviderType
from .types import (
    DoctorCheck,
    MetadataKey,
    PluginFailure,
    PluginInfo,
    ProviderDecline,
    ProviderOffer,
)

__all__ = [
    "CONTRACTS",
    "PROJECT",
    "CallMode",
    "DoctorCheck",
    "HookContract",
    "HostProbe",
    "MetadataKey",
    "PluginFailure",
    "PluginHost",
    "PluginInfo",
    "ProviderDecline",
    "ProviderOffer",
    "ProviderRegistry",
    "ProviderSpec",
    "ProviderType",
    "get_plugin_host",
    "hookimpl",
    "hookspec",
    "parse_provider",
    "reset_plugin_host",
    "resolve_plugin_host",
]
