"""``PluginHost``: discovers plugins through entry points, enforces their contract, calls their hooks.

Nothing a plugin does can take the host down: an exception of any kind but
``KeyboardInterrupt`` (``SystemExit`` included) in its import, registration,
hooks or probes is one :class:`~ortplug.errors.OrtplugPluginWarning` and the
plugin's contribution is left out; a probe past its deadline leaves its facts
unknown; a plugin claiming a provider kind, alias, ONNX Runtime name or probe
name another plugin registered first is skipped whole.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import os
import threading
import time
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import pluggy

from ..ep_libraries import devices_for, ensure_library
from ..errors import OrtplugPluginWarning, PluginError
from ..host import HostCapabilities, HostProbe, compose_host
from ..providers import ProviderConfig
from . import _entry_points, _probe_cache, hookspecs
from .hookspecs import CONTRACTS, MAX_ITEMS, CallMode, HookContract
from .registry import ProviderRegistry, ProviderSpec, ProviderType, _close_matches
from .types import (
    DoctorCheck,
    MetadataKey,
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
    "parse_provider",
    "reset_plugin_host",
    "resolve_plugin_host",
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
    """The exception type and its whole message on one line (pluggy's validation spans lines)."""
    text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _hook_implementations(plugin: object) -> dict[str, Any]:
    """The ``ortplug_*`` functions of a plugin object marked with ``@hookimpl``."""
    found = {}
    for attr in dir(plugin):
        if not attr.startswith(f"{hookspecs.PROJECT}_"):
            continue
        function = getattr(plugin, attr, None)
        if getattr(function, f"{hookspecs.PROJECT}_impl", None) is not None:
            found[attr] = function
    return found


def _check_contract(plugin: object) -> None:
    """Refuse what pluggy would accept but ortplug cannot call safely."""
    implementations = _hook_implementations(plugin)
    if not implementations:
        raise TypeError(
            f"{plugin!r} has no @hookimpl-marked ortplug_* function; a plugin implements at "
            f"least one of {', '.join(sorted(CONTRACTS))}"
        )
    for name, function in implementations.items():
        options = getattr(function, f"{hookspecs.PROJECT}_impl")
        if options.get("wrapper") or options.get("hookwrapper"):
            raise TypeError(
                f"hook implementation {name!r} is a wrapper; ortplug calls plugins one by "
                "one and supports only tryfirst/trylast ordering"
            )
        defaults = [
            parameter.name
            for parameter in inspect.signature(function).parameters.values()
            if parameter.default is not inspect.Parameter.empty
        ]
        if defaults:
            raise TypeError(
                f"hook implementation {name!r} gives argument(s) {defaults} a default; the "
                "host passes them by name, so remove the defaults"
            )


@attrs.define
class _ProbeRun:
    """One probe's run in its own thread; waited for at most until its deadline, once."""

    plugin: str
    probe: HostProbe
    started: float
    cache_key: str | None = None  # set for probes whose facts last across processes
    done: threading.Event = attrs.field(factory=threading.Event)
    facts: Mapping[str, object] | None = None
    error: BaseException | None = None
    settled: bool = False  # the outcome (facts, error or time-out) has been taken

    def run(self) -> None:
        try:
            detected = self.probe.detect()
            if not isinstance(detected, Mapping):
                raise TypeError(f"expected a mapping of facts, got {type(detected).__name__}")
            self.facts = detected
        except BaseException as exc:  # isolated: nothing a probe raises may escape its thread
            self.error = exc
        finally:
            self.done.set()


class PluginHost:
    """The set of plugins of one process (or one test) and a typed facade over their hooks.

    Entry points of group ``ortplug`` are read once, in :meth:`load_entry_points`;
    ``ORTPLUG_PLUGINS`` (allow-list) and ``ORTPLUG_DISABLE_PLUGINS`` (deny-list)
    of entry-point names apply before a plugin is imported. A plugin that fails
    to import, register or run a hook is reported once and skipped;
    ``ORTPLUG_STRICT_PLUGINS=1`` raises :class:`~ortplug.errors.PluginError` instead,
    for plugin authors.
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
        self._skipped: set[str] = set()  # plugins removed for claiming what another one has
        self._lock = threading.RLock()
        self._registry: ProviderRegistry | None = None
        self._probes: list[tuple[str, HostProbe]] | None = None
        self._probe_runs: dict[str, _ProbeRun] = {}
        self._hosts: dict[frozenset[str] | None, HostCapabilities] = {}
        if builtins:
            for module_name in _BUILTIN_PLUGINS:
                self.register(importlib.import_module(module_name), name=module_name)
        if load_entry_points:
            self.load_entry_points()

    # -- registration -------------------------------------------------------------------------

    def register(self, plugin: object, name: str) -> bool:
        """Register a plugin object (module, class instance) under ``name``; False if refused."""
        with self._lock:
            try:
                _check_contract(plugin)
                self._pm.register(plugin, name=name)
                self._pm.check_pending()
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                if self._pm.get_plugin(name) is not None:
                    self._pm.unregister(name=name)
                self._fail(name, "registration", exc)
                return False
            self._skipped.discard(name)
            self._invalidate()
            return True

    def unregister(self, name: str) -> None:
        """Remove a plugin; its providers, probes and offers disappear."""
        with self._lock:
            self._pm.unregister(name=name)
            self._invalidate()

    def load_entry_points(self) -> int:
        """Import and register the ``ortplug`` entry points the allow/deny lists let through."""
        allow = _env_names(self._environ, ENV_ALLOW)
        deny = _env_names(self._environ, ENV_DENY) or frozenset()
        loaded = 0
        for entry_point in _entry_points.discover(hookspecs.PROJECT):
            name = entry_point.name
            if entry_point.distribution is not None and name not in self._distributions:
                self._distributions[name] = (entry_point.distribution, entry_point.version or "")
            if name in deny or (allow is not None and name not in allow):
                self._pm.set_blocked(name)
                continue
            seen = self._entry_points.get(name)
            if seen is not None and seen != entry_point.value:
                owner = f" of {entry_point.distribution}" if entry_point.distribution else ""
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
            if entry_point.distribution is not None:  # failures name the one being tried
                self._distributions[name] = (entry_point.distribution, entry_point.version or "")
            try:
                plugin = entry_point.load()
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # a broken entry point does not take the name
                self._fail(name, "import", exc)
                continue
            if self.register(plugin, name=name):
                self._entry_points[name] = entry_point.value
                loaded += 1
        return loaded

    def _invalidate(self) -> None:
        self._registry = None
        self._probes = None
        self._hosts.clear()

    def _fail(self, plugin: str, phase: str, exc: BaseException) -> None:
        failure = PluginFailure(
            plugin=plugin,
            distribution=self._distribution(plugin),
            phase=phase,
            error=_describe(exc),
        )
        if self._strict:
            raise PluginError(plugin, phase, failure.error) from exc
        if failure not in self._failures:
            self._failures[failure] = None
            warnings.warn(failure.message(), OrtplugPluginWarning, stacklevel=3)

    def _distribution(self, plugin: str) -> str | None:
        dist = self._distributions.get(plugin)
        return f"{dist[0]} {dist[1]}" if dist else None

    # -- introspection ------------------------------------------------------------------------

    @property
    def failures(self) -> tuple[PluginFailure, ...]:
        """Every distinct failure recorded so far, in order."""
        self._validated()
        return tuple(self._failures)

    def plugin_names(self) -> list[str]:
        """Names of the registered (active) plugins."""
        self._validated()
        return [name for name, plugin in self._pm.list_name_plugin() if plugin is not None]

    def plugin_infos(self) -> list[PluginInfo]:
        """Active, blocked and failed plugins with their distributions, for ``ortplug plugins``."""
        self._validated()
        rows: dict[str, PluginInfo] = {}

        def row(
            name: str, status: str, hooks: tuple[str, ...] = (), error: str | None = None
        ) -> None:
            dist, version = self._distributions.get(name, (None, None))
            rows[name] = PluginInfo(name, dist, version, status, hooks, error)

        hooks_of: dict[str, tuple[str, ...]] = {}
        for name, plugin in self._pm.list_name_plugin():
            if plugin is None:
                if name not in self._skipped:
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

    # -- claims: provider names and probe names are each one plugin's -------------------------

    def _validated(self) -> tuple[ProviderRegistry, list[tuple[str, HostProbe]]]:
        """Provider types and probes of the plugins whose claims do not collide (cached).

        Plugins are taken in registration order; one that claims a kind, alias,
        ONNX Runtime name or probe name an earlier plugin holds is skipped whole.
        """
        with self._lock:
            if self._registry is not None and self._probes is not None:
                return self._registry, self._probes
            order = {name: i for i, (name, _) in enumerate(self._pm.list_name_plugin())}
            by_registration = lambda pair: order.get(pair[0], len(order))  # noqa: E731
            types = sorted(self._collect("ortplug_provider_types"), key=by_registration)
            probes = sorted(self._collect("ortplug_host_probes"), key=by_registration)
            owners: dict[str, tuple[str, int]] = {}  # claimed name -> (plugin, item index)
            skipped: set[str] = set()
            claims = [(p, i, n) for i, (p, t) in enumerate(types) for n in _provider_names(t)]
            claims += [(p, i, f"probe name {probe.name!r}") for i, (p, probe) in enumerate(probes)]
            for plugin, index, claim in claims:
                owner, owner_index = owners.setdefault(claim, (plugin, index))
                if (owner, owner_index) != (plugin, index) and not {plugin, owner} & skipped:
                    skipped.add(plugin)
                    self._skip(plugin, claim, owner)
            self._registry = ProviderRegistry(
                ProviderSpec(type=t, plugin=p) for p, t in types if p not in skipped
            )
            self._probes = [(p, probe) for p, probe in probes if p not in skipped]
            return self._registry, self._probes

    def _skip(self, plugin: str, claim: str, owner: str) -> None:
        theirs = self._distribution(owner) or "the core"
        ours = self._distribution(plugin) or "no distribution"
        error = ValueError(
            f"{claim} is already claimed by plugin {owner!r} ({theirs}); this plugin ({ours}) "
            "is skipped: uninstall one of the two"
        )
        self._pm.unregister(name=plugin)
        self._pm.set_blocked(plugin)
        self._skipped.add(plugin)
        self._fail(plugin, "provider and probe names", error)

    # -- the one call path --------------------------------------------------------------------

    def _impls(self, hook_name: str) -> list[Any]:
        """A hook's implementations in pluggy's call order (tryfirst first, trylast last)."""
        return list(reversed(getattr(self._pm.hook, hook_name).get_hookimpls()))

    def _call_one(
        self, impl: Any, hook_name: str, kwargs: Mapping[str, Any], contract: HookContract
    ) -> tuple[bool, Any]:
        """Call one implementation with the arguments it asks for; a failure is recorded."""
        try:
            return True, impl.function(*(kwargs[arg] for arg in impl.argnames))
        except contract.propagate:
            raise
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._fail(impl.plugin_name, hook_name, exc)
            return False, None

    def _items(
        self, plugin: str, hook_name: str, result: Any, contract: HookContract
    ) -> list[Any] | None:
        """At most ``MAX_ITEMS`` of an iterable answer, each of the contract's item types.

        ``None`` when the answer is malformed (reported as a failure of ``plugin``).
        """
        try:
            items = list(itertools.islice(iter(result), MAX_ITEMS + 1))
            wrong = [item for item in items if not isinstance(item, contract.items)]
            if wrong:
                raise TypeError(
                    f"expected {contract.describe_items()} items, got {type(wrong[0]).__name__}"
                )
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._fail(plugin, hook_name, exc)
            return None
        if len(items) > MAX_ITEMS:
            error = ValueError(f"yielded more than {MAX_ITEMS} items; the first {MAX_ITEMS} kept")
            self._fail(plugin, hook_name, error)
            items = items[:MAX_ITEMS]
        return items

    def _collect(self, hook_name: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Every plugin's items, ``(plugin, item)``, in hook order."""
        contract = CONTRACTS[hook_name]
        collected: list[tuple[str, Any]] = []
        for impl in self._impls(hook_name):
            ok, result = self._call_one(impl, hook_name, kwargs, contract)
            if ok and result is not None:
                items = self._items(impl.plugin_name, hook_name, result, contract) or []
                collected.extend((impl.plugin_name, item) for item in items)
        return collected

    def _first_result(self, hook_name: str, **kwargs: Any) -> tuple[str, list[Any]] | None:
        """The first non-``None`` answer, ``(plugin, items)``; a malformed one counts as none."""
        contract = CONTRACTS[hook_name]
        for impl in self._impls(hook_name):
            ok, result = self._call_one(impl, hook_name, kwargs, contract)
            if ok and result is not None:
                items = self._items(impl.plugin_name, hook_name, result, contract)
                if items is not None:
                    return impl.plugin_name, items
        return None

    def _fold(self, hook_name: str, value: _T, **kwargs: Any) -> _T:
        """Pass ``value`` through every implementation; ``None`` keeps it, a wrong type is a failure."""
        contract = CONTRACTS[hook_name]
        argument = str(contract.fold_argument)
        for impl in self._impls(hook_name):
            ok, result = self._call_one(impl, hook_name, {argument: value, **kwargs}, contract)
            if not ok or result is None:
                continue
            problem = contract.check(value, result) if contract.check else None
            if problem is None:
                value = result
            else:
                self._fail(impl.plugin_name, hook_name, TypeError(problem))
        return value

    def call(self, hook_name: str, **kwargs: Any) -> Any:
        """Call a hook the way its contract declares (collect, first result or fold).

        A fold takes its value as the keyword named by the contract's ``fold_argument``.
        """
        contract = CONTRACTS[hook_name]
        if contract.mode is CallMode.FOLD:
            value = kwargs.pop(str(contract.fold_argument))
            return self._fold(hook_name, value, **kwargs)
        caller = {CallMode.COLLECT: self._collect, CallMode.FIRST_RESULT: self._first_result}
        return caller[contract.mode](hook_name, **kwargs)

    # -- typed facade -------------------------------------------------------------------------

    def provider_registry(self) -> ProviderRegistry:
        """Every provider type the plugins contribute (cached until plugins change)."""
        return self._validated()[0]

    def host_probes(self) -> list[tuple[str, HostProbe]]:
        """``(plugin, probe)`` pairs contributed by the plugins."""
        return list(self._validated()[1])

    def host_capabilities(self, kinds: Collection[str] | None = None) -> HostCapabilities:
        """The host as the probes see it (cached); ``kinds``: only the probes those providers need.

        A provider kind needs the probes of the plugin that contributed it. Each
        probe runs once per plugin host, all of them in parallel, each waited for
        until its own deadline.
        """
        registry, probes = self._validated()
        plugins = (
            None
            if kinds is None
            else frozenset(spec.plugin for spec in registry.specs() if spec.type.kind in kinds)
        )
        with self._lock:
            host = self._hosts.get(plugins)
            if host is not None:
                return host
            needed = [(p, probe) for p, probe in probes if plugins is None or p in plugins]
            runs = [self._start_probe(plugin, probe) for plugin, probe in needed]
            results = [(run.probe, self._settle(run)) for run in runs]
            host = compose_host(results, environ=self._environ)
            self._hosts[plugins] = host
            return host

    def _start_probe(self, plugin: str, probe: HostProbe) -> _ProbeRun:
        """The probe's run in this host: started now, or taken from the cross-process cache."""
        run = self._probe_runs.get(probe.name)
        if run is not None and run.probe is probe:
            return run
        version = self._distributions.get(plugin, (None, None))[1]
        run = _ProbeRun(
            plugin, probe, time.monotonic(), _probe_cache.entry_key(probe, plugin, version)
        )
        self._probe_runs[probe.name] = run
        cached = _probe_cache.load(run.cache_key) if run.cache_key else None
        if cached is not None:
            run.facts = cached
            run.settled = True  # nothing to report or store
            run.done.set()
        else:
            thread = threading.Thread(
                target=run.run, name=f"ortplug-probe-{probe.name}", daemon=True
            )
            thread.start()
        return run

    def refresh_probes(self) -> int:
        """Forget every probe result (and the remembered plugin scan) across processes.

        Probes run again; returns how many cached entries were removed (``ortplug info --refresh``).
        """
        with self._lock:
            self._probe_runs.clear()
            self._hosts.clear()
            return _probe_cache.clear() + _entry_points.clear()

    def _settle(self, run: _ProbeRun) -> Mapping[str, object] | None:
        """The probe's facts, waiting at most until its deadline; failures reported once."""
        remaining = run.probe.timeout - (time.monotonic() - run.started)
        if not run.settled:
            finished = run.done.wait(max(0.0, remaining))
            run.settled = True
            phase = f"host probe {run.probe.name!r}"
            if not finished:
                error = TimeoutError(
                    f"no answer within {run.probe.timeout:g} s; its facts are unknown "
                    "(raise HostProbe.timeout if the probe is legitimately slow)"
                )
                self._fail(run.plugin, phase, error)
            elif run.error is not None:
                self._fail(run.plugin, phase, run.error)
            elif run.cache_key is not None and run.facts is not None:
                _probe_cache.store(run.cache_key, run.facts)
        return run.facts if run.done.is_set() and run.error is None else None

    def offer_providers(
        self,
        metadata: CheckpointMetadata,
        host: HostCapabilities,
        checkpoint: ResolvedCheckpoint | None = None,
    ) -> list[ProviderOffer | ProviderDecline]:
        """Every plugin's offers and declines for this checkpoint here, tagged with the plugin.

        The core's own checks apply: an item for a kind no plugin registered is
        dropped (a plugin failure), and an offer of a plugin-EP provider whose
        library does not load or offers no device becomes a decline with the reason.
        """
        registry = self.provider_registry()
        answers: list[ProviderOffer | ProviderDecline] = []
        collected = self._collect(
            "ortplug_offer_providers", metadata=metadata, host=host, checkpoint=checkpoint
        )
        for plugin, item in collected:
            kind = item.config.kind if isinstance(item, ProviderOffer) else item.kind
            if not registry.has_kind(kind):
                self._unknown_kind(plugin, "ortplug_offer_providers", kind, registry)
                continue
            answers.append(_library_checked(attrs.evolve(item, plugin=plugin), registry))
        return answers

    def _unknown_kind(
        self, plugin: str, hook_name: str, kind: str, registry: ProviderRegistry
    ) -> None:
        known = ", ".join(registry.kinds()) or "none"
        error = ValueError(
            f"provider kind {kind!r} is not registered by any plugin (registered: {known}); "
            "contribute it with ortplug_provider_types"
        )
        self._fail(plugin, hook_name, error)

    def provider_chain(
        self,
        offers: Sequence[ProviderOffer],
        metadata: CheckpointMetadata,
        host: HostCapabilities,
    ) -> tuple[list[ProviderConfig], str | None]:
        """The first chain a ``ortplug_provider_chain`` implementation gives, and its plugin.

        Entries of unregistered kinds are dropped (a plugin failure).
        """
        hook_name = "ortplug_provider_chain"
        answer = self._first_result(hook_name, offers=offers, metadata=metadata, host=host)
        if answer is None:
            return [], None
        plugin, chain = answer
        registry = self.provider_registry()
        for config in chain:
            if not registry.has_kind(config.kind):
                self._unknown_kind(plugin, hook_name, config.kind, registry)
        return [config for config in chain if registry.has_kind(config.kind)], plugin

    def metadata_keys(self) -> dict[str, MetadataKey]:
        """The ``extra`` keys the plugins read, by name (the first declaration of a name wins)."""
        keys: dict[str, MetadataKey] = {}
        for plugin, key in self._collect("ortplug_metadata_keys"):
            keys.setdefault(key.name, attrs.evolve(key, plugin=plugin))
        return keys

    def metadata_problems(self, metadata: CheckpointMetadata) -> list[str]:
        """Each ``extra`` key no plugin reads (with the closest declared one) or of the wrong type."""
        keys = self.metadata_keys()
        problems = []
        for name, value in metadata.extra.items():
            key = keys.get(name)
            if key is None:
                close = _close_matches(name, list(keys))
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                known = ", ".join(sorted(keys)) or "none"
                problems.append(
                    f"metadata extra {name!r} is read by no installed plugin{hint}; known: {known}"
                )
            elif (problem := key.problem(value)) is not None:
                problems.append(problem)
        return problems

    def doctor_checks(self, host: HostCapabilities) -> list[DoctorCheck]:
        """Every plugin's doctor checks, tagged with the plugin name."""
        return [
            attrs.evolve(check, plugin=plugin)
            for plugin, check in self._collect("ortplug_doctor_checks", host=host)
        ]

    def prepare_provider(
        self, config: ProviderConfig, checkpoint: ResolvedCheckpoint, host: HostCapabilities
    ) -> ProviderConfig:
        """Fold one chain entry through every ``ortplug_prepare_provider`` implementation.

        A ``ValueError`` (the plugin rejecting the user's config for this
        checkpoint) or an ``OSError`` (an unusable cache directory) propagates:
        the user must fix it. Any other exception is a plugin failure.
        """
        prepared: ProviderConfig = self.call(
            "ortplug_prepare_provider", config=config, checkpoint=checkpoint, host=host
        )
        return prepared

    def adjust_session_options(
        self,
        session_options: SessionOptionsConfig,
        chain: Sequence[ProviderConfig],
        metadata: CheckpointMetadata,
        host: HostCapabilities,
    ) -> SessionOptionsConfig:
        """Fold the options through every ``ortplug_adjust_session_options`` implementation."""
        adjusted: SessionOptionsConfig = self.call(
            "ortplug_adjust_session_options",
            session_options=session_options,
            chain=chain,
            metadata=metadata,
            host=host,
        )
        return adjusted


def _provider_names(ptype: ProviderType) -> Iterator[str]:
    """What a provider type claims: its kind, aliases and ONNX Runtime name (case-insensitive)."""
    for name in sorted({n.lower() for n in (ptype.kind, *ptype.aliases, ptype.ort_name)}):
        yield f"provider name {name!r}"


def _library_checked(
    item: ProviderOffer | ProviderDecline, registry: ProviderRegistry
) -> ProviderOffer | ProviderDecline:
    """An offer of a plugin-EP provider whose library cannot run here, as a decline."""
    if not isinstance(item, ProviderOffer):
        return item
    library = registry.library_of(item.config.kind)
    if library is None:
        return item
    ort_name = item.config.to_ort()[0]
    problem = ensure_library(library).problem()
    if problem is None and not devices_for(ort_name):
        problem = f"{ort_name} offers no device on this host"
    if problem is None:
        return item
    return ProviderDecline(item.config.kind, f"{problem} (checked by ortplug)", item.plugin)


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
    global _default_host
    with _default_lock:
        _default_host = None
