"""Shared fixtures: plugin hosts with plugins registered directly, hand-built hosts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ortplug import PluginHost
from ortplug.plugin_host.manager import reset_plugin_host
from ortplug.testing import make_plugin_host

# plugin_host and cpu_host come from ortplug.testing (a pytest plugin installed with ortplug).


@pytest.fixture
def all_plugins() -> PluginHost:
    """Built-ins plus the four provider plugins of this repository, no entry points."""
    return make_plugin_host("cuda", "tensorrt", "coreml")


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> Path:
    """Every test writes caches to its own folder and starts without opt-ins or overrides.

    The OpenVINO example (a third party's plugin, installed for its own tests beside it) offers a
    choice only on hosts whose CPU its library supports, which would make the core's default-policy
    tests depend on the CPU vendor: they run without it, as on a host it does not support."""
    cache = tmp_path_factory.mktemp("ortplug-cache")
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(cache))
    monkeypatch.setenv("ORTPLUG_DISABLE_PLUGINS", "openvino")
    monkeypatch.delenv("ORTPLUG_TENSORRT", raising=False)
    return cache


@pytest.fixture(autouse=True)
def _fresh_process_host() -> Iterator[None]:
    """Tests that touch the process-wide plugin host start and end with a fresh one."""
    reset_plugin_host()
    yield
    reset_plugin_host()
