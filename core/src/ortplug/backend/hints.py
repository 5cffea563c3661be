"""The performance hints, and how a build is asked for one (``performance_hint``, else the session
config entry :data:`HINT_ENTRY`, else ``"latency"``), without importing serving."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import OptionError

__all__ = ["DEFAULT_HINT", "HINTS", "HINT_ENTRY", "performance_hint"]

HINTS = ("latency", "throughput", "cumulative_throughput")
DEFAULT_HINT = "latency"
#: The session config entry that carries the hint (``SessionOptions.add_session_config_entry``).
HINT_ENTRY = "ortplug.performance_hint"


def performance_hint(given: object, config_entries: Mapping[str, str] | None = None) -> str:
    """``given``, else the session config entry :data:`HINT_ENTRY`, else ``"latency"``."""
    source = "performance_hint"
    if given is None and config_entries and HINT_ENTRY in config_entries:
        given, source = config_entries[HINT_ENTRY], f"session config entry {HINT_ENTRY!r}"
    if given is None:
        return DEFAULT_HINT
    if given not in HINTS:
        raise OptionError(f"{source}: expected one of {', '.join(HINTS)}, got {given!r}")
    return str(given)
