"""The plugin failures of one plugin host: each recorded and warned once, or raised when strict.

Shared by the loader, the probe runner and the hook caller, so that a failure anywhere is
one :class:`~ortplug.types.PluginFailure` naming the plugin's distribution.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from ..errors import OrtplugPluginWarning, PluginError
from ..log import user_stacklevel
from ..plugins.types import PluginFailure

__all__ = ["FailureLog", "describe"]


def describe(exc: BaseException) -> str:
    """The exception type and its whole message on one line (pluggy's validation spans lines)."""
    text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class FailureLog:
    """Every distinct failure, in order; ``strict`` (``ORTPLUG_STRICT_PLUGINS=1``) raises instead.

    ``distributions``: plugin -> (distribution, version), the loader's, read when a failure
    is recorded.
    """

    def __init__(self, strict: bool, distributions: Mapping[str, tuple[str, str]]) -> None:
        self.strict = strict
        self.distributions = distributions
        self._seen: dict[PluginFailure, None] = {}  # an ordered set

    def record(self, plugin: str, phase: str, exc: BaseException) -> None:
        """Record ``plugin``'s failure in ``phase`` and warn once (strict: raise ``PluginError``)."""
        failure = PluginFailure(
            plugin=plugin, distribution=self.distribution(plugin), phase=phase, error=describe(exc)
        )
        if self.strict:
            raise PluginError(plugin, phase, failure.error) from exc
        if failure not in self._seen:
            self._seen[failure] = None
            warnings.warn(failure.message(), OrtplugPluginWarning, stacklevel=user_stacklevel())

    def all(self) -> tuple[PluginFailure, ...]:
        """Every failure recorded so far, in order."""
        return tuple(self._seen)

    def latest(self, plugin: str) -> PluginFailure | None:
        """The last failure recorded for ``plugin``."""
        return next((f for f in reversed(self._seen) if f.plugin == plugin), None)

    def distribution(self, plugin: str) -> str | None:
        """``ortplug-acme 1.0``: the plugin's distribution and version, if it came from one."""
        dist = self.distributions.get(plugin)
        return f"{dist[0]} {dist[1]}" if dist else None

    def origin(self, plugin: str) -> str:
        """The plugin's distribution, or ``no distribution`` (registered directly)."""
        return self.distribution(plugin) or "no distribution"
