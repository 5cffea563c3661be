"""The pytest plugin installed with ortplug (entry point ``pytest11``): the fixtures of
:mod:`ortplug.testing`, which each imports on a test's first use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .host.capabilities import HostCapabilities
    from .plugin_host.manager import PluginHost

__all__ = ["cpu_host", "ortplug_cache", "plugin_host"]


@pytest.fixture
def plugin_host() -> PluginHost:
    """Built-in defaults plus the CPU plugin, no entry points: register your plugin on it."""
    from .testing import make_plugin_host  # on first use: see the module's docstring

    return make_plugin_host()


@pytest.fixture
def cpu_host() -> HostCapabilities:
    """A CPU-only Linux host with 8 usable CPUs, built by hand."""
    from .testing import make_host

    return make_host()


@pytest.fixture
def ortplug_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache folder and a fresh process-wide plugin host for the test."""
    from .plugin_host.manager import reset_plugin_host

    cache = tmp_path / "ortplug-cache"  # the settings follow monkeypatch's changes themselves
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(cache))
    reset_plugin_host()
    yield cache
    reset_plugin_host()
