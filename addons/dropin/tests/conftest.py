"""Fixtures of the ortplug-dropin tests: ortplug.testing's private cache for every test."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_cache(ortplug_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Caches go to a temporary folder, on a fresh plugin host; no opt-in from the caller's
    environment leaks in."""
    monkeypatch.delenv("ORTPLUG_TENSORRT", raising=False)
    monkeypatch.delenv("ORTPLUG_ALLOW_VARIANTS", raising=False)
    return ortplug_cache
