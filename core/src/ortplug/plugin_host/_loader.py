"""The plugin loader: discovers entry points, applies the allow/deny lists, reads declarations,
imports lazily, settles claims."""

from __future__ import annotations

import functools
import importlib
import sys
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from ..errors import PluginConflictError
from ..host.capabilities import HostCapabilities, HostProbe, base_fact
from ..plugins import hookspecs
from ..plugins.declaration import (
    DeclarationError,
    PluginDeclaration,
    ProbeDeclaration,
    from_json,
    source_of,
)
from ..plugins.provider_type import ProviderSpec, ProviderType
from ..plugins.types import PluginInfo
from ..providers.configs import CPU_EP
from . import _claims, _declared, _manifest_types
from . import entry_points as _entry_points
from ._failures import FailureLog
from ._hook_caller import HookCaller, check_contract
from ._order import Placement, kind_order
from .registry import ProviderRegistry

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = [
    "BUILTIN_PLUGINS",
    "ENV_ALLOW",
    "ENV_DENY",
    "SLOW_IMPORT_MS",
    "UNDECLARED_NOTE",
    "PluginLoader",
    "blocked_by",
]

ENV_ALLOW = "ORTPLUG_PLUGINS"
ENV_DENY = "ORTPLUG_DISABLE_PLUGINS"
#: Plugins of the core itself by name (what ``ortplug plugins`` shows) and module, registered
#: before entry points like any other plugin.
BUILTIN_PLUGINS = {"ortplug": "ortplug.plugin_host._builtin"}
#: What ``ortplug plugins`` says of a plugin without a declaration (with its import time).
UNDECLARED_NOTE = (
    "no declaration: imported at every start ({ms:.0f} ms here); ship an ortplug.json beside "
    "the package (see ortplug.plugins.declaration)"
)
#: A declared plugin whose import takes this long says so in ``ortplug plugins``.
SLOW_IMPORT_MS = 100.0


def blocked_by(name: str, settings: Settings) -> str | None:
    """The setting that keeps entry point ``name`` out (``ORTPLUG_DISABLE_PLUGINS=cpu``, or an
    ``ORTPLUG_PLUGINS`` that does not list it), ``None`` when it is let in."""
    if name in settings.disable_plugins:
        return f"{ENV_DENY}={','.join(settings.disable_plugins)}"
    if settings.plugins is not None and name not in settings.plugins:
        return f"{ENV_ALLOW}={','.join(settings.plugins)}"
    return None


def _declaration(entry_point: _entry_points.PluginEntryPoint) -> PluginDeclaration | None:
    """The entry point's checked declaration (``None``: it has none); raises ``DeclarationError``."""
    if entry_point.declaration_error is not None:
        raise DeclarationError(entry_point.declaration_error)
    if entry_point.declaration is None:
        return None
    source = source_of(entry_point.value)
    return from_json(entry_point.name, entry_point.declaration, source)


def _quiet_declaration(entry_point: _entry_points.PluginEntryPoint) -> PluginDeclaration | None:
    """The entry point's declaration, ``None`` when it has none or a broken one."""
    try:
        return _declaration(entry_point)
    except DeclarationError:
        return None


def _holds(declaration: PluginDeclaration | None, name: str) -> bool:
    """Whether ``declaration`` declares the provider name ``name``."""
    return declaration is not None and declaration.kind(name) is not None


def _note(ms: float, *, undeclared: bool) -> str | None:
    """What ``ortplug plugins`` adds about a plugin's start-up: no declaration, a slow import."""
    if undeclared:
        return UNDECLARED_NOTE.format(ms=ms)
    if ms >= SLOW_IMPORT_MS:
        return f"its import takes {ms:.0f} ms, paid by each process where it is in play"
    return None


def _why(
    name: str,
    env_blocked: Mapping[str, tuple[str, _entry_points.PluginEntryPoint]],
    declarations: Mapping[str, PluginDeclaration],
    failures: FailureLog,
) -> str | None:
    """Why no registered plugin holds a provider name, when a known plugin claims it."""
    for plugin, (reason, entry_point) in env_blocked.items():
        if plugin == name or _holds(_quiet_declaration(entry_point), name):
            return f"its plugin {plugin!r} is blocked by {reason} (change or unset it)"
    for plugin, declaration in declarations.items():
        failure = failures.latest(plugin)
        if declaration.kind(name) is not None and failure is not None:
            return f"its plugin {plugin!r} failed in {failure.phase}: {failure.error}"
    return None


def _broken_promise(hooks: HookCaller, name: str, declaration: PluginDeclaration) -> str | None:
    """How the freshly imported plugin differs from its declaration, if it does."""
    return _declared.broken_promise(declaration, hooks.hooks_of(name))


class _Validated(NamedTuple):
    """The claims settled: the provider registry and the probes of the plugins that hold theirs."""

    registry: ProviderRegistry
    probes: list[tuple[str, HostProbe]]


class PluginLoader:
    """The plugins of one plugin host: which are known, declared, imported, blocked or skipped."""

    def __init__(self, settings: Settings, *, lock: threading.RLock) -> None:
        self.settings = settings
        strict = self.strict = settings.strict_plugins
        self.distributions: dict[str, tuple[str, str]] = {}
        self.failures = FailureLog(strict, self.distributions)
        self.hooks = HookCaller(self.failures)
        self.declarations: dict[str, PluginDeclaration] = {}  # every allowed entry point's
        self.generation = 0  # counts the changes of the plugin set
        self._lock = lock
        self._entry_points: dict[str, str] = {}  # name -> "module:attr" already seen
        self._skipped: set[str] = set()  # plugins removed for claiming what another one has
        self._pending: dict[str, _entry_points.PluginEntryPoint] = {}  # declared, not imported
        self._notes: dict[str, str | None] = {}  # entry point -> what its import says of it
        # plugin -> the allow/deny setting that blocked it ("ORTPLUG_PLUGINS=cpu"), its entry point
        self._env_blocked: dict[str, tuple[str, _entry_points.PluginEntryPoint]] = {}
        self._validated: _Validated | None = None

    # -- registration and import ---------------------------------------------------------------

    def register_builtins(self) -> None:
        """Register the core's own plugins."""
        for name, module_name in BUILTIN_PLUGINS.items():
            self.register(importlib.import_module(module_name), name=name)

    def register(self, plugin: object, name: str) -> bool:
        """Register a plugin object (module, class instance) under ``name``; False if refused."""
        with self._lock:
            try:
                check_contract(plugin)
                if self.hooks.blocked(name):  # pluggy would ignore it and report nothing
                    setting = self._env_blocked.get(name, ("this host",))[0]
                    raise ValueError(f"plugin name {name!r} is blocked by {setting}; use another")
                self.hooks.register(plugin, name)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self.failures.record(name, "registration", exc)
                return False
            self._skipped.discard(name)
            if name not in self.declarations:  # registered directly: its package's manifest
                declared = _manifest_types.declaration_of(plugin, name)
                if declared is not None:
                    self.declarations[name] = declared
            declaration = self.declarations.get(name)
            problem = (
                None if declaration is None else _broken_promise(self.hooks, name, declaration)
            )
            if problem is not None:  # it must keep its word: its hooks, and one form
                self.hooks.unregister(name)
                self._invalidate()
                self.failures.record(name, "declaration", ValueError(problem))
                return False
            self._invalidate()
            return True

    def unregister(self, name: str) -> None:
        """Remove a plugin; its providers, probes and offers disappear."""
        with self._lock:
            self.hooks.unregister(name)
            self._invalidate()

    def load_entry_points(self) -> int:
        """Register the entry points the allow/deny lists let through; how many were imported.

        A declared plugin is remembered and imported when it is in play; one without a
        declaration is imported now.
        """
        loaded = 0
        for entry_point in _entry_points.discover(hookspecs.PROJECT):
            name = entry_point.name
            if entry_point.distribution is not None and name not in self.distributions:
                self.distributions[name] = (entry_point.distribution, entry_point.version or "")
            if not self._admitted(entry_point):
                continue
            try:
                declaration = _declaration(entry_point)
            except DeclarationError as exc:
                self.failures.record(name, "declaration", exc)
                declaration = None
            if declaration is not None:
                self.declarations[name] = declaration
                self._pending[name] = entry_point
                self._entry_points[name] = entry_point.value
                continue
            if self._import(entry_point):  # a broken entry point does not take the name
                self._entry_points[name] = entry_point.value
                loaded += 1
        self._invalidate()
        return loaded

    def _admitted(self, entry_point: _entry_points.PluginEntryPoint) -> bool:
        """Whether the entry point is new here, let in and its name not another's."""
        name = entry_point.name
        setting = blocked_by(name, self.settings)
        if setting is not None:
            self._env_blocked[name] = (setting, entry_point)  # its declaration read if asked
            self.hooks.unregister(name, block=True)
            return False
        seen = self._entry_points.get(name)
        if seen is not None and seen != entry_point.value:
            owner = f" of {entry_point.distribution}" if entry_point.distribution else ""
            error = ValueError(
                f"entry point {name!r}{owner} ({entry_point.value}) is already taken by "
                f"{seen!r}; uninstall one of the two distributions"
            )
            self.failures.record(name, "import", error)
            return False
        return not (self.hooks.known(name) or name in self._pending)  # else: an earlier call's

    def _import(self, entry_point: _entry_points.PluginEntryPoint) -> bool:
        """Import and register one entry point's plugin (a declared one must keep its word)."""
        name = entry_point.name
        started = time.perf_counter()
        try:
            plugin = entry_point.load()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self.failures.record(name, "import", exc)
            return False
        finally:
            ms = (time.perf_counter() - started) * 1e3
            self._notes[name] = _note(ms, undeclared=name not in self.declarations)
        return self.register(plugin, name=name)

    def load_pending(self, names: Iterable[str] | None = None) -> None:
        """Import declared plugins (``None``: every one not imported yet)."""
        with self._lock:
            self.validated()  # a plugin that lost a claim is not imported
            wanted = list(self._pending) if names is None else list(names)
            for name in wanted:
                entry_point = self._pending.pop(name, None)
                if entry_point is not None:
                    self._import(entry_point)

    def pending(self) -> list[str]:
        """The declared plugins not imported yet."""
        return list(self._pending)

    def load_in_play(
        self, host: HostCapabilities | None, facts_of: _declared.FactsOf
    ) -> dict[str, dict[str, str]]:
        """Import the declared plugins that may take part here; the ruled-out ones, with reasons.

        ``facts_of`` gives a probe's known facts (the host's, or the cached ones).
        """
        with self._lock:
            self.validated()
            if host is not None:
                platform = host.platform
            else:
                platform = base_fact("platform", sys.platform, self.settings.overrides)
            out = {}
            for name in list(self._pending):
                reasons = _declared.ruled_out(self.declarations[name], platform, facts_of)
                if reasons is not None:
                    out[name] = reasons
            self.load_pending([name for name in self._pending if name not in out])
            return {name: reasons for name, reasons in out.items() if name in self._pending}

    def plugins_for(self, kinds: Collection[str]) -> frozenset[str]:
        """The plugins whose probes ``kinds`` need (imported): their owners and required probes'."""
        registry = self.validated().registry
        owners = {registry.lookup(kind).plugin for kind in kinds if registry.has_kind(kind)}
        probes = {
            probe
            for kind in kinds
            for declaration in self.declarations.values()
            if (declared := declaration.kind(kind)) is not None
            for probe in declared.required_probes()
        }
        for probe in probes:
            owner = self.probe_owner(probe)
            if owner is not None:
                owners.add(owner[0])
        self.load_pending(owner for owner in owners if owner in self._pending)
        return frozenset(owners)

    def probe_owner(self, probe: str) -> tuple[str, ProbeDeclaration] | None:
        """The declared plugin that declares probe ``probe``, with the probe's declaration."""
        for plugin, declaration in self.declarations.items():
            for declared in declaration.probes:
                if declared.name == probe:
                    return plugin, declared
        return None

    def version_of(self, plugin: str) -> str | None:
        """The version of the distribution ``plugin`` came from (``None``: registered directly)."""
        return self.distributions.get(plugin, (None, None))[1]

    def _invalidate(self) -> None:
        self._validated = None
        self.generation += 1

    # -- claims: provider names and probe names are each one plugin's -------------------------

    def validated(self) -> _Validated:
        """Provider types and probes of the plugins whose claims do not collide (cached).

        Claims are taken shipped plugins first, then in registration order (a declared
        plugin not imported yet claims what it declares); one that claims a kind,
        alias, ONNX Runtime name or probe name another plugin holds is skipped whole.
        """
        with self._lock:
            if self._validated is not None:
                return self._validated
            types, probes = self._gather()
            claims = _claims.hook_claims(types, probes)
            for plugin in self._pending:
                claims += _claims.declared_claims(plugin, self.declarations[plugin])
            ranked = [*(name for name, _ in self.hooks.names()), *self._pending]
            index = {n: i for i, n in enumerate(ranked)}

            def rank(p: str) -> tuple[bool, int]:
                i = index.get(p)
                return (True, len(index)) if i is None else (not self.is_shipped(p), i)

            skipped = set()
            for skip in _claims.arbitrate(claims, rank):
                skipped.add(skip.plugin)
                self._skip(skip)
            declared = {
                name: (kind.kind, plugin)
                for plugin in self._pending
                for kind in self.declarations[plugin].kinds
                for name in kind.names()
            }
            kept = [(p, t) for p, t in types if p not in skipped]
            registry = ProviderRegistry(
                (ProviderSpec(type=t, plugin=p) for p, t in kept),
                order=self._order(kept),
                declared=declared,
                load=self._load_for,
                why=functools.partial(
                    _why,
                    env_blocked=self._env_blocked,
                    declarations=self.declarations,
                    failures=self.failures,
                ),
            )
            probes = [(p, probe) for p, probe in probes if p not in skipped]
            self._validated = _Validated(registry, probes)
            return self._validated

    def _order(self, types: Iterable[tuple[str, ProviderType]]) -> list[str]:
        """The kinds of the imported ``types`` and the pending declarations in the order their
        ``before``/``after`` declare; a circle is one failure of each plugin in it."""
        owners: dict[str, str] = {}
        places = []
        for plugin, ptype in types:
            owners[ptype.kind] = plugin
            fallback = ptype.ort_name == CPU_EP
            places.append(Placement(ptype.kind, ptype.before, ptype.after, fallback))
        for plugin in self._pending:
            for kind in self.declarations[plugin].kinds:
                owners[kind.kind] = plugin
                fallback = kind.ort_name == CPU_EP
                places.append(Placement(kind.kind, kind.before, kind.after, fallback))
        order, circle = kind_order(places)
        if circle:
            error = ValueError(
                f"the before/after of kinds {', '.join(circle)} make a circle; they go by name "
                "(make one of them name the other only once)"
            )
            for plugin in dict.fromkeys(owners[kind] for kind in circle if kind in owners):
                self.failures.record(plugin, "kind order", error)
        return order

    def _gather(self) -> tuple[list[tuple[str, ProviderType]], list[tuple[str, HostProbe]]]:
        """Every imported plugin's provider types and host probes, ``(plugin, item)``: a hook-form
        plugin's from its hooks, a declared one's built from its manifest."""
        types = self.hooks.collect("ortplug_provider_types")
        probes = self.hooks.collect("ortplug_host_probes")
        imported = [name for name, active in self.hooks.names() if active]
        built = _manifest_types.declared_contributions(
            self.declarations, imported, self.failures.record
        )
        return types + built[0], probes + built[1]

    def _load_for(self, plugin: str | None) -> ProviderRegistry:
        """The registry after importing one declared plugin (``None``: all of them)."""
        self.load_pending(None if plugin is None else [plugin])
        return self.validated().registry

    def _skip(self, skip: _claims.Skip) -> None:
        """The one conflict policy: the later claimant is skipped with one warning, or
        :class:`~ortplug.errors.PluginConflictError` under ``ORTPLUG_STRICT_PLUGINS=1``."""
        plugin, owner = skip.plugin, skip.owner
        theirs = "the core" if owner in BUILTIN_PLUGINS else self.failures.origin(owner)
        text = skip.message(theirs, self.failures.origin(plugin))
        if self.strict:
            raise PluginConflictError(text)
        self._pending.pop(plugin, None)
        self.hooks.unregister(plugin, block=True)
        self._skipped.add(plugin)
        self.failures.record(plugin, "provider and probe names", ValueError(text))

    def is_shipped(self, plugin: str) -> bool:
        """Whether ``plugin`` comes from one of this project's distributions (or is the core's)."""
        if plugin in BUILTIN_PLUGINS:
            return True
        from .first_party import shipped_distributions  # deferred: only a claim made twice

        dist = self.distributions.get(plugin)
        if dist is not None:
            return dist[0] in shipped_distributions()
        module = getattr(self.hooks.plugin(plugin), "__name__", "")
        return module.partition(".")[0].replace("_", "-") in shipped_distributions()

    # -- what the host reports about its plugins -----------------------------------------------

    def blocked_by(self) -> dict[str, str]:
        """Each installed plugin the allow/deny lists kept out, with the setting that did."""
        return {name: setting for name, (setting, _) in self._env_blocked.items()}

    def infos(self) -> list[PluginInfo]:
        """Active, blocked and failed plugins with their distributions (declared ones imported)."""
        self.load_pending()
        rows: dict[str, PluginInfo] = {}

        def row(
            name: str, status: str, hooks: tuple[str, ...] = (), error: str | None = None
        ) -> None:
            dist, version = self.distributions.get(name, (None, None))
            note = self._notes.get(name)
            rows[name] = PluginInfo(name, dist, version, status, hooks, error, note)

        hooks_of: dict[str, tuple[str, ...]] = {}
        for name, active in self.hooks.names():
            if active:
                hooks_of[name] = self.hooks.hooks_of(name)
                row(name, "active", hooks_of[name])
            elif name not in self._skipped:
                setting, _ = self._env_blocked.get(name, (None, None))
                row(name, "blocked", error=f"blocked by {setting}" if setting else None)
        for failure in self.failures.all():  # the latest failure of a plugin is shown
            status = "failing" if failure.plugin in hooks_of else "failed"
            error = f"{failure.phase}: {failure.error}"
            row(failure.plugin, status, hooks_of.get(failure.plugin, ()), error)
        return list(rows.values())
