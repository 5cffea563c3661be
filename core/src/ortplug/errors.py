"""Exceptions and warnings ortplug raises; each message names the thing, the expected and the given.

Every exception ortplug raises on purpose derives from :class:`OrtplugError` and keeps the
builtin base code catches today, so ``except ValueError`` and ``except OrtplugError`` both work."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "AddonNotInstalledError",
    "BackendClosedError",
    "BuildTimeoutError",
    "CacheError",
    "CheckpointError",
    "GivenInputsError",
    "InputValidationError",
    "InputsNotAcceptedError",
    "MissingFileError",
    "ModelLoadError",
    "NoProviderError",
    "OptionError",
    "OptionTypeError",
    "OrtplugCacheWarning",
    "OrtplugConfigWarning",
    "OrtplugError",
    "OrtplugPluginWarning",
    "PluginConflictError",
    "PluginError",
    "ProviderFallbackWarning",
    "ProviderNotRealizedError",
    "RunFailedError",
    "RunTerminatedError",
    "RuntimeNotInstalledError",
    "VerificationError",
    "VerificationWarning",
]


class OrtplugError(Exception):
    """Base of every exception ortplug raises on purpose."""


class OptionError(OrtplugError, ValueError):
    """An argument, provider option, session option or metadata value is invalid."""


class OptionTypeError(OrtplugError, TypeError):
    """An argument has the wrong type; the message names it, the expected and the given type."""


class MissingFileError(OrtplugError, FileNotFoundError):
    """A file the user named (model, metadata, input, library) does not exist."""


class CacheError(OrtplugError, OSError):
    """ortplug's cache directory cannot be created or written; the message names the fix."""


class CheckpointError(OptionError):
    """A model or metadata file cannot be read; the message names the file."""


class ModelLoadError(OptionError):
    """ONNX Runtime refused to load the model (not a provider problem)."""


class RuntimeNotInstalledError(OrtplugError, ImportError):
    """No ONNX Runtime wheel is installed; the message names the command that installs one."""


class AddonNotInstalledError(OrtplugError, ImportError):
    """A name or mode of an add-on distribution (serving, Ray, the drop-in) that is not installed."""


class BuildTimeoutError(OrtplugError, TimeoutError):
    """Building the session took longer than ``SessionOptionsConfig.load_timeout_s``."""


class NoProviderError(OrtplugError, RuntimeError):
    """No plugin offered an execution provider for this checkpoint on this host."""


class InputValidationError(OptionError):
    """The inputs given to ``run`` do not fit the model; ``problems`` lists every mismatch."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("invalid model inputs:\n  - " + "\n  - ".join(self.problems))


class GivenInputsError(OptionError):
    """Inputs given to verification (``verify_inputs``, ``ortplug verify --input``) do not fit the
    model; ``problem`` names the input, what was expected and what was given."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"verify_inputs: {problem}")


def _declines_text(declines: Mapping[str, str]) -> str:
    return "; ".join(f"{kind}: {reason}" for kind, reason in declines.items())


class ProviderNotRealizedError(OrtplugError, RuntimeError):
    """An explicitly requested accelerator is missing from the session ONNX Runtime built;
    ``cause``: what ORT said, ``declines``: each missing kind's plugin's reason."""

    def __init__(
        self,
        requested: Sequence[str],
        realized: Sequence[str],
        missing: Sequence[str],
        cause: str,
        declines: Mapping[str, str] | None = None,
    ) -> None:
        self.requested = tuple(requested)
        self.realized = tuple(realized)
        self.missing = tuple(missing)
        self.cause = cause
        self.declines = dict(declines or {})
        plugin_part = f"; the plugins say: {_declines_text(self.declines)}" if self.declines else ""
        super().__init__(
            f"requested execution provider(s) {', '.join(missing)} not realized; "
            f"requested chain: {list(requested)}, realized chain: {list(realized)}; "
            f"ONNX Runtime said: {cause or 'nothing'}{plugin_part}"
        )


class BackendClosedError(OrtplugError, RuntimeError):
    """The backend (or a binding of it) was closed; build a new one."""


class RunFailedError(OrtplugError, RuntimeError):
    """ONNX Runtime failed a run; the message names the model, the providers and ORT's error."""


class RunTerminatedError(OrtplugError, RuntimeError):
    """A run stopped (or refused to start) because ``OnnxBackend.terminate()`` was called."""


class VerificationError(OrtplugError, RuntimeError):
    """A provider or precision variant gave outputs outside the tolerance of the CPU reference;
    ``verdict`` (``None``: nothing could be checked) names each output and its difference."""

    def __init__(self, message: str, verdict: object = None) -> None:
        self.verdict = verdict
        super().__init__(message)


class PluginConflictError(OptionError):
    """Two plugins claim the same provider kind, alias, ONNX Runtime name or probe name."""


class PluginError(OrtplugError, RuntimeError):
    """A plugin failed to import, register or run a hook (raised with ``ORTPLUG_STRICT_PLUGINS=1``);
    ``plugin``, ``phase`` and ``error`` say what failed, the original is the ``__cause__``."""

    def __init__(self, plugin: str, phase: str, error: str) -> None:
        self.plugin = plugin
        self.phase = phase
        self.error = error
        super().__init__(f"ortplug plugin {plugin!r} failed in {phase}: {error}")


class InputsNotAcceptedError(OptionError):
    """The CPU reference ran none of the input sizes ortplug generated; real inputs are needed
    (``first``: the first feed tried, ``cause``: what running it raised)."""

    def __init__(self, message: str, *, first: object, cause: BaseException) -> None:
        self.first = first
        self.cause = cause
        super().__init__(message)


class ProviderFallbackWarning(RuntimeWarning):
    """A policy-chosen chain ran without any of its accelerators (it fell back to CPU)."""


class OrtplugPluginWarning(RuntimeWarning):
    """A plugin failed to load or raised in a hook; the host goes on without it."""


class OrtplugConfigWarning(RuntimeWarning):
    """An ``ORTPLUG_*`` environment variable or metadata key is invalid or unknown; it is ignored."""


class VerificationWarning(RuntimeWarning):
    """A policy dropped a provider or variant whose outputs failed verification and took the next."""


class OrtplugCacheWarning(RuntimeWarning):
    """A file in ortplug's cache directory is corrupt, foreign or unreadable; it is ignored."""
