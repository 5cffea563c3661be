"""Shared pieces of the option configs: building one from a plain dict, string-to-string entries."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import attrs

from ..errors import OptionError

__all__ = ["config_from_dict", "string_entries"]

_T = TypeVar("_T")


def config_from_dict(cls: type[_T], data: Mapping[str, Any], what: str) -> _T:
    """``cls(**data)`` for an attrs config, naming unknown keys and the allowed ones."""
    if not isinstance(data, Mapping):
        raise OptionError(f"{what}: expected a mapping of field names, got {type(data).__name__}")
    allowed = [f.name for f in attrs.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise OptionError(f"{what}: unknown field(s) {unknown}; allowed: {', '.join(allowed)}")
    return cls(**data)


def string_entries(value: Mapping[str, str]) -> Mapping[str, str]:
    """Validate ``config_entries``: string keys and string values, frozen."""
    if not isinstance(value, Mapping):
        raise OptionError(f"config_entries: expected a mapping of strings, got {value!r}")
    for key, entry in value.items():
        if not isinstance(key, str) or not isinstance(entry, str):
            raise OptionError(
                f"config_entries: expected string keys and values, got {key!r}: {entry!r}"
            )
    return MappingProxyType(dict(value))
