"""Plugin machinery: hook specs, the values hooks return and the plugin host that calls them."""

from .hookspecs import PROJECT, hookimpl, hookspec
from .manager import PluginHost, get_plugin_host, reset_plugin_host
from .types import (
    DoctorCheck,
    HostProbe,
    PluginFailure,
    PluginInfo,
    ProviderDecline,
    ProviderOffer,
    ProviderType,
)

__all__ = [
    "PROJECT",
    "DoctorCheck",
    "HostProbe",
    "PluginFailure",
    "PluginHost",
    "PluginInfo",
    "ProviderDecline",
    "ProviderOffer",
    "ProviderType",
    "get_plugin_host",
    "hookimpl",
    "hookspec",
    "reset_plugin_host",
]
