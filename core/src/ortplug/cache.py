"""Where ortplug keeps what it writes (engine caches, compiled models) and how entries are keyed.

Everything lives under ``platformdirs.user_cache_dir("ortplug")``, or under
``ORTPLUG_CACHE_DIR`` when set. Entries are keyed by a hash of everything that
makes them valid (model fingerprint, ONNX Runtime version, provider options...),
so a changed input gets a new directory instead of a stale entry.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "cache_key", "cache_root"]

#: Environment variable that moves the cache root.
CACHE_ENV = "ORTPLUG_CACHE_DIR"


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """The cache root: ``$ORTPLUG_CACHE_DIR`` or the platform's user cache dir for ortplug."""
    env = os.environ if environ is None else environ
    configured = env.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    import platformdirs  # deferred: only code that writes a cache needs it

    return Path(platformdirs.user_cache_dir("ortplug", appauthor=False))


def cache_dir(*parts: str, environ: Mapping[str, str] | None = None) -> Path:
    """Create (if needed) and return ``<cache root>/<parts...>``.

    Raises ``OSError`` naming the directory and ``ORTPLUG_CACHE_DIR`` when it
    cannot be created (for instance when the variable points at a file).
    """
    root = cache_root(environ)
    path = root.joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OSError(
            f"ortplug cache directory {path} cannot be created ({exc.strerror or exc}); "
            f"set {CACHE_ENV} to a writable directory (now: {root})"
        ) from exc
    return path


def cache_key(*parts: object) -> str:
    """A short, stable hex key for a cache entry from JSON-serializable parts."""
    import hashlib  # deferred: OpenSSL start-up is only paid by code that keys a cache

    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]
