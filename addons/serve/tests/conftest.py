"""Fixtures of the ortplug-serve tests: ortplug.testing's, plus a private cache for every test."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_cache(ortplug_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Caches (and the serving records) go to a temporary folder; no opt-in from the caller's
    environment leaks in."""
    monkeypatch.delenv("ORTPLUG_TENSORRT", raising=False)
    monkeypatch.delenv("ORTPLUG_MEASURE", raising=False)
    return ortplug_cache
