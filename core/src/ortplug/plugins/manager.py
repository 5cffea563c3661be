"""``PluginHost``: discovers plugins through entry points, isolates their failures, calls their hooks."""

from __future__ import annotations

import importlib
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import pluggy

from ..errors import OrtplugPluginWarning
from ..host import HostCapabilities, compose_host
from ..providers import (
    ProviderConfig,
    ProviderRegistry,
    ProviderSpec,
    ProviderType,
    is_provider_config,
)
from . import hookspecs
from .types import (
    DoctorCheck,
    HostProbe,
    PluginFailure,
    PluginInfo,
    ProviderDecline,
    ProviderOffer,
)

if TYPE_CHECKING:
    from ..checkpoint import CheckpointMetadata, ResolvedCheckpoint
    from ..session_options import SessionOptionsConfig

__all__ = [
    "ENV_ALLOW",
    "ENV_DENY",
    "ENV_STRICT",
    "PluginHost",
    "get_plugin_host",
    "reset_plugin_host",
]

_T = TypeVar("_T")

ENV_ALLOW = "ORTPLUG_PLUGINS"
ENV_DENY = "ORTPLUG_DISABLE_PLUGINS"
ENV_STRICT = "ORTPLUG_STRICT_PLUGINS"

#: Plugins of the core itself, registered before entry points like any other plugin.
_BUILTIN_PLUGINS = ("ortplug.plugins._builtin",)


def _env_names(environ: Mapping[str, str], variable: str) -> frozenset[str] | None:
    raw = environ.get(variable)
    if raw is None:
        return None
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class PluginHost:
    """The set of plugins of one process (or one test) and a typed facade over their hooks.

    Entry points of group ``ortplug`` are read once, in :meth:`load_entry_points`;
    ``ORTPLUG_PLUGINS`` (allow-list) and ``ORTPLUG_DISABLE_PLUGINS`` (deny-list)
    of entry-point names apply before a plugin is imported. A plugin that fails
    to import, register or run a hook is reported once and skipped;
    ``ORTPLUG_STRICT_PLUGINS=1`` re-raises instead, for plugin authors.
    """

    def __init__(
        self,
        *,
        load_entry_points: bool = True,
        builtins: bool = True,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._environ = os.environ if environ is None else environ
        self._strict = self._environ.get(ENV_STRICT, "") not in ("", "0", "false", "no")
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._failures: dict[PluginFailure, None] = {}  # ordered set: each failure reported once
        self._distributions: dict[str, tuple[str, str]] = {}
        self._entry_points: dict[str, str] = {}  # name -> "module:attr" already seen
        self._lock = threading.RLock()
        self._registry: ProviderRegistry | None = None
        self._host: HostCapabilities | None = None
        if builtins:
            for module_name in _BUILTIN_PLUGINS:
                self.register(importlib.import_module(module_name), name=module_name)
        if load_entry_points:
            self.load_entry_points()

    # -- registration -------------------------------------------------------------------------

    def register(self, plugin: object, name: str) -> bool:
        """Register a plugin object (module, class instance) under ``name``; False if it failed."""
        with self._lock:
            try:
                self._check_no_wrappers(plugin)
                self._pm.register(plugin, name=name)
                self._pm.check_pending()
            except Exception as exc:
                if self._pm.get_plugin(name) is not None:
                    self._pm.unregister(name=name)
                self._fail(name, "registration", exc)
                return False
            self._invalidate()
            return True

    def unregister(self, name: str) -> None:
        """Remove a plugin; its providers, probes and offers disappear."""
        with self._lock:
            self._pm.unregister(name=name)
            self._invalidate()

    def load_entry_points(self) -> int:
        """Import and register the ``ortplug`` entry points the allow/deny lists let through."""
        from importlib.metadata import entry_points  # deferred: ~20 ms, only on discovery

        allow = _env_names(self._environ, ENV_ALLOW)
        deny = _env_names(self._environ, ENV_DENY) or frozenset()
        loaded = 0
        for entry_point in entry_points(group=hookspecs.PROJECT):
            name = entry_point.name
            dist = entry_point.dist
            if dist is not None and name not in self._distributions:
                self._distributions[name] = (dist.metadata["Name"], dist.version)
            if name in deny or (allow is not None and name not in allow):
                self._pm.set_blocked(name)
                continue
            seen = self._entry_points.setdefault(name, entry_point.value)
            if seen != entry_point.value:
                owner = f" of {dist.metadata['Name']}" if dist is not None else ""
                self._fail(
                    name,
                    "import",
                    ValueError(
                        f"entry point {name!r}{owner} ({entry_point.value}) is already taken by "
                        f"{seen!r}; uninstall one of the two distributions"
                    ),
                )
                continue
            if self._pm.has_plugin(name) or self._pm.is_blocked(name):
                continue  # loaded by an earlier call
            try:
                plugin = entry_point.load()
            except Exception as exc:
                self._fail(name, "import", exc)
                continue
            loaded += self.register(plugin, name=name)
        return loaded

    @staticmethod
    def _check_no_wrappers(plugin: object) -> None:
        for attr in dir(plugin):
            options = getattr(getattr(plugin, attr, None), f"{hookspecs.PROJECT}_impl", None)
            if options and (options.get("wrapper") or options.get("hookwrapper")):
                raise TypeError(
                    f"hook implementation {attr!r} is a wrapper; ortplug calls plugins one by "
                    "one and supports only tryfirst/trylast ordering"
                )

    def _invalidate(self) -> None:
        self._registry = None
        self._host = None

    def _fail(self, plugin: str, phase: str, exc: BaseException) -> None:
        if self._strict:
            raise exc
        dist = self._distributions.get(plugin)
        failure = PluginFailure(
            plugin=plugin,
            distribution=f"{dist[0]} {dist[1]}" if dist else None,
            phase=phase,
            error=_describe(exc),
        )
        if failure not in self._failures:
            self._failures[failure] = None
            warnings.warn(failure.message(), OrtplugPluginWarning, stacklevel=3)

    # -- introspection ------------------------------------------------------------------------

    @property
    def failures(self) -> tuple[PluginFailure, ...]:
        """Every distinct failure recorded so far, in order."""
        return tuple(self._failures)

    def plugin_names(self) -> list[str]:
        """Names of the registered (active) plugins."""
        return [name for name, plugin in self._pm.list_name_plugin() if plugin is not None]

    def plugin_infos(self) -> list[PluginInfo]:
        """Active, blocked and failed plugins with their distributions, for ``ortplug plugins``."""
        rows: dict[str, PluginInfo] = {}

        def row(
            name: str, status: str, hooks: tuple[str, ...] = (), error: str | None = None
        ) -> None:
            dist, version = self._distributions.get(name, (None, None))
            rows[name] = PluginInfo(name, dist, version, status, hooks, error)

        hooks_of: dict[str, tuple[str, ...]] = {}
        for name, plugin in self._pm.list_name_plugin():
            if plugin is None:
                row(name, "blocked")
            else:
                hooks_of[name] = tuple(
                    sorted(c.name for c in self._pm.get_hookcallers(plugin) or ())
                )
                row(name, "active", hooks_of[name])
        for failure in self._failures:  # the latest failure of a plugin is shown
            status = "active" if failure.plugin in hooks_of else "failed"
            error = f"{failure.phase}: {failure.error}"
            row(failure.plugin, status, hooks_of.get(failure.plugin, ()), error)
        return list(rows.values())

    # -- isolated hook calls ------------------------------------------------------------------

    def _impls(self, hook_name: str) -> list[Any]:
        """A hook's implementations in pluggy's call order (tryfirst first, trylast last)."""
        return list(reversed(getattr(self._pm.hook, hook_name).get_hookimpls()))

    def _call(
        self,
        impl: Any,
        hook_name: str,
        kwargs: Mapping[str, Any],
        propagate: tuple[type[BaseException], ...] = (),
    ) -> tuple[bool, Any]:
        """Call one implementation with the arguments it asks for; a failure is recorded.

        Exceptions of the ``propagate`` types are the user's to fix and are re-raised.
        """
        try:
            return True, impl.function(*(kwargs[arg] for arg in impl.argnames))
        except propagate:
            raise
        except Exception as exc:
            self._fail(impl.plugin_name, hook_name, exc)
            return False, None

    def _each(self, hook_name: str, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        """Call every implementation of a hook in order, isolating each one."""
        for impl in self._impls(hook_name):
            ok, result = self._call(impl, hook_name, kwargs)
            if ok:
                yield impl.plugin_name, result

    def _collect(
        self, hook_name: str, expected: tuple[type, ...], **kwargs: Any
    ) -> list[tuple[str, Any]]:
        """Materialize each plugin's iterable result, checking item types, isolating failures."""
        collected: list[tuple[str, Any]] = []
        for plugin, result in self._each(hook_name, **kwargs):
            if result is None:
                continue
            try:
                items = list(result)
                for item in items:
                    if not isinstance(item, expected):
                        names = " or ".join(t.__name__ for t in expected)
                        raise TypeError(f"expected {names} items, got {type(item).__name__}")
            except Exception as exc:
                self._fail(plugin, hook_name, exc)
                continue
            collected.extend((plugin, item) for item in items)
        return collected

    # -- typed facade -------------------------------------------------------------------------

    def provider_registry(self) -> ProviderRegistry:
        """Every provider type the plugins contribute (cached until plugins change)."""
        with self._lock:
            if self._registry is None:
                specs = [
                    ProviderSpec(type=ptype, plugin=plugin)
                    for plugin, ptype in self._collect("ortplug_provider_types", (ProviderType,))
                ]
                self._registry = ProviderRegistry(specs)
            return self._registry

    def host_probes(self) -> list[tuple[str, HostProbe]]:
        """``(plugin, probe)`` pairs contributed by the plugins."""
        return self._collect("ortplug_host_probes", (HostProbe,))

    def host_capabilities(self) -> HostCapabilities:
        """Run every probe once (isolated) and compose the host; cached until plugins change."""
        with self._lock:
            if self._host is None:
                self._host = compose_host(
                    [
                        (probe, self._run_probe(plugin, probe))
                        for plugin, probe in self.host_probes()
                    ],
                    environ=self._environ,
                )
            return self._host

    def _run_probe(self, plugin: str, probe: HostProbe) -> Mapping[str, object] | None:
        try:
            detected = probe.detect()
            if not isinstance(detected, Mapping):
                raise TypeError(f"expected a mapping of facts, got {type(detected).__name__}")
            return detected
        except Exception as exc:
            self._fail(plugin, f"host probe {probe.name!r}", exc)
            return None

    def offer_providers(
        self,
        metadata: CheckpointMetadata,
        host: HostCapabilities,
        checkpoint: ResolvedCheckpoint | None = None,
    ) -> list[ProviderOffer | ProviderDecline]:
        """Every plugin's offers and declines for this checkpoint here, tagged with the plugin."""
        return [
            attrs.evolve(item, plugin=plugin)
            for plugin, item in self._collect(
                "ortplug_offer_providers",
                (ProviderOffer, ProviderDecline),
                metadata=metadata,
                host=host,
                checkpoint=checkpoint,
            )
        ]

    def provider_chain(
        self,
        offers: Sequence[ProviderOffer],
        metadata: CheckpointMetadata,
        host: HostCapabilities,
    ) -> list[ProviderConfig]:
        """The first non-None chain from the ``ortplug_provider_chain`` implementations."""
        hook_name = "ortplug_provider_chain"
        for plugin, chain in self._each(hook_name, offers=offers, metadata=metadata, host=host):
            if chain is None:
                continue
            try:
                configs = list(chain)
                wrong = [c for c in configs if not is_provider_config(c)]
                if wrong:
                    raise TypeError(f"expected a list of provider configs, got {wrong!r} in it")
            except Exception as exc:
                self._fail(plugin, hook_name, exc)
                continue
            return configs
        return []

    def doctor_checks(self, host: HostCapabilities) -> list[DoctorCheck]:
        """Every plugin's doctor checks, tagged with the plugin name."""
        return [
            attrs.evolve(check, plugin=plugin)
            for plugin, check in self._collect("ortplug_doctor_checks", (DoctorCheck,), host=host)
        ]

    def prepare_provider(
        self, config: ProviderConfig, checkpoint: ResolvedCheckpoint, host: HostCapabilities
    ) -> ProviderConfig:
        """Fold one chain entry through every ``ortplug_prepare_provider`` implementation.

        A ``ValueError`` (the plugin rejecting the user's config for this
        checkpoint) or an ``OSError`` (an unusable cache directory) propagates:
        the user must fix it. Any other exception is a plugin failure.
        """
        return self._fold(
            "ortplug_prepare_provider",
            "config",
            config,
            lambda result: is_provider_config(result) and result.kind == config.kind,
            f"a {config.kind!r} provider config",
            propagate=(ValueError, OSError),
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
        """Fold the options through every ``ortplug_adjust_session_options`` implementation."""
        from ..session_options import SessionOptionsConfig

        return self._fold(
            "ortplug_adjust_session_options",
            "session_options",
            session_options,
            lambda result: isinstance(result, SessionOptionsConfig),
            "SessionOptionsConfig",
            chain=chain,
            metadata=metadata,
            host=host,
        )

    def _fold(
        self,
        hook_name: str,
        argument: str,
        value: _T,
        accepts: Callable[[Any], bool],
        expected: str,
        *,
        propagate: tuple[type[BaseException], ...] = (),
        **kwargs: Any,
    ) -> _T:
        """Pass ``value`` through every implementation in order; ``None`` keeps it, a wrong type is a failure."""
        for impl in self._impls(hook_name):
            ok, result = self._call(impl, hook_name, {argument: value, **kwargs}, propagate)
            if not ok or result is None:
                continue
            if accepts(result):
                value = result
            else:
                error = TypeError(f"expected {expected} or None, got {type(result).__name__}")
                self._fail(impl.plugin_name, hook_name, error)
        return value


_default_host: PluginHost | None = None
_default_lock = threading.Lock()


def get_plugin_host() -> PluginHost:
    """The process-wide plugin host; entry points are discovered on first use, once."""
    global _default_host
    with _default_lock:
        if _default_host is None:
            _default_host = PluginHost()
        return _default_host


def reset_plugin_host() -> None:
    """Forget the process-wide plugin host so the next use discovers plugins again."""
    global _default_host
    with _default_lock:
        _default_host = None
