"""Shared fixtures: plugin hosts with plugins registered directly, hand-built hosts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ortplug_coreml.plugin
import ortplug_cpu.plugin
import ortplug_cuda.plugin
import ortplug_tensorrt.plugin
import pytest
from ortplug import HostCapabilities, PluginHost
from ortplug.plugins.manager import reset_plugin_host

#: The provider plugins of this repository, registered directly by name.
PROVIDER_PLUGINS = {
    "cpu": ortplug_cpu.plugin,
    "cuda": ortplug_cuda.plugin,
    "tensorrt": ortplug_tensorrt.plugin,
    "coreml": ortplug_coreml.plugin,
}


@pytest.fixture
def plugin_host() -> PluginHost:
    """Built-ins plus the CPU plugin, no entry points: what most tests need."""
    host = PluginHost(load_entry_points=False, environ={})
    assert host.register(ortplug_cpu.plugin, name="cpu")
    return host


@pytest.fixture
def all_plugins() -> PluginHost:
    """Built-ins plus the four provider plugins of this repository, no entry points."""
    host = PluginHost(load_entry_points=False, environ={})
    for name, module in PROVIDER_PLUGINS.items():
        assert host.register(module, name=name)
    return host


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> Path:
    """Every test writes caches to its own folder and starts without opt-ins or overrides."""
    cache = tmp_path_factory.mktemp("ortplug-cache")
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(cache))
    monkeypatch.delenv("ORTPLUG_TENSORRT", raising=False)
    return cache


@pytest.fixture
def cpu_host() -> HostCapabilities:
    """A CPU-only Linux host, built by hand."""
    return HostCapabilities(
        platform="linux",
        machine="x86_64",
        ort_version="1.32.0",
        available_providers=("CPUExecutionProvider",),
        facts={"cpu": {"logical_cpus": 8, "usable_cpus": 8, "isa_flags": ["avx2"]}},
    )


@pytest.fixture(autouse=True)
def _fresh_process_host() -> Iterator[None]:
    """Tests that touch the process-wide plugin host start and end with a fresh one."""
    reset_plugin_host()
    yield
    reset_plugin_host()
