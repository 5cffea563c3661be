"""Fixtures of the ortplug-dropin tests: a private cache and a fresh plugin host."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ortplug.plugin_host.manager import reset_plugin_host
from ortplug.testing import follow_environment


@pytest.fixture(autouse=True)
def _isolated_environment(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Every test writes caches to its own folder, starts without opt-ins, on a fresh host."""
    cache = tmp_path_factory.mktemp("ortplug-cache")
    follow_environment(monkeypatch)
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(cache))
    monkeypatch.delenv("ORTPLUG_TENSORRT", raising=False)
    monkeypatch.delenv("ORTPLUG_ALLOW_VARIANTS", raising=False)
    reset_plugin_host()
    yield cache
    reset_plugin_host()
