"""Fixtures of the ortplug-ray tests: a private cache, a fresh plugin host and Ray temp folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from ortplug.plugin_host.manager import reset_plugin_host
from ortplug.testing import follow_environment


@pytest.fixture(scope="session", autouse=True)
def _private_ray_temp_dir() -> Iterator[None]:
    """Ray records clusters in its temp folder: a short one of this run's own (sockets live there),
    so no cluster recorded on the machine is joined and none this run leaves behind lingers."""
    folder = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = folder
    yield
    if saved is None:
        del os.environ["RAY_TMPDIR"]
    else:
        os.environ["RAY_TMPDIR"] = saved
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _isolated_environment(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Every test writes caches to its own folder, starts without opt-ins, on a fresh host."""
    cache = tmp_path_factory.mktemp("ortplug-cache")
    follow_environment(monkeypatch)
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(cache))
    monkeypatch.delenv("ORTPLUG_TENSORRT", raising=False)
    reset_plugin_host()
    yield cache
    reset_plugin_host()
