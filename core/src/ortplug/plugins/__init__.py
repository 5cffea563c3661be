"""Everything a plugin author uses, from one module: ``from ortplug.plugins import ...``; each
name imported on first use, none of the plugin host (tests use :mod:`ortplug.testing`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..cache.index import describe as describe_cache_folder
    from ..cache.root import CACHE_ENV, cache_dir, cache_key, cache_problem, cache_root
    from ..checkpoint import CheckpointMetadata, ResolvedCheckpoint
    from ..errors import CacheError, OptionError, OrtplugCacheWarning, PluginError
    from ..host.capabilities import HostCapabilities, HostProbe, fact_label
    from ..host.ep_libraries import EpLibrary, describe_device
    from ..host.install_command import pip_install
    from ..host.probing import (
        file_identity,
        run_probe_script,
        site_package_dirs,
        system_library_identity,
    )
    from ..host.runtime import preload_runtime_libraries
    from ..providers.configs import ProviderConfig
    from ..providers.options import (
        bool_field,
        check_threads,
        choice_field,
        encode_option,
        int_field,
        ort_options,
        path_field,
        plain_options,
        seconds_field,
        threads_field,
    )
    from ..providers.session_options import SessionOptionsConfig
    from .declaration import Identity
    from .declared import declared_kind, kind_of
    from .ep_package import EpPackageHookPlugin, EpPackagePlugin, LibraryProvider
    from .hookspecs import CONTRACTS, PROJECT, CallMode, HookContract, hookimpl, hookspec
    from .provider_type import ProviderSpec, ProviderType
    from .types import (
        DoctorCheck,
        MetadataKey,
        PluginFailure,
        PluginInfo,
        ProviderDecline,
        ProviderOffer,
    )

__all__ = [
    "CACHE_ENV",
    "CONTRACTS",
    "PROJECT",
    "CacheError",
    "CallMode",
    "CheckpointMetadata",
    "DoctorCheck",
    "EpLibrary",
    "EpPackageHookPlugin",
    "EpPackagePlugin",
    "HookContract",
    "HostCapabilities",
    "HostProbe",
    "Identity",
    "LibraryProvider",
    "MetadataKey",
    "OptionError",
    "OrtplugCacheWarning",
    "PluginError",
    "PluginFailure",
    "PluginInfo",
    "ProviderConfig",
    "ProviderDecline",
    "ProviderOffer",
    "ProviderSpec",
    "ProviderType",
    "ResolvedCheckpoint",
    "SessionOptionsConfig",
    "bool_field",
    "cache_dir",
    "cache_key",
    "cache_problem",
    "cache_root",
    "check_threads",
    "choice_field",
    "declared_kind",
    "describe_cache_folder",
    "describe_device",
    "encode_option",
    "fact_label",
    "file_identity",
    "hookimpl",
    "hookspec",
    "int_field",
    "kind_of",
    "ort_options",
    "path_field",
    "pip_install",
    "plain_options",
    "preload_runtime_libraries",
    "run_probe_script",
    "seconds_field",
    "site_package_dirs",
    "system_library_identity",
    "threads_field",
]

#: Where each name imported on first use lives: ``(module, attribute)``.
_LAZY = {
    "CONTRACTS": (".hookspecs", "CONTRACTS"),
    "PROJECT": (".hookspecs", "PROJECT"),
    "CallMode": (".hookspecs", "CallMode"),
    "HookContract": (".hookspecs", "HookContract"),
    "hookimpl": (".hookspecs", "hookimpl"),
    "hookspec": (".hookspecs", "hookspec"),
    "HostCapabilities": ("..host.capabilities", "HostCapabilities"),
    "HostProbe": ("..host.capabilities", "HostProbe"),
    "ProviderSpec": (".provider_type", "ProviderSpec"),
    "ProviderType": (".provider_type", "ProviderType"),
    "DoctorCheck": (".types", "DoctorCheck"),
    "MetadataKey": (".types", "MetadataKey"),
    "PluginFailure": (".types", "PluginFailure"),
    "PluginInfo": (".types", "PluginInfo"),
    "ProviderDecline": (".types", "ProviderDecline"),
    "ProviderOffer": (".types", "ProviderOffer"),
    "CACHE_ENV": ("..cache.root", "CACHE_ENV"),
    "CacheError": ("..errors", "CacheError"),
    "CheckpointMetadata": ("..checkpoint", "CheckpointMetadata"),
    "EpLibrary": ("..host.ep_libraries", "EpLibrary"),
    "EpPackageHookPlugin": (".ep_package", "EpPackageHookPlugin"),
    "EpPackagePlugin": (".ep_package", "EpPackagePlugin"),
    "Identity": (".declaration", "Identity"),
    "declared_kind": (".declared", "declared_kind"),
    "kind_of": (".declared", "kind_of"),
    "LibraryProvider": (".ep_package", "LibraryProvider"),
    "OptionError": ("..errors", "OptionError"),
    "OrtplugCacheWarning": ("..errors", "OrtplugCacheWarning"),
    "PluginError": ("..errors", "PluginError"),
    "ProviderConfig": ("..providers.configs", "ProviderConfig"),
    "ResolvedCheckpoint": ("..checkpoint", "ResolvedCheckpoint"),
    "SessionOptionsConfig": ("..providers.session_options", "SessionOptionsConfig"),
    "bool_field": ("..providers.options", "bool_field"),
    "cache_dir": ("..cache.root", "cache_dir"),
    "cache_key": ("..cache.root", "cache_key"),
    "cache_problem": ("..cache.root", "cache_problem"),
    "cache_root": ("..cache.root", "cache_root"),
    "choice_field": ("..providers.options", "choice_field"),
    "describe_cache_folder": ("..cache.index", "describe"),
    "describe_device": ("..host.ep_libraries", "describe_device"),
    "check_threads": ("..providers.options", "check_threads"),
    "encode_option": ("..providers.options", "encode_option"),
    "fact_label": ("..host.capabilities", "fact_label"),
    "file_identity": ("..host.probing", "file_identity"),
    "int_field": ("..providers.options", "int_field"),
    "ort_options": ("..providers.options", "ort_options"),
    "path_field": ("..providers.options", "path_field"),
    "pip_install": ("..host.install_command", "pip_install"),
    "plain_options": ("..providers.options", "plain_options"),
    "preload_runtime_libraries": ("..host.runtime", "preload_runtime_libraries"),
    "run_probe_script": ("..host.probing", "run_probe_script"),
    "seconds_field": ("..providers.options", "seconds_field"),
    "threads_field": ("..providers.options", "threads_field"),
    "site_package_dirs": ("..host.probing", "site_package_dirs"),
    "system_library_identity": ("..host.probing", "system_library_identity"),
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'ortplug.plugins' has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0], __name__), where[1])
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
