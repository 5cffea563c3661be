"""Field helpers for provider configs: validated attrs fields and ONNX Runtime's string encoding.

Plugins (ours and third parties') declare their typed options with these so
every provider rejects bad values the same way, naming the field and what it
accepts, and serializes them the way ONNX Runtime parses them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .errors import OptionError

__all__ = [
    "bool_field",
    "choice_field",
    "encode_option",
    "int_field",
    "ort_options",
    "path_field",
    "plain_options",
    "seconds_field",
]


def _check_optional_bool(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise OptionError(f"{attribute.name}: expected true, false or null, got {value!r}")


def bool_field(default: bool | None = None) -> Any:
    """A ``bool | None`` option; ``None`` leaves the provider's own default."""
    return attrs.field(default=default, validator=_check_optional_bool)


def int_field(default: int | None = None, *, minimum: int = 0, maximum: int | None = None) -> Any:
    """An ``int | None`` option within ``[minimum, maximum]`` (bools are rejected)."""

    def check(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None:
            return
        in_range = (
            isinstance(value, int)
            and not isinstance(value, bool)
            and value >= minimum
            and (maximum is None or value <= maximum)
        )
        if not in_range:
            bounds = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
            raise OptionError(
                f"{attribute.name}: expected an integer {bounds} or null, got {value!r}"
            )

    return attrs.field(default=default, validator=check)


def _check_seconds(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (
        not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0
    ):
        raise OptionError(
            f"{attribute.name}: expected a positive number of seconds or null, got {value!r}"
        )


def seconds_field() -> Any:
    """A ``float | None`` duration in seconds, positive."""
    return attrs.field(default=None, validator=_check_seconds)


def choice_field(
    choices: Iterable[str],
    *,
    default: str | None = None,
    aliases: Mapping[str, str] | None = None,
) -> Any:
    """A ``str | None`` option from a closed set; case-insensitive, with optional aliases.

    The stored value is always the canonical spelling from ``choices``.
    """
    canonical = tuple(choices)
    lookup = {c.lower(): c for c in canonical}
    lookup.update({alias.lower(): target for alias, target in (aliases or {}).items()})

    def normalize(value: object) -> object:
        if isinstance(value, str):
            return lookup.get(value.lower(), value)
        return value

    def check(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and value not in canonical:
            accepted = ", ".join(canonical)
            extra = f" (aliases: {', '.join(aliases)})" if aliases else ""
            raise OptionError(f"{attribute.name}: expected one of {accepted}{extra}, got {value!r}")

    return attrs.field(default=default, converter=normalize, validator=check)


def path_field() -> Any:
    """An optional filesystem path option, stored as a string."""

    def convert(value: object) -> object:
        return str(value) if hasattr(value, "__fspath__") else value

    def check(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and (not isinstance(value, str) or not value):
            raise OptionError(f"{attribute.name}: expected a path or null, got {value!r}")

    return attrs.field(default=None, converter=convert, validator=check)


def encode_option(value: object) -> str:
    """One option value as ONNX Runtime reads it: booleans ``"1"``/``"0"``, the rest ``str()``."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def ort_options(pairs: Iterable[tuple[str, object]]) -> dict[str, str]:
    """ONNX Runtime's provider options from ``(ort_name, value)`` pairs.

    ``None`` values are left out (the provider keeps its default); booleans
    become ``"1"``/``"0"``, the one spelling every provider parses as intended
    (CoreML compares against ``"1"``, so ``str(True)`` would switch it off).
    """
    return {name: encode_option(value) for name, value in pairs if value is not None}


def plain_options(config: Any, exclude: Iterable[str] = ()) -> dict[str, object]:
    """A config's set fields as a plain dict (for cache keys and reports)."""
    skip = set(exclude)
    return {
        f.name: getattr(config, f.name)
        for f in attrs.fields(type(config))
        if f.name not in skip and getattr(config, f.name) is not None
    }
