"""``PluginHost``: discovers plugins through entry points, enforces their contract, calls their hooks.

Nothing a plugin does can take the host down: an exception of any kind but
``KeyboardInterrupt`` (``SystemExit`` included) in its import, registration,
hooks or probes is one :class:`~ortplug.errors.OrtplugPluginWarning` and the
plugin's contribution is left out; a probe past its deadline leaves its facts
unknown; a plugin claiming a provider kind, alias, ONNX Runtime name or probe
name another plugin holds is skipped whole (this project's shipped plugins
first, then the others in registration order).

A plugin that declares what it provides (:mod:`ortplug.plugins.declaration`) is
imported only when one of its kinds can be part of what is asked: a provider name
that it declares is looked up, or a build's kinds are gathered and its declared
platforms and required probe facts (a host's, or the cached ones) do not rule it
out. A plugin without a declaration is imported at every start.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import os
import sys
import threading
import time
import warnings
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import pluggy

from ..errors import OrtplugPluginWarning, PluginConflictError, PluginError
from ..host.capabilities import (
    HostCapabilities,
    HostProbe,
    base_fact,
    compose_host,
    facts_problem,
    probe_overridden,
)
from ..host.ep_libraries import devices_for, ensure_library
from ..providers.configs import ProviderConfig
from . import _declared, _entry_points, _manifest_types, _probe_cache, hookspecs
from .declaration import DeclarationError, PluginDeclaration, from_json, source_of
from .first_party import shipped_distributions
from .hookspecs import CONTRACTS, MAX_ITEMS, CallMode, HookContract
from .registry import (
    ProviderRegistry,
    ProviderSpec,
    ProviderType,
    _close_matches,
)
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
    from ..providers.session_options import SessionOptionsConfig

__all__ = [
    "ENV_ALLOW",
    "ENV_DENY",
    "ENV_STRICT",
    "PluginHost",
    "blocked_by",
    "get_plugin_host",
    "parse_provider",
    "reset_plugin_host",
    "resolve_plugin_host",
]

_T = TypeVar("_T")

ENV_ALLOW = "ORTPLUG_PLUGINS"
ENV_DENY = "ORTPLUG_DISABLE_PLUGINS"
ENV_STRICT = "ORTPLUG_STRICT_PLUGINS"

#: Plugins of the core itself by name (what ``ortplug plugins`` shows) and module, registered
#: before entry points like any other plugin.
_BUILTIN_PLUGINS = {"ortplug": "ortplug.plugins._builtin"}
#: The kind whose plugin adjusts every session's options: ONNX Runtime runs its CPU provider in all.
_CPU_KIND = "cpu"
#: What ``ortplug plugins`` says of a plugin without a declaration (with its import time).
UNDECLARED_NOTE = (
    "no declaration: imported at every start ({ms:.0f} ms here); ship an ortplug.json beside "
    "the package (see ortplug.plugins.declaration)"
)
#: A declared plugin whose import takes this long says so in ``ortplug plugins``.
SLOW_IMPORT_MS = 100.0


def _env_names(environ: Mapping[str, str], variable: str) -> frozenset[str] | None:
    raw = environ.get(variable)
    if raw is None:
        return None
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def blocked_by(name: str, environ: Mapping[str, str]) -> str | None:
    """The setting that keeps entry point ``name`` out (``ORTPLUG_DISABLE_PLUGINS=cpu``, or an
    ``ORTPLUG_PLUGINS`` that does not list it), ``None`` when it is let in."""
    allow = _env_names(environ, ENV_ALLOW)
    if name in (_env_names(environ, ENV_DENY) or ()):
        return f"{ENV_DENY}={environ.get(ENV_DENY, '')}"
    if allow is not None and name not in allow:
        return f"{ENV_ALLOW}={environ.get(ENV_ALLOW, '')}"
    return None


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
            problem = facts_problem(detected)
            if problem is not None:  # kept, cached and printed as JSON: nothing else is a fact
                raise TypeError(problem)
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
        self._declarations: dict[str, PluginDeclaration] = {}  # every allowed entry point's
        self._pending: dict[str, _entry_points.PluginEntryPoint] = {}  # declared, not imported
        self._undeclared: set[str] = set()  # entry points imported for want of a declaration
        self._import_ms: dict[str, float] = {}  # entry point -> how long its import took
        # plugin -> the allow/deny setting that blocked it ("ORTPLUG_PLUGINS=cpu"), its declaration
        self._env_blocked: dict[str, tuple[str, PluginDeclaration | None]] = {}
        self._cached_facts: dict[str, Mapping[str, object] | None] = {}  # declared probe -> facts
        self._lock = threading.RLock()
        self._registry: ProviderRegistry | None = None
        self._probes: list[tuple[str, HostProbe]] | None = None
        self._probe_runs: dict[str, _ProbeRun] = {}
        self._hosts: dict[frozenset[str] | None, HostCapabilities] = {}
        self._composed: list[HostCapabilities] = []  # every host this one detected (kept alive)
        if builtins:
            for name, module_name in _BUILTIN_PLUGINS.items():
                self.register(importlib.import_module(module_name), name=name)
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
            if name not in self._declarations:  # registered directly: its package's manifest
                declared = _manifest_types.declaration_of(plugin, name)
                if declared is not None:
                    self._declarations[name] = declared
            self._invalidate()
            return True

    def unregister(self, name: str) -> None:
        """Remove a plugin; its providers, probes and offers disappear."""
        with self._lock:
            self._pm.unregister(name=name)
            self._invalidate()

    def load_entry_points(self) -> int:
        """Register the ``ortplug`` entry points the allow/deny lists let through.

        A declared plugin is remembered and imported when it is in play; one without a
        declaration is imported now. Returns how many were imported.
        """
        loaded = 0
        for entry_point in _entry_points.discover(hookspecs.PROJECT):
            name = entry_point.name
            if entry_point.distribution is not None and name not in self._distributions:
                self._distributions[name] = (entry_point.distribution, entry_point.version or "")
            setting = blocked_by(name, self._environ)
            if setting is not None:
                self._env_blocked[name] = (setting, self._declaration(entry_point, quiet=True))
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
            if self._pm.has_plugin(name) or self._pm.is_blocked(name) or name in self._pending:
                continue  # loaded by an earlier call
            declaration = self._declaration(entry_point)
            if declaration is not None:
                self._declarations[name] = declaration
                self._pending[name] = entry_point
                self._entry_points[name] = entry_point.value
                continue
            self._undeclared.add(name)
            if self._import(entry_point):  # a broken entry point does not take the name
                self._entry_points[name] = entry_point.value
                loaded += 1
        self._invalidate()
        return loaded

    def _declaration(
        self, entry_point: _entry_points.PluginEntryPoint, *, quiet: bool = False
    ) -> PluginDeclaration | None:
        """The entry point's checked declaration; a broken one is a failure (unless ``quiet``)."""
        try:
            if entry_point.declaration_error is not None:
                raise DeclarationError(entry_point.declaration_error)
            if entry_point.declaration is None:
                return None
            source = source_of(entry_point.value)
            return from_json(entry_point.name, entry_point.declaration, source)
        except DeclarationError as exc:
            if not quiet:
                self._fail(entry_point.name, "declaration", exc)
            return None

    def _import(self, entry_point: _entry_points.PluginEntryPoint) -> bool:
        """Import and register one entry point's plugin; a declared one must keep its word."""
        name = entry_point.name
        started = time.perf_counter()
        try:
            plugin = entry_point.load()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._fail(name, "import", exc)
            return False
        finally:
            self._import_ms[name] = (time.perf_counter() - started) * 1e3
        if not self.register(plugin, name=name):
            return False
        declaration = self._declarations.get(name)
        problem = None if declaration is None else self._broken_promise(name, declaration)
        if problem is not None:
            self._pm.unregister(name=name)
            self._pm.set_blocked(name)
            self._invalidate()
            self._fail(name, "declaration", ValueError(problem))
            return False
        return True

    def _broken_promise(self, name: str, declaration: PluginDeclaration) -> str | None:
        """How the freshly imported plugin differs from its declaration, if it does."""
        plugin = self._pm.get_plugin(name)
        hooks = [c.name for c in self._pm.get_hookcallers(plugin) or ()]
        only = frozenset({name})
        return _declared.broken_promise(
            declaration,
            (t for _, t in self._collect("ortplug_provider_types", only=only)),
            (p for _, p in self._collect("ortplug_host_probes", only=only)),
            hooks,
            (k for _, k in self._collect("ortplug_metadata_keys", only=only)),
        )

    def _load_pending(self, names: Iterable[str] | None = None) -> None:
        """Import declared plugins (``None``: every one not imported yet)."""
        with self._lock:
            self._validated()  # a plugin that lost a claim is not imported
            wanted = list(self._pending) if names is None else list(names)
            for name in wanted:
                entry_point = self._pending.pop(name, None)
                if entry_point is not None:
                    self._import(entry_point)

    def _load_for(self, plugin: str | None) -> ProviderRegistry:
        """The registry after importing one declared plugin (``None``: all of them)."""
        self._load_pending(None if plugin is None else [plugin])
        return self._validated()[0]

    def _platform(self, host: HostCapabilities | None) -> str:
        if host is not None:
            return host.platform
        return base_fact("platform", sys.platform, self._environ)

    def _facts_of(self, host: HostCapabilities | None) -> _declared.FactsOf:
        """A probe's known facts: the host's, else the cached ones of a declared probe."""

        def facts_of(probe: str) -> Mapping[str, object] | None:
            if host is not None and probe in host.facts:
                return host.facts[probe]
            return self._cached(probe)

        return facts_of

    def _cached(self, probe: str) -> Mapping[str, object] | None:
        """A declared probe's facts from the cross-process cache (``None``: unknown or overridden)."""
        if probe in self._cached_facts:
            return self._cached_facts[probe]
        facts = None
        owner = self._probe_declaration(probe)
        if owner is not None and not probe_overridden(probe, self._environ):
            plugin, declared = owner
            version = self._distributions.get(plugin, (None, None))[1]
            stub = _declared.probe_stub(declared)
            key = _probe_cache.entry_key(stub, plugin, version)
            facts = _probe_cache.load(key, stub) if key is not None else None
        self._cached_facts[probe] = facts
        return facts

    def _probe_declaration(self, probe: str) -> tuple[str, Any] | None:
        for plugin, declaration in self._declarations.items():
            for declared in declaration.probes:
                if declared.name == probe:
                    return plugin, declared
        return None

    def _ruled_out(self, host: HostCapabilities | None) -> dict[str, dict[str, str]]:
        """Declared plugins not imported whose every kind is ruled out here, with the reasons."""
        platform, facts_of = self._platform(host), self._facts_of(host)
        found = {}
        for name in list(self._pending):
            reasons = _declared.ruled_out(self._declarations[name], platform, facts_of)
            if reasons is not None:
                found[name] = reasons
        return found

    def _load_in_play(self, host: HostCapabilities | None) -> dict[str, dict[str, str]]:
        """Import the declared plugins that may take part here; the ruled-out ones, with reasons."""
        with self._lock:
            self._validated()
            out = self._ruled_out(host)
            self._load_pending([name for name in self._pending if name not in out])
            return {name: reasons for name, reasons in out.items() if name in self._pending}

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

    def _from(self, plugin: str) -> str:
        """``ortplug-acme 1.0`` (its distribution), or ``no distribution`` (registered directly)."""
        return self._distribution(plugin) or "no distribution"

    def _distribution(self, plugin: str) -> str | None:
        dist = self._distributions.get(plugin)
        return f"{dist[0]} {dist[1]}" if dist else None

    # -- introspection ------------------------------------------------------------------------

    @property
    def failures(self) -> tuple[PluginFailure, ...]:
        """Every distinct failure recorded so far, in order (every declared plugin is imported)."""
        self._load_pending()
        return tuple(self._failures)

    def plugin_names(self) -> list[str]:
        """Names of the registered (active) plugins (every declared plugin is imported)."""
        self._load_pending()
        return [name for name, plugin in self._pm.list_name_plugin() if plugin is not None]

    def blocked_by(self) -> dict[str, str]:
        """Each installed plugin that ``ORTPLUG_PLUGINS`` / ``ORTPLUG_DISABLE_PLUGINS`` kept out,
        with the setting that did (``{"cpu": "ORTPLUG_PLUGINS=nosuch"}``)."""
        return {name: setting for name, (setting, _) in self._env_blocked.items()}

    def plugin_infos(self) -> list[PluginInfo]:
        """Active, blocked and failed plugins with their distributions, for ``ortplug plugins``.

        Every declared plugin is imported; one without a declaration carries a note saying so.
        """
        self._load_pending()
        rows: dict[str, PluginInfo] = {}

        def row(
            name: str, status: str, hooks: tuple[str, ...] = (), error: str | None = None
        ) -> None:
            dist, version = self._distributions.get(name, (None, None))
            rows[name] = PluginInfo(name, dist, version, status, hooks, error, self._note(name))

        hooks_of: dict[str, tuple[str, ...]] = {}
        for name, plugin in self._pm.list_name_plugin():
            if plugin is None:
                if name not in self._skipped:
                    setting, _ = self._env_blocked.get(name, (None, None))
                    row(name, "blocked", error=f"blocked by {setting}" if setting else None)
            else:
                hooks_of[name] = tuple(
                    sorted(c.name for c in self._pm.get_hookcallers(plugin) or ())
                )
                row(name, "active", hooks_of[name])
        for failure in self._failures:  # the latest failure of a plugin is shown
            status = "failing" if failure.plugin in hooks_of else "failed"
            error = f"{failure.phase}: {failure.error}"
            row(failure.plugin, status, hooks_of.get(failure.plugin, ()), error)
        return list(rows.values())

    def holding_declarations(self) -> list[tuple[PluginDeclaration, bool]]:
        """The declarations of the plugins that hold what they claim, each naming the
        distribution it is installed from, and whether that is one of this project's.

        Every declared plugin is imported and the claims settled first; a plugin blocked by
        ``ORTPLUG_PLUGINS`` / ``ORTPLUG_DISABLE_PLUGINS``, skipped for a name the core or an
        earlier plugin claims, or failed (its import, a broken promise, a hook) is left out:
        what ``doctor`` may propose to install comes only from plugins this host lets in.
        """
        with self._lock:
            self._load_pending()
            self._validated()
            failed = {failure.plugin for failure in self._failures}
            return [
                (
                    attrs.evolve(
                        declaration,
                        distribution=self._distributions.get(name, (declaration.distribution,))[0],
                    ),
                    self._is_shipped(name),
                )
                for name, declaration in self._declarations.items()
                if self._pm.get_plugin(name) is not None and name not in failed
            ]

    def _note(self, plugin: str) -> str | None:
        """What ``ortplug plugins`` adds about a plugin's start-up: no declaration, a slow import."""
        ms = self._import_ms.get(plugin)
        if plugin in self._undeclared:
            return UNDECLARED_NOTE.format(ms=ms or 0.0)
        if ms is not None and ms >= SLOW_IMPORT_MS:
            return f"its import takes {ms:.0f} ms, paid by each process where it is in play"
        return None

    # -- claims: provider names and probe names are each one plugin's -------------------------

    def _is_shipped(self, plugin: str) -> bool:
        """Whether ``plugin`` comes from one of this project's distributions (or is the core's)."""
        if plugin in _BUILTIN_PLUGINS:
            return True
        dist = self._distributions.get(plugin)
        if dist is not None:
            return dist[0] in shipped_distributions()
        module = getattr(self._pm.get_plugin(plugin), "__name__", "")
        return module.partition(".")[0].replace("_", "-") in shipped_distributions()

    def _validated(self) -> tuple[ProviderRegistry, list[tuple[str, HostProbe]]]:
        """Provider types and probes of the plugins whose claims do not collide (cached).

        Claims are taken shipped plugins first, then in registration order (a declared
        plugin not imported yet claims what it declares); one that claims a kind,
        alias, ONNX Runtime name or probe name another plugin holds is skipped whole.
        """
        with self._lock:
            if self._registry is not None and self._probes is not None:
                return self._registry, self._probes
            registered = [name for name, _ in self._pm.list_name_plugin()]
            ranked = [*registered, *self._pending]
            order = {n: (not self._is_shipped(n), i) for i, n in enumerate(ranked)}
            types = self._collect("ortplug_provider_types")
            probes = self._collect("ortplug_host_probes")
            built = _manifest_types.declared_contributions(
                self._declarations, registered, self._fail
            )
            types, probes = types + built[0], probes + built[1]
            claims = [(p, i, n) for i, (p, t) in enumerate(types) for n in _provider_names(t)]
            claims += [(p, i, f"probe name {probe.name!r}") for i, (p, probe) in enumerate(probes)]
            for plugin in self._pending:
                declaration = self._declarations[plugin]
                for i, kind in enumerate(declaration.kinds):
                    claims += [(plugin, -1 - i, f"provider name {n!r}") for n in kind.names()]
                claims += [(plugin, -1, f"probe name {p.name!r}") for p in declaration.probes]
            claims.sort(key=lambda claim: order.get(claim[0], (True, len(order))))
            owners: dict[str, tuple[str, int]] = {}  # claimed name -> (plugin, item index)
            skipped: set[str] = set()
            for plugin, index, claim in claims:
                owner, owner_index = owners.setdefault(claim, (plugin, index))
                if (owner, owner_index) != (plugin, index) and not {plugin, owner} & skipped:
                    skipped.add(plugin)
                    self._skip(plugin, claim, owner)
            declared = {
                name: (kind.kind, plugin)
                for plugin in self._pending
                for kind in self._declarations[plugin].kinds
                for name in kind.names()
            }
            self._registry = ProviderRegistry(
                (ProviderSpec(type=t, plugin=p) for p, t in types if p not in skipped),
                declared=declared,
                load=self._load_for,
                why=self._why,
            )
            self._probes = [(p, probe) for p, probe in probes if p not in skipped]
            return self._registry, self._probes

    def _why(self, name: str) -> str | None:
        """Why no registered plugin holds a provider name, when a known plugin claims it."""
        for plugin, (reason, declaration) in self._env_blocked.items():
            if plugin == name or (declaration is not None and declaration.kind(name) is not None):
                return f"its plugin {plugin!r} is blocked by {reason} (change or unset it)"
        for plugin, declaration in self._declarations.items():
            failure = next((f for f in reversed(self._failures) if f.plugin == plugin), None)
            if declaration.kind(name) is not None and failure is not None:
                return f"its plugin {plugin!r} failed in {failure.phase}: {failure.error}"
        return None

    def _skip(self, plugin: str, claim: str, owner: str) -> None:
        """The one conflict policy: a name claimed twice keeps its first claimant (the core's,
        then shipped plugins, then the rest); the other is skipped with one warning, or
        :class:`~ortplug.errors.PluginConflictError` under ``ORTPLUG_STRICT_PLUGINS=1``."""
        theirs = "the core" if owner in _BUILTIN_PLUGINS else self._from(owner)
        text = (
            f"{claim} is already claimed by plugin {owner!r} ({theirs}); plugin {plugin!r} "
            f"({self._from(plugin)}) is skipped: uninstall one of the two"
        )
        if self._strict:
            raise PluginConflictError(text)
        error = ValueError(text)
        self._pending.pop(plugin, None)
        if self._pm.get_plugin(plugin) is not None:
            self._pm.unregister(name=plugin)
        self._pm.set_blocked(plugin)
        self._skipped.add(plugin)
        self._fail(plugin, "provider and probe names", error)

    # -- the one call path --------------------------------------------------------------------

    def _impls(self, hook_name: str, only: Collection[str] | None = None) -> list[Any]:
        """A hook's implementations in pluggy's call order (tryfirst first, trylast last).

        ``only``: just those of these plugins.
        """
        impls = reversed(getattr(self._pm.hook, hook_name).get_hookimpls())
        return [impl for impl in impls if only is None or impl.plugin_name in only]

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
        """At most ``MAX_ITEMS`` of an iterable answer, those of the contract's item types.

        An item of another type is left out and reported (the others are kept); ``None``
        when the answer is not iterable or raises (reported as a failure of ``plugin``).
        """
        try:
            items = list(itertools.islice(iter(result), MAX_ITEMS + 1))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._fail(plugin, hook_name, exc)
            return None
        wrong = [item for item in items if not isinstance(item, contract.items)]
        if wrong:
            wrong_type = TypeError(
                f"expected {contract.describe_items()} items, got {type(wrong[0]).__name__} "
                f"{wrong[0]!r:.80}; {len(wrong)} such item(s) left out, the others kept"
            )
            self._fail(plugin, hook_name, wrong_type)
            items = [item for item in items if isinstance(item, contract.items)]
        if len(items) > MAX_ITEMS:
            error = ValueError(f"yielded more than {MAX_ITEMS} items; the first {MAX_ITEMS} kept")
            self._fail(plugin, hook_name, error)
            items = items[:MAX_ITEMS]
        return items

    def _collect(
        self, hook_name: str, only: Collection[str] | None = None, **kwargs: Any
    ) -> list[tuple[str, Any]]:
        """Every plugin's items (``only``: those plugins'), ``(plugin, item)``, in hook order."""
        contract = CONTRACTS[hook_name]
        collected: list[tuple[str, Any]] = []
        for impl in self._impls(hook_name, only):
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

    def _fold(
        self, hook_name: str, value: _T, only: Collection[str] | None = None, **kwargs: Any
    ) -> _T:
        """Pass ``value`` through every implementation (``only``: those plugins').

        ``None`` keeps the value; a wrong type is a failure.
        """
        contract = CONTRACTS[hook_name]
        argument = str(contract.fold_argument)
        for impl in self._impls(hook_name, only):
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
        if contract.mode is CallMode.COLLECT:
            return self._collect(hook_name, **kwargs)
        return self._first_result(hook_name, **kwargs)

    # -- typed facade -------------------------------------------------------------------------

    def provider_registry(self) -> ProviderRegistry:
        """Every provider type the plugins contribute or declare (cached until plugins change).

        Looking up a declared name imports its plugin; ``specs()`` imports every one.
        """
        return self._validated()[0]

    def host_capabilities(self, kinds: Collection[str] | None = None) -> HostCapabilities:
        """The host as the probes see it (cached); ``kinds``: only the probes those providers need.

        A provider kind needs the probes of the plugin that contributed it and those
        its declaration requires facts of. Without ``kinds``, every plugin in play
        probes: a declared plugin ruled out by cached facts is not imported, and its
        cached facts are shown. Each probe runs once per plugin host, all of them in
        parallel, each waited for until its own deadline.
        """
        with self._lock:
            ruled_out = self._load_in_play(None) if kinds is None else {}
            plugins = None if kinds is None else self._plugins_for(kinds)
            _, probes = self._validated()
            host = self._hosts.get(plugins)
            if host is not None:
                return host
            needed = [(p, probe) for p, probe in probes if plugins is None or p in plugins]
            runs = [self._start_probe(plugin, probe) for plugin, probe in needed]
            results = [(run.probe, self._settle(run)) for run in runs]
            results += [
                (_declared.probe_stub(declared), facts)
                for name in ruled_out
                for declared in self._declarations[name].probes
                if (facts := self._cached(declared.name)) is not None
            ]
            host = compose_host(results, environ=self._environ)
            self._hosts[plugins] = host
            self._composed.append(host)
            return host

    def _plugins_for(self, kinds: Collection[str]) -> frozenset[str]:
        """The plugins whose probes ``kinds`` need (imported): their owners and required probes'."""
        registry = self._validated()[0]
        owners = {registry.lookup(kind).plugin for kind in kinds if registry.has_kind(kind)}
        probes = {
            probe
            for kind in kinds
            for declaration in self._declarations.values()
            if (declared := declaration.kind(kind)) is not None
            for probe in declared.required_probes()
        }
        for probe in probes:
            owner = self._probe_declaration(probe)
            if owner is not None:
                owners.add(owner[0])
        self._load_pending(owner for owner in owners if owner in self._pending)
        return frozenset(owners)

    def _start_probe(self, plugin: str, probe: HostProbe) -> _ProbeRun:
        """The probe's run in this host: started now, or taken from the cross-process cache.

        A declared probe's facts are cached under its declared identity.
        """
        run = self._probe_runs.get(probe.name)
        if run is not None and run.probe.detect is probe.detect:
            return run
        owner = self._probe_declaration(probe.name)
        if owner is not None and owner[0] == plugin:
            probe = attrs.evolve(probe, identity=owner[1].identity)
        version = self._distributions.get(plugin, (None, None))[1]
        run = _ProbeRun(
            plugin, probe, time.monotonic(), _probe_cache.entry_key(probe, plugin, version)
        )
        self._probe_runs[probe.name] = run
        cached = _probe_cache.load(run.cache_key, probe) if run.cache_key else None
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
            self._cached_facts.clear()
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
                _probe_cache.store(run.cache_key, run.probe, run.facts)
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
        A declared plugin whose kinds ``host`` (or the cached facts) rule out is not
        imported: each of its kinds is declined with the reason, by the core. The
        library check runs only on the host this plugin host detected, without
        overrides of the plugin's probes: injected facts stand for the library.
        """
        ruled_out = self._load_in_play(host)
        registry = self.provider_registry()
        answers: list[ProviderOffer | ProviderDecline] = [
            ProviderDecline(kind, f"{reason} (declared; the plugin is not imported)", plugin)
            for plugin, reasons in ruled_out.items()
            for kind, reason in reasons.items()
        ]
        collected = self._collect(
            "ortplug_offer_providers", metadata=metadata, host=host, checkpoint=checkpoint
        )
        for plugin, item in collected:
            kind = item.config.kind if isinstance(item, ProviderOffer) else item.kind
            if not registry.has_kind(kind):
                self._unknown_kind(plugin, "ortplug_offer_providers", kind, registry)
                continue
            if isinstance(item, ProviderOffer) and not self._names_its_type(plugin, item, registry):
                continue
            named = attrs.evolve(item, plugin=plugin)
            answers.append(_library_checked(named, registry) if self._real(host, plugin) else named)
        return answers

    def _real(self, host: HostCapabilities, plugin: str) -> bool:
        """Whether ``host`` is this host's detection with no override of ``plugin``'s probes.

        Only then does the core check an offered plugin-EP library for real: injected
        facts (``make_host``, ``ORTPLUG_OVERRIDE_*``) stand for the library in tests.
        """
        if not any(host is detected for detected in self._composed):
            return False
        probes = [probe.name for owner, probe in self._validated()[1] if owner == plugin]
        return not any(probe_overridden(name, self._environ) for name in probes)

    def _names_its_type(
        self, plugin: str, offer: ProviderOffer, registry: ProviderRegistry
    ) -> bool:
        """Whether the offered config runs the provider its kind's type names; else a failure.

        A config whose ``to_ort()`` names another provider (a copied CPU config's
        ``CPUExecutionProvider``) would run that one instead, and be judged as it.
        """
        declared = registry.lookup(offer.config.kind).type.ort_name
        try:
            runs = offer.config.to_ort()[0]
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._fail(plugin, "ortplug_offer_providers", exc)
            return False
        if runs == declared:
            return True
        error = ValueError(
            f"an offer of kind {offer.config.kind!r} runs {runs!r} (its config's to_ort()), but "
            f"the kind's ProviderType names {declared!r}; make to_ort() return the ort_name "
            "the type declares"
        )
        self._fail(plugin, "ortplug_offer_providers", error)
        return False

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
        """The ``extra`` keys the plugins read, by name (the first declaration of a name wins).

        Those of declared plugins not imported come from their declarations.
        """
        keys: dict[str, MetadataKey] = {}
        for plugin, key in self._collect("ortplug_metadata_keys"):
            keys.setdefault(key.name, attrs.evolve(key, plugin=plugin))
        imported = [name for name, _ in self._pm.list_name_plugin()]
        for key in _manifest_types.declared_keys(self._declarations, self._pending, imported):
            keys.setdefault(key.name, key)
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
        """Every plugin's doctor checks, tagged with the plugin name (every plugin is imported)."""
        self._load_pending()
        return [
            attrs.evolve(check, plugin=plugin)
            for plugin, check in self._collect("ortplug_doctor_checks", host=host)
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
        return self._fold(
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
        owning = {impl.plugin_name for impl in self._impls("ortplug_provider_types")}
        kindless = {name for name, _ in self._pm.list_name_plugin() if name not in owning}
        return self._fold(
            "ortplug_adjust_session_options",
            session_options,
            only=owners | kindless,
            chain=chain,
            metadata=metadata,
            host=host,
        )


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
