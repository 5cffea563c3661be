"""The devices a throughput build serves on, and the sessions of their execution streams.

``throughput`` serves on the device the proven choice chose. ``cumulative_throughput`` serves
on every verified choice that runs on another device (two choices on one device, such as a
precision variant beside the reference weights, count once: the faster one), and a provider
config that can run on each of several devices of this host gives one device per copy: a
config with an ``each_device(host)`` method returns itself on each device its plugin's probe
lists (the CUDA plugin's config does, one copy per GPU). Every device but the served one is
verified before it serves (:mod:`.start`; cached verdicts make that a build).

A stream is a worker thread and the session it runs. Streams on the CPU provider with one
intra-op thread share one session (ONNX Runtime's CPU runs are safe to call concurrently);
otherwise each stream has its own session, unless the provider's type declares that concurrent
runs of one session are safe (``concurrent_runs``, read where a plugin declares it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import attrs
from ortplug.checkpoint import ResolvedCheckpoint
from ortplug.host.runtime import require_onnxruntime
from ortplug.providers.configs import CPU_EP, ProviderConfig
from ortplug.providers.run_options import RunOptionsConfig
from ortplug.providers.session_options import SessionOptionsConfig
from ortplug.session.build import create_planned
from ortplug.session.plan import SessionPlan

from .config import Layout
from .server import Stream

__all__ = ["DevicePlan", "StreamBuilder", "device_plans", "usable_cpus"]

_SPINNING = "session.intra_op.allow_spinning"


@attrs.frozen
class DevicePlan:
    """One device to serve on: its label (``cpu``, ``cuda:1``), and the plan and weights its
    sessions are built from."""

    label: str
    plan: SessionPlan
    weights: ResolvedCheckpoint

    @property
    def on_cpu(self) -> bool:
        """Whether it runs on ONNX Runtime's CPU provider alone."""
        return all(config.to_ort()[0] == CPU_EP for config in self.plan.chain)

    @property
    def chain(self) -> tuple[str, ...]:
        return tuple(config.kind for config in self.plan.chain)


def _device_id(config: ProviderConfig) -> str | None:
    return config.to_ort()[1].get("device_id")


def _label(config: ProviderConfig) -> str:
    device = _device_id(config)
    return config.kind if device is None else f"{config.kind}:{device}"


def _copies(plan: SessionPlan) -> list[SessionPlan]:
    """``plan`` on each device its lead provider may run on (itself first)."""
    lead, *rest = plan.chain
    each = getattr(lead, "each_device", None)
    configs: Sequence[Any] = each(plan.host) if callable(each) else ()
    others = [c for c in configs if _device_id(c) != _device_id(lead)]
    return [plan, *(attrs.evolve(plan, chain=(config, *rest)) for config in others)]


def device_plans(
    served: SessionPlan,
    others: Sequence[SessionPlan],
    origin: ResolvedCheckpoint,
    *,
    every: bool,
) -> list[DevicePlan]:
    """The served plan's device, and with ``every`` each other verified plan's and copies."""
    plans = [served, *others] if every else [served]
    devices: list[DevicePlan] = []
    seen: set[str] = set()
    for plan in plans:
        copies = _copies(plan) if every else [plan]
        for copy in copies:
            label = _label(copy.chain[0])
            if label in seen:
                continue
            seen.add(label)
            weights = copy.variant or origin
            devices.append(DevicePlan(label, copy, weights))
    return devices


def usable_cpus(plan: SessionPlan) -> int:
    """The CPUs this process may use, as the host probe found them (else ``os.cpu_count()``)."""
    usable = plan.host.fact("cpu", "usable_cpus")
    if isinstance(usable, int) and not isinstance(usable, bool) and usable > 0:
        return usable
    return os.cpu_count() or 1


def _shares_session(plan: SessionPlan) -> bool:
    """Whether concurrent runs of one session of ``plan`` are safe (the CPU provider's are)."""
    lead = plan.chain[0]
    if lead.to_ort()[0] == CPU_EP:
        return True
    if plan.plugins is None:
        return False
    try:
        declared = getattr(plan.plugins.provider_registry().lookup(lead.kind).type,
                           "concurrent_runs", False)  # fmt: skip
    except Exception:  # no such declaration: one session per stream
        return False
    return declared is True


class StreamBuilder:
    """The sessions of one device's streams for any layout, built on demand and reused."""

    def __init__(self, device: DevicePlan, session: Any = None) -> None:
        self.device = device
        self._ort = require_onnxruntime()
        self._sessions: dict[tuple[int | None, bool], list[Any]] = {}
        self._built = session  # built already with the plan's options (its own threads)

    def _options(self, threads: int | None, spinning: bool) -> SessionOptionsConfig:
        options = self.device.plan.options
        if threads is not None:
            options = options.evolve(intra_op_num_threads=threads)
        if not spinning:
            options = options.with_config_entries({_SPINNING: "0"})
        return options

    def _sessions_for(self, threads: int | None, spinning: bool, count: int) -> list[Any]:
        key = (threads, spinning)
        sessions = self._sessions.setdefault(key, [])
        if not sessions and self._built is not None and threads is None and spinning:
            sessions.append(self._built)
        while len(sessions) < count:
            options = self._options(threads, spinning)
            build = create_planned(self.device.weights, self.device.plan, options)
            sessions.append(build.session)
        return sessions[:count]

    def streams(self, layout: Layout) -> list[Stream]:
        """One stream per ``layout.streams``, each with its run options."""
        shared = _shares_session(self.device.plan) and (layout.threads == 1 or layout.streams == 1)
        spinning = layout.streams == 1  # idle streams spinning would take the busy ones' CPUs
        sessions = self._sessions_for(layout.threads, spinning, 1 if shared else layout.streams)
        return [
            Stream(sessions[0] if shared else sessions[i], RunOptionsConfig().to_ort(self._ort))
            for i in range(layout.streams)
        ]

    def built(self) -> list[Stream] | None:
        """The session built already as one stream (the latency path's), while nothing else is
        built: what serves while a layout's sessions are built (``None``: none)."""
        if self._built is None:
            return None
        return [Stream(self._built, RunOptionsConfig().to_ort(self._ort))]

    def release(self) -> None:
        """Forget every session built (the ones streams hold stay alive with them)."""
        self._sessions.clear()
        self._built = None
