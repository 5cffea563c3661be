"""Fixtures of the ortplug-ray tests: ortplug.testing's private cache, and a Ray temp folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


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
def _private_cache(ortplug_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Caches go to a temporary folder, on a fresh plugin host; no opt-in from the caller's
    environment leaks in."""
    monkeypatch.delenv("ORTPLUG_TENSORRT", raising=False)
    return ortplug_cache
