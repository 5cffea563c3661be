"""Fixtures of the ortplug-variants tests: ortplug.testing's private cache for every test."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_cache(ortplug_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Caches (verification verdicts) go to a temporary folder; no opt-in from the caller's
    environment leaks in."""
    monkeypatch.delenv("ORTPLUG_TENSORRT", raising=False)
    return ortplug_cache
