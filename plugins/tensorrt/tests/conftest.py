"""Fixtures of the ortplug-tensorrt tests: ortplug.testing's, plus a private cache for every test."""

from __future__ import annotations

from pathlib import Path

import pytest
from ortplug import PluginHost
from ortplug.testing import make_plugin_host


@pytest.fixture(autouse=True)
def _private_cache(ortplug_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Caches go to a temporary folder; no opt-in from the caller's environment leaks in."""
    monkeypatch.delenv("ORTPLUG_TENSORRT", raising=False)
    return ortplug_cache


@pytest.fixture
def all_plugins() -> PluginHost:
    """The built-in defaults, the CPU plugin and the plugins these tests exercise."""
    return make_plugin_host("cuda", "tensorrt")
