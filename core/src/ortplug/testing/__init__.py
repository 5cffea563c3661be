"""``ortplug.testing``: what a plugin's tests need (the fixtures of :mod:`ortplug.pytest_plugin`
and the functions behind them), for this repository and third parties alike."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..host.capabilities import HostCapabilities
from ..host.ep_libraries import unregister_libraries
from ..plugin_host.manager import PluginHost
from ..plugins.project import PROJECT
from ..settings import refresh_settings

__all__ = [
    "demo_model",
    "demo_static_model",
    "follow_environment",
    "forget_ep_libraries",
    "make_host",
    "make_plugin_host",
]

#: Facts of the CPU plugin's probe on the host :func:`make_host` builds by default.
_CPU_FACTS = {"logical_cpus": 8, "usable_cpus": 8, "isa_flags": ["avx2"]}


def follow_environment(monkeypatch: Any) -> None:
    """Read ortplug's settings again now, for suites written when they were read once per process:
    they follow the environment by themselves (:func:`ortplug.settings.settings`), a
    ``monkeypatch``'s changes and its ``undo`` included."""
    del monkeypatch  # kept in the signature: the suites that call it pass theirs
    refresh_settings()


def demo_model() -> Path:
    """The MLP shipped in the core: ``x`` float32 ``[batch, 8]`` -> ``logits``, ``probs``."""
    return Path(str(files("ortplug.data").joinpath("demo.onnx")))


def demo_static_model() -> Path:
    """The shipped MLP with a static input shape: ``x`` ``[4, 8]``."""
    return Path(str(files("ortplug.data").joinpath("demo_static.onnx")))


def _installed_plugin(name: str) -> object:
    found = entry_points(group=PROJECT, name=name)
    if not found:
        raise LookupError(
            f"no installed ortplug plugin named {name!r}; install its distribution "
            "(e.g. pip install ortplug-cpu) or pass the plugin object itself"
        )
    return next(iter(found)).load()


def make_plugin_host(
    *plugins: str | tuple[str, object],
    environ: Mapping[str, str] | None = None,
    cpu: bool = True,
) -> PluginHost:
    """A plugin host with the built-in defaults and the given plugins (entry-point names or
    ``(name, plugin_object)`` pairs), no discovery; a plugin it refuses fails the call."""
    host = PluginHost(load_entry_points=False, environ=dict(environ or {}))
    wanted: list[str | tuple[str, object]] = ["cpu"] if cpu else []
    wanted += [p for p in plugins if p != "cpu" or not cpu]
    for plugin in wanted:
        name, obj = (plugin, _installed_plugin(plugin)) if isinstance(plugin, str) else plugin
        if not host.register(obj, name=name):
            reason = host.failures[-1].message() if host.failures else "refused"
            raise AssertionError(f"plugin {name!r} was not registered: {reason}")
    return host


def forget_ep_libraries() -> tuple[str, ...]:
    """Unregister the plugin-EP libraries ortplug registered in this process (a registration
    outlives a plugin host); their names. Close the sessions using them first."""
    return unregister_libraries()


def make_host(
    *,
    platform: str = "linux",
    machine: str = "x86_64",
    ort_version: str = "1.32.0",
    providers: tuple[str, ...] = ("CPUExecutionProvider",),
    **facts: Mapping[str, Any],
) -> HostCapabilities:
    """Hand-made host facts: ``make_host(cuda={"device_count": 1, ...})`` simulates a GPU host.

    The CPU plugin's facts default to an 8-CPU x86 host; each keyword names a probe.
    """
    return HostCapabilities(
        platform=platform,
        machine=machine,
        ort_version=ort_version,
        available_providers=providers,
        facts={"cpu": _CPU_FACTS, **facts},
    )
