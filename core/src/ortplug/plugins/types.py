"""Frozen values that plugins return from hooks, and the records the host keeps about plugins."""

from __future__ import annotations

from typing import Any

import attrs

from ..checkpoint.variants import COMPUTE_PRECISIONS
from ..errors import OptionError, OptionTypeError
from ..providers.configs import ProviderConfig, is_provider_config

__all__ = [
    "DoctorCheck",
    "MetadataKey",
    "PluginFailure",
    "PluginInfo",
    "ProviderDecline",
    "ProviderOffer",
]


def _check_config(_: Any, __: Any, value: Any) -> None:
    if not is_provider_config(value):
        raise OptionTypeError(
            f"ProviderOffer.config: expected a provider config (a 'kind' and to_ort()), got {value!r}"
        )


def _typed(owner: str, expected: type) -> Any:
    """A validator whose error is one line: ``Owner.field: expected int, got str 'high'``."""

    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise OptionTypeError(
                f"{owner}.{attribute.name}: expected {expected.__name__}, "
                f"got {type(value).__name__} {value!r}"
            )

    return check


def _check_precision(_: Any, __: Any, value: Any) -> None:
    if value is not None and value not in COMPUTE_PRECISIONS:
        raise OptionError(
            f"ProviderOffer.precision: expected None or one of {', '.join(COMPUTE_PRECISIONS)}, "
            f"got {value!r}"
        )


@attrs.frozen
class ProviderOffer:
    """A plugin's proposal to run a checkpoint on a provider, with a preference and a reason.

    ``preference`` orders one kind's offers (kinds go as their manifests declare); ``place`` and
    ``plugin`` are set by the plugin host. ``variant`` names one of ``metadata.variants`` to run
    instead of the reference weights; ``precision`` the reduced precision ``config`` computes at
    (``"bf16"``, ``"fp16"``, ``"tf32"``; ``None``: the weights' own). Such a candidate serves only
    once verified at that precision's tolerance.
    """

    config: ProviderConfig = attrs.field(validator=_check_config)
    preference: int = attrs.field(validator=_typed("ProviderOffer", int))
    reason: str = attrs.field(validator=_typed("ProviderOffer", str))
    plugin: str = ""
    variant: str | None = attrs.field(
        default=None,
        kw_only=True,
        validator=attrs.validators.optional(_typed("ProviderOffer", str)),
    )
    precision: str | None = attrs.field(default=None, kw_only=True, validator=_check_precision)
    place: int = attrs.field(default=0, kw_only=True, eq=False)

    def rank(self) -> tuple[int, int]:
        """How the default policy ranks the offer: its kind's place, then its preference."""
        return self.place, -self.preference


@attrs.frozen
class ProviderDecline:
    """A plugin's statement that it will not offer ``kind`` here, and why (``ortplug info`` shows
    it: a missing driver, a runtime without the provider, an int8 checkpoint...)."""

    kind: str = attrs.field(validator=_typed("ProviderDecline", str))
    reason: str = attrs.field(validator=_typed("ProviderDecline", str))
    plugin: str = ""


@attrs.frozen
class PluginFailure:
    """A plugin that failed to import, register or run a hook."""

    plugin: str
    distribution: str | None
    phase: str
    error: str

    def message(self) -> str:
        """One line: what failed, where, and how to switch the plugin off."""
        dist = f" ({self.distribution})" if self.distribution else ""
        return (
            f"ortplug plugin {self.plugin!r}{dist} failed in {self.phase}: {self.error}; "
            f"disable it with ORTPLUG_DISABLE_PLUGINS={self.plugin}"
        )


@attrs.frozen
class PluginInfo:
    """A row of ``ortplug plugins``: a plugin's name, distribution, status and hooks."""

    name: str
    distribution: str | None
    version: str | None
    status: str  # "active", "failing" (loaded, a hook failed), "blocked" or "failed"
    hooks: tuple[str, ...] = ()
    error: str | None = None
    note: str | None = None  # e.g. that it has no declaration, and the fix

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form for ``--json``."""
        return attrs.asdict(self)


@attrs.frozen
class DoctorCheck:
    """One line of ``ortplug doctor``: what was checked, whether it is fine, and the fix if not."""

    name: str = attrs.field(validator=attrs.validators.min_len(1))
    ok: bool = attrs.field(validator=attrs.validators.instance_of(bool))
    detail: str = attrs.field(validator=attrs.validators.instance_of(str))
    fix: str = ""
    plugin: str = ""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form for ``--json``."""
        return attrs.asdict(self)


def _as_types(value: type | tuple[type, ...]) -> tuple[type, ...]:
    return value if isinstance(value, tuple) else (value,)


@attrs.frozen
class MetadataKey:
    """A key of ``CheckpointMetadata.extra`` a plugin reads, with the type its value must have
    (an undeclared key or a value of another type gets a warning)."""

    name: str = attrs.field(validator=attrs.validators.min_len(1))
    types: tuple[type, ...] = attrs.field(converter=_as_types)
    description: str = attrs.field(validator=attrs.validators.instance_of(str))
    plugin: str = ""

    def problem(self, value: object) -> str | None:
        """What is wrong with ``value`` for this key, or ``None``."""
        wrong_bool = isinstance(value, bool) and bool not in self.types
        if not wrong_bool and isinstance(value, self.types):
            return None
        expected = " or ".join(t.__name__ for t in self.types)
        return (
            f"metadata extra {self.name!r}: expected {expected} ({self.description}), "
            f"got {type(value).__name__} {value!r}"
        )
