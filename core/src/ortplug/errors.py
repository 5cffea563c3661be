"""Exceptions and warnings ortplug raises; each message names the thing, the expected and the given."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "InputValidationError",
    "OrtplugCacheWarning",
    "OrtplugPluginWarning",
    "PluginConflictError",
    "ProviderFallbackWarning",
    "ProviderNotRealizedError",
    "RunTerminatedError",
    "RuntimeNotInstalledError",
]


class RuntimeNotInstalledError(ImportError):
    """No ONNX Runtime wheel is installed; the message names the command that installs one."""


class InputValidationError(ValueError):
    """The inputs given to ``run`` do not fit the model; ``problems`` lists every mismatch."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("invalid model inputs:\n  - " + "\n  - ".join(self.problems))


class ProviderNotRealizedError(RuntimeError):
    """An explicitly requested accelerator is missing from the session ONNX Runtime built."""

    def __init__(
        self, requested: Sequence[str], realized: Sequence[str], missing: Sequence[str], cause: str
    ) -> None:
        self.requested = tuple(requested)
        self.realized = tuple(realized)
        self.missing = tuple(missing)
        self.cause = cause
        super().__init__(
            f"requested execution provider(s) {', '.join(missing)} not realized; "
            f"requested chain: {list(requested)}, realized chain: {list(realized)}; "
            f"cause reported by ONNX Runtime: {cause or 'none given'}"
        )


class RunTerminatedError(RuntimeError):
    """A run stopped (or refused to start) because ``OnnxBackend.terminate()`` was called."""


class PluginConflictError(ValueError):
    """Two plugins claim the same provider kind or alias."""


class ProviderFallbackWarning(RuntimeWarning):
    """A policy-chosen chain ran without any of its accelerators (it fell back to CPU)."""


class OrtplugPluginWarning(RuntimeWarning):
    """A plugin failed to load or raised in a hook; the host goes on without it."""


class OrtplugCacheWarning(RuntimeWarning):
    """A file in ortplug's cache directory is corrupt, foreign or unreadable; it is ignored."""
