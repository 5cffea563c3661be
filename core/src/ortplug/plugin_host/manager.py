"""``PluginHost``: the plugins of one process, and a typed facade over their hooks; nothing a
plugin does takes the host down (docs/internals.md, "The plugin host")."""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..host.capabilities import HostCapabilities, probe_overridden
from ..plugins.hookspecs import CONTRACTS, CallMode
from ..plugins.types import (
    DoctorCheck,
    MetadataKey,
    PluginFailure,
    PluginInfo,
    ProviderDecline,
    ProviderOffer,
)
from ..providers.configs import ProviderConfig
from ..settings import Settings, settings
from . import _manifest_types
from . import entry_points as _entry_points
from ._loader import PluginLoader, blocked_by
from ._probe_runner import ProbeRunner
from .registry import ProviderRegistry, close_matches

if TYPE_CHECKING:
    from ..checkpoint import CheckpointMetadata, ResolvedCheckpoint
    from ..plugins.declaration import PluginDeclaration
    from ..providers.session_options import SessionOptionsConfig

__all__ = [
    "PluginHost",
    "blocked_by",
    "get_plugin_host",
    "parse_provider",
    "reset_plugin_host",
    "resolve_plugin_host",
]

#: The kind whose plugin adjusts every session's options: ONNX Runtime runs its CPU provider in all.
_CPU_KIND = "cpu"


class PluginHost:
    """The set of plugins of one process (or one test) and a typed facade over their hooks (a
    failing plugin is reported once and skipped; ``ORTPLUG_STRICT_PLUGINS=1`` raises instead)."""

    def __init__(
        self,
        *,
        load_entry_points: bool = True,
        builtins: bool = True,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        # ``environ``: read these variables instead of this process's settings (tests, catalogs)
        given = None if environ is None else Settings.from_environ(environ, strict=False)
        self._settings = settings() if given is None else given
        self._lock = threading.RLock()
        self._loader = PluginLoader(self._settings, lock=self._lock)
        self._hooks = self._loader.hooks
        overrides = self._settings.overrides
        self._probes = ProbeRunner(
            overrides, self._loader.failures, self._loader.probe_owner, self._loader.version_of
        )
        if builtins:
            self._loader.register_builtins()
        if load_entry_points:
            self._loader.load_entry_points()

    # -- plugins ------------------------------------------------------------------------------

    def register(self, plugin: object, name: str) -> bool:
        """Register a plugin object (module, class instance) under ``name``; False if refused."""
        return self._loader.register(plugin, name)

    def unregister(self, name: str) -> None:
        """Remove a plugin; its providers, probes and offers disappear."""
        self._loader.unregister(name)

    def load_entry_points(self) -> int:
        """Register the ``ortplug`` entry points the allow/deny lists let through.

        A declared plugin is remembered and imported when it is in play; one without a
        declaration is imported now. Returns how many were imported.
        """
        return self._loader.load_entry_points()

    @property
    def failures(self) -> tuple[PluginFailure, ...]:
        """Every distinct failure recorded so far, in order (every declared plugin is imported)."""
        self._loader.load_pending()
        return self._loader.failures.all()

    def plugin_names(self) -> list[str]:
        """Names of the registered (active) plugins (every declared plugin is imported)."""
        self._loader.load_pending()
        return [name for name, active in self._hooks.names() if active]

    def blocked_by(self) -> dict[str, str]:
        """Each installed plugin that ``ORTPLUG_PLUGINS`` / ``ORTPLUG_DISABLE_PLUGINS`` kept out,
        with the setting that did (``{"cpu": "ORTPLUG_PLUGINS=nosuch"}``)."""
        return self._loader.blocked_by()

    def plugin_infos(self) -> list[PluginInfo]:
        """Active, blocked and failed plugins with their distributions, for ``ortplug plugins``.

        Every declared plugin is imported; one without a declaration carries a note saying so.
        """
        return self._loader.infos()

    def holding_declarations(self) -> list[tuple[PluginDeclaration, bool]]:
        """The declarations of the plugins this host lets in and that hold what they claim, each
        with its distribution and whether it is one of this project's (what ``doctor`` may propose)."""
        loader = self._loader
        with self._lock:
            loader.load_pending()
            loader.validated()
            failed = {failure.plugin for failure in loader.failures.all()}
            return [
                (
                    attrs.evolve(
                        declaration,
                        distribution=loader.distributions.get(name, (declaration.distribution,))[0],
                    ),
                    loader.is_shipped(name),
                )
                for name, declaration in loader.declarations.items()
                if self._hooks.plugin(name) is not None and name not in failed
            ]

    def call(self, hook_name: str, **kwargs: Any) -> Any:
        """Call a hook the way its contract declares (collect, first result or fold).

        A fold takes its value as the keyword named by the contract's ``fold_argument``.
        """
        contract = CONTRACTS[hook_name]
        if contract.mode is CallMode.FOLD:
            value = kwargs.pop(str(contract.fold_argument))
            return self._hooks.fold(hook_name, value, **kwargs)
        if contract.mode is CallMode.COLLECT:
            return self._hooks.collect(hook_name, **kwargs)
        return self._hooks.first_result(hook_name, **kwargs)

    # -- typed facade -------------------------------------------------------------------------

    def provider_registry(self) -> ProviderRegistry:
        """Every provider type the plugins contribute or declare (cached until plugins change).

        Looking up a declared name imports its plugin; ``specs()`` imports every one.
        """
        return self._loader.validated().registry

    def host_capabilities(self, kinds: Collection[str] | None = None) -> HostCapabilities:
        """The host as the probes see it (cached); ``kinds``: only the probes those providers need
        (each probe once per plugin host, in parallel, each until its deadline)."""
        loader = self._loader
        with self._lock:
            ruled_out = (
                {} if kinds is not None else loader.load_in_play(None, self._probes.facts_of(None))
            )
            plugins = None if kinds is None else loader.plugins_for(kinds)
            probes = loader.validated().probes
            return self._probes.detect(
                (loader.generation, plugins),
                [(p, probe) for p, probe in probes if plugins is None or p in plugins],
                [probe for name in ruled_out for probe in loader.declarations[name].probes],
            )

    def refresh_probes(self) -> int:
        """Forget every probe result (and the remembered plugin scan) across processes.

        Probes run again; returns how many cached entries were removed (``ortplug info --refresh``).
        """
        with self._lock:
            return self._probes.refresh() + _entry_points.clear()

    def offer_providers(
        self,
        metadata: CheckpointMetadata,
        host: HostCapabilities,
        checkpoint: ResolvedCheckpoint | None = None,
    ) -> list[ProviderOffer | ProviderDecline]:
        """Every plugin's offers and declines for this checkpoint here, tagged with the plugin (the
        core's checks applied: docs/internals.md, "The plugin host")."""
        from ._offer_checks import library_checked, names_its_type, unknown_kind  # policy only

        ruled_out = self._loader.load_in_play(host, self._probes.facts_of(host))
        registry = self.provider_registry()
        answers: list[ProviderOffer | ProviderDecline] = [
            ProviderDecline(kind, f"{reason} (declared; the plugin is not imported)", plugin)
            for plugin, reasons in ruled_out.items()
            for kind, reason in reasons.items()
        ]
        collected = self._hooks.collect(
            "ortplug_offer_providers", metadata=metadata, host=host, checkpoint=checkpoint
        )
        for plugin, item in collected:
            kind = item.config.kind if isinstance(item, ProviderOffer) else item.kind
            if not registry.has_kind(kind):
                unknown_kind(
                    self._loader.failures, plugin, "ortplug_offer_providers", kind, registry
                )
                continue
            if isinstance(item, ProviderOffer) and not names_its_type(
                self._loader.failures, plugin, item, registry
            ):
                continue
            named = (
                attrs.evolve(item, plugin=plugin, place=registry.place(kind))
                if isinstance(item, ProviderOffer)
                else attrs.evolve(item, plugin=plugin)
            )
            answers.append(library_checked(named, registry) if self._real(host, plugin) else named)
        return answers

    def _real(self, host: HostCapabilities, plugin: str) -> bool:
        """Whether ``host`` is this host's detection with no override of ``plugin``'s probes.

        Only then does the core check an offered plugin-EP library for real: injected
        facts (``make_host``, ``ORTPLUG_OVERRIDE_*``) stand for the library in tests.
        """
        if not self._probes.detected(host):
            return False
        probes = [probe.name for owner, probe in self._loader.validated().probes if owner == plugin]
        return not any(probe_overridden(name, self._settings.overrides) for name in probes)

    def provider_chain(
        self,
        offers: Sequence[ProviderOffer],
        metadata: CheckpointMetadata,
        host: HostCapabilities,
    ) -> tuple[list[ProviderConfig], str | None]:
        """The first chain a ``ortplug_provider_chain`` implementation gives, and its plugin.

        Entries of unregistered kinds are dropped (a plugin failure).
        """
        from ._offer_checks import unknown_kind  # deferred, as in offer_providers

        hook_name = "ortplug_provider_chain"
        answer = self._hooks.first_result(hook_name, offers=offers, metadata=metadata, host=host)
        if answer is None:
            return [], None
        plugin, chain = answer
        registry = self.provider_registry()
        for config in chain:
            if not registry.has_kind(config.kind):
                unknown_kind(self._loader.failures, plugin, hook_name, config.kind, registry)
        return [config for config in chain if registry.has_kind(config.kind)], plugin

    def metadata_keys(self) -> dict[str, MetadataKey]:
        """The ``extra`` keys the plugins read, by name (the first declaration of a name wins).

        Those of declared plugins not imported come from their declarations.
        """
        keys: dict[str, MetadataKey] = {}
        for plugin, key in self._hooks.collect("ortplug_metadata_keys"):
            keys.setdefault(key.name, attrs.evolve(key, plugin=plugin))
        imported = [name for name, active in self._hooks.names() if active]
        declared = _manifest_types.declared_keys(
            self._loader.declarations, [*self._loader.pending(), *imported]
        )
        for key in declared:
            keys.setdefault(key.name, key)
        return keys

    def metadata_problems(self, metadata: CheckpointMetadata) -> list[str]:
        """Each ``extra`` key no plugin reads (with the closest declared one) or of the wrong type."""
        keys = self.metadata_keys()
        problems = []
        for name, value in metadata.extra.items():
            key = keys.get(name)
            if key is None:
                close = close_matches(name, list(keys))
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                known = ", ".join(sorted(keys)) or "none"
                problems.append(
                    f"metadata extra {name!r} is read by no installed plugin{hint}; known: {known}"
                )
            elif (problem := key.problem(value)) is not None:
                problems.append(problem)
        return problems

    def doctor_checks(self, host: HostCapabilities) -> list[DoctorCheck]:
        """Every plugin's doctor checks, tagged with the plugin name (every plugin is imported)."""
        self._loader.load_pending()
        return [
            attrs.evolve(check, plugin=plugin)
            for plugin, check in self._hooks.collect("ortplug_doctor_checks", host=host)
        ]

    def prepare_provider(
        self, config: ProviderConfig, checkpoint: ResolvedCheckpoint, host: HostCapabilities
    ) -> ProviderConfig:
        """Let the plugin that owns ``config.kind`` finish it (``ortplug_prepare_provider``).

        Only the owner is asked. A ``ValueError`` (the plugin rejecting the user's
        config for this checkpoint) or an ``OSError`` (an unusable cache directory)
        propagates: the user must fix it. Any other exception is a plugin failure.
        """
        owner = self.provider_registry().lookup(config.kind).plugin
        return self._hooks.fold(
            "ortplug_prepare_provider",
            config,
            only={owner},
            checkpoint=checkpoint,
            host=host,
        )

    def adjust_session_options(
        self,
        session_options: SessionOptionsConfig,
        chain: Sequence[ProviderConfig],
        metadata: CheckpointMetadata,
        host: HostCapabilities,
    ) -> SessionOptionsConfig:
        """Fold the options through the ``ortplug_adjust_session_options`` of the chain's plugins.

        Asked: the plugins that own a kind of the chain, the one that owns ``cpu`` (ONNX
        Runtime runs its CPU provider in every session) and the plugins that own no kind.
        """
        registry = self.provider_registry()
        kinds = {config.kind for config in chain} | {_CPU_KIND}
        owners = {registry.lookup(kind).plugin for kind in kinds if registry.has_kind(kind)}
        owning = registry.owners()  # a manifest plugin's kinds are declared, not hooked
        kindless = {name for name, _ in self._hooks.names() if name not in owning}
        return self._hooks.fold(
            "ortplug_adjust_session_options",
            session_options,
            only=owners | kindless,
            chain=chain,
            metadata=metadata,
            host=host,
        )


_default_host: PluginHost | None = None
_default_lock = threading.Lock()


def get_plugin_host() -> PluginHost:
    """The process-wide plugin host; entry points are discovered on first use, once."""
    global _default_host
    with _default_lock:
        if _default_host is None:
            _default_host = PluginHost()
        return _default_host


def resolve_plugin_host(plugins: PluginHost | None) -> PluginHost:
    """``plugins`` itself, or the process-wide host when ``None`` (the one place that decides)."""
    return get_plugin_host() if plugins is None else plugins


def parse_provider(value: object, *, plugins: PluginHost | None = None) -> ProviderConfig:
    """Parse one provider given as a config, a dict with ``kind``, a short or an ORT name.

    ``plugins`` is the plugin host whose registry knows the kinds (default: the process-wide one).
    """
    return resolve_plugin_host(plugins).provider_registry().parse(value)


def reset_plugin_host() -> None:
    """Forget the process-wide plugin host so the next use discovers plugins again."""
    from .first_party import _io_devices  # the installed plugins' device map goes with it

    global _default_host
    with _default_lock:
        _default_host = None
        _io_devices.cache_clear()
