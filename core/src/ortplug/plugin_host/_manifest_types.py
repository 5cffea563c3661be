"""Provider types, host probes and metadata keys built from a plugin's declaration, by import
path, only for a plugin the host imports; a bad path is one line and leaves that plugin out."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

from ..host.capabilities import DEFAULT_PROBE_TIMEOUT_S, HostProbe
from ..host.ep_libraries import EpLibrary
from ..plugins.declaration import DeclarationError, PluginDeclaration, read_declaration
from ..plugins.provider_type import ProviderType
from ..plugins.types import MetadataKey

__all__ = [
    "declaration_of",
    "declared_contributions",
    "declared_keys",
    "host_probes",
    "metadata_keys",
    "provider_types",
    "resolve",
]

Fail = Callable[[str, str, BaseException], None]


def resolve(path: str, plugin: str, expected: str) -> Any:
    """The object an import path names (``package.module:Name``); one-line error if none."""
    module_name, _, attribute = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except Exception as exc:  # an import error, a missing name: the plugin's, not the host's
        raise _wrong(plugin, path, expected, f"{type(exc).__name__}: {exc}") from None
    return found


def _wrong(plugin: str, path: str, expected: str, given: str) -> DeclarationError:
    """The one line for an import path of a declaration that names no fitting object."""
    return DeclarationError(f"plugin {plugin!r}: {path!r}: expected {expected}, got {given}")


def declaration_of(plugin: object, name: str) -> PluginDeclaration | None:
    """The declaration a plugin object registered directly (not through its entry point) ships
    beside its package, under entry-point name ``name``; ``None`` when its package declares
    none of that name. Read from the file, nothing imported."""
    module = getattr(plugin, "__name__", None) if isinstance(plugin, ModuleType) else None
    module = module or type(plugin).__module__
    try:
        return read_declaration(name, module)
    except DeclarationError:  # none under this name, or broken: the plugin works from its hooks
        return None


def provider_types(declaration: PluginDeclaration) -> list[ProviderType]:
    """The declared kinds as provider types (each ``config`` class imported)."""
    plugin = declaration.plugin
    libraries: dict[str, list[str]] = {}
    for kind in declaration.kinds:
        if kind.library is not None:
            libraries.setdefault(kind.library.name, []).append(kind.ort_name)
    found = []
    for kind in declaration.kinds:
        path = str(kind.config)
        cls = resolve(path, plugin, "a provider config class")
        named = getattr(cls, "ort_name", None)
        if not isinstance(cls, type) or named != kind.ort_name:
            wanted = f"a config class with ort_name {kind.ort_name!r} (the declared one)"
            raise _wrong(plugin, path, wanted, repr(named))
        library = kind.library
        found.append(
            ProviderType(
                kind=kind.kind,
                ort_name=kind.ort_name,
                config_cls=cls,
                aliases=kind.aliases,
                description=kind.description,
                library=None
                if library is None
                else EpLibrary(
                    library.name,
                    tuple(libraries[library.name]),
                    path=library.path,
                    package=library.package,
                ),
                concurrent_runs=kind.concurrent_runs,
                device=kind.device,
                before=kind.before,
                after=kind.after,
            )
        )
    return found


def host_probes(declaration: PluginDeclaration) -> list[HostProbe]:
    """The declared probes (each ``detect`` function imported)."""
    found = []
    for probe in declaration.probes:
        path = str(probe.detect)
        detect = resolve(path, declaration.plugin, "a probe function")
        if not callable(detect):
            given = f"{type(detect).__name__} {detect!r:.80}"
            raise _wrong(declaration.plugin, path, "a probe function", given)
        found.append(
            HostProbe(
                name=probe.name,
                facts=probe.facts,
                detect=detect,
                description=probe.description,
                timeout=DEFAULT_PROBE_TIMEOUT_S if probe.timeout is None else probe.timeout,
                types=probe.value_types(),
                identity=probe.identity,
            )
        )
    return found


def metadata_keys(declaration: PluginDeclaration) -> list[MetadataKey]:
    """The declared ``CheckpointMetadata.extra`` keys as the host's values."""
    return [
        MetadataKey(key.name, key.value_types(), key.description, declaration.plugin)
        for key in declaration.metadata_keys
    ]


def declared_keys(
    declarations: Mapping[str, PluginDeclaration], plugins: Iterable[str]
) -> list[MetadataKey]:
    """The declared metadata keys of ``plugins`` (imported or not: the keys are the manifest's)."""
    return [
        key
        for plugin in plugins
        if plugin in declarations
        for key in metadata_keys(declarations[plugin])
    ]


def declared_contributions(
    declarations: Mapping[str, PluginDeclaration], plugins: Iterable[str], fail: Fail
) -> tuple[list[tuple[str, ProviderType]], list[tuple[str, HostProbe]]]:
    """The types and probes of the imported ``plugins`` that have a declaration.

    A plugin whose paths do not resolve is reported through ``fail(plugin, phase, error)``
    and contributes none of them.
    """
    types: list[tuple[str, ProviderType]] = []
    probes: list[tuple[str, HostProbe]] = []
    for plugin in plugins:
        declaration = declarations.get(plugin)
        if declaration is None:
            continue
        try:
            own_types, own_probes = provider_types(declaration), host_probes(declaration)
        except (DeclarationError, ValueError, TypeError) as exc:
            fail(plugin, "declaration", exc)
            continue
        types += [(plugin, t) for t in own_types]
        probes += [(plugin, p) for p in own_probes]
    return types, probes
