"""Shared fixtures: a fresh plugin host with the CPU plugin registered directly."""

from __future__ import annotations

from collections.abc import Iterator

import ortplug_cpu.plugin
import pytest
from ortplug import HostCapabilities, PluginHost
from ortplug.plugins.manager import reset_plugin_host


@pytest.fixture
def plugin_host() -> PluginHost:
    """Built-ins plus the CPU plugin, no entry points: what most tests need."""
    host = PluginHost(load_entry_points=False, environ={})
    assert host.register(ortplug_cpu.plugin, name="cpu")
    return host


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
