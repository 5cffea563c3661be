"""Runs the plugins' host probes: each in its own thread, waited for until its deadline, cached."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

import attrs

from ..host import probe_cache as _probe_cache
from ..host.capabilities import (
    HostCapabilities,
    HostProbe,
    compose_host,
    facts_problem,
    probe_overridden,
)
from ..plugins.declaration import ProbeDeclaration
from . import _declared
from ._failures import FailureLog

__all__ = ["ProbeRunner"]

#: A probe name -> (its plugin, its declaration) when a declared plugin declares it.
OwnerOf = Callable[[str], "tuple[str, ProbeDeclaration] | None"]


@attrs.define(eq=False)
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


class ProbeRunner:
    """The probe runs and detected hosts of one plugin host.

    ``owner_of`` finds a declared probe's plugin and declaration (its facts are cached
    under the declared identity); ``version_of`` a plugin's distribution version.
    """

    def __init__(
        self,
        overrides: Mapping[str, str],
        failures: FailureLog,
        owner_of: OwnerOf,
        version_of: Callable[[str], str | None],
    ) -> None:
        self.overrides = overrides  # the ORTPLUG_OVERRIDE_* variables
        self.failures = failures
        self.owner_of = owner_of
        self.version_of = version_of
        self._runs: dict[str, _ProbeRun] = {}
        self._hosts: dict[tuple[int, frozenset[str] | None], HostCapabilities] = {}
        self._composed: list[HostCapabilities] = []  # every host detected, kept alive
        self._cached_facts: dict[str, Mapping[str, object] | None] = {}

    def detect(
        self,
        key: tuple[int, frozenset[str] | None],
        probes: Iterable[tuple[str, HostProbe]],
        declared: Iterable[ProbeDeclaration] = (),
    ) -> HostCapabilities:
        """The host ``probes`` see, with ``declared`` probes' cached facts (of plugins not
        imported) added; remembered under ``key``: the plugin set's generation and the plugins
        probed (``None``: all), so a changed plugin set composes anew."""
        if any(generation != key[0] for generation, _ in self._hosts):
            self._hosts.clear()
        host = self._hosts.get(key)
        if host is not None:
            return host
        runs = [self._start(plugin, probe) for plugin, probe in probes]
        results = [(run.probe, self._settle(run)) for run in runs]
        results += [
            (_declared.probe_stub(probe), facts)
            for probe in declared
            if (facts := self.cached(probe.name)) is not None
        ]
        host = compose_host(results, environ=self.overrides)
        self._hosts[key] = host
        self._composed.append(host)
        return host

    def detected(self, host: HostCapabilities) -> bool:
        """Whether ``host`` is one this runner composed (not made up or injected by a caller)."""
        return any(host is composed for composed in self._composed)

    def refresh(self) -> int:
        """Forget every probe result here and in the cross-process cache; how many were removed."""
        self._runs.clear()
        self._hosts.clear()
        self._cached_facts.clear()
        return _probe_cache.clear()

    def facts_of(self, host: HostCapabilities | None) -> _declared.FactsOf:
        """A probe's known facts: the host's, else the cached ones of a declared probe."""

        def facts_of(probe: str) -> Mapping[str, object] | None:
            if host is not None and probe in host.facts:
                return host.facts[probe]
            return self.cached(probe)

        return facts_of

    def cached(self, probe: str) -> Mapping[str, object] | None:
        """A declared probe's facts from the cross-process cache (``None``: unknown or overridden)."""
        if probe in self._cached_facts:
            return self._cached_facts[probe]
        facts = None
        owner = self.owner_of(probe)
        if owner is not None and not probe_overridden(probe, self.overrides):
            plugin, declared = owner
            stub = _declared.probe_stub(declared)
            key = _probe_cache.entry_key(stub, plugin, self.version_of(plugin))
            facts = _probe_cache.load(key, stub) if key is not None else None
        self._cached_facts[probe] = facts
        return facts

    def _start(self, plugin: str, probe: HostProbe) -> _ProbeRun:
        """The probe's run in this host: started now, or taken from the cross-process cache.

        A declared probe's facts are cached under its declared identity.
        """
        run = self._runs.get(probe.name)
        if run is not None and run.probe.detect is probe.detect:
            return run
        owner = self.owner_of(probe.name)
        if owner is not None and owner[0] == plugin:
            probe = attrs.evolve(probe, identity=owner[1].identity)
        key = _probe_cache.entry_key(probe, plugin, self.version_of(plugin))
        run = _ProbeRun(plugin, probe, time.monotonic(), key)
        self._runs[probe.name] = run
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
                self.failures.record(run.plugin, phase, error)
            elif run.error is not None:
                self.failures.record(run.plugin, phase, run.error)
            elif run.cache_key is not None and run.facts is not None:
                _probe_cache.store(run.cache_key, run.probe, run.facts)
        return run.facts if run.done.is_set() and run.error is None else None
