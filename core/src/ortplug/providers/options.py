"""Field helpers for provider configs: validated attrs fields and ONNX Runtime's string encoding,
so every provider refuses bad values alike and encodes them as ORT parses them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..errors import OptionError

__all__ = [
    "THREADS_PER_CPU",
    "bool_field",
    "check_threads",
    "choice_field",
    "encode_option",
    "int_field",
    "max_threads",
    "ort_options",
    "path_field",
    "plain_options",
    "seconds_field",
    "threads_field",
]

#: Threads one setting may ask for per CPU this process may use (and never fewer than
#: ``_MIN_THREAD_LIMIT`` in all, so a setting tuned on a wider host still loads on a laptop).
THREADS_PER_CPU = 4
_MIN_THREAD_LIMIT = 64


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


def max_threads() -> int:
    """The most threads a setting may ask for: 4 per CPU this process may use, 64 at least.

    Far more threads than CPUs only oversubscribe them; 100000 hangs a build for minutes.
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(_MIN_THREAD_LIMIT, THREADS_PER_CPU * (cpus or 1))


def check_threads(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as a thread count from ``minimum`` to :func:`max_threads`, else an error.

    The one bound on every thread count ortplug applies (options, flags, records, host facts).
    """
    limit = max_threads()
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= limit:
        default = " (0 = ONNX Runtime's default)" if minimum == 0 else ""
        shown = repr(value)
        raise OptionError(
            f"{name}: expected a thread count from {minimum} to {limit}{default} "
            f"(at most {THREADS_PER_CPU} per CPU this process may use, {_MIN_THREAD_LIMIT} "
            f"at least), got {shown if len(shown) <= 40 else shown[:37] + '...'}"
        )
    return value


def threads_field(*, minimum: int = 1) -> Any:
    """An ``int | None`` thread count bounded by :func:`check_threads`."""

    def check(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            check_threads(attribute.name, value, minimum=minimum)

    return attrs.field(default=None, validator=check)


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
    """ONNX Runtime's provider options from ``(ort_name, value)`` pairs: ``None`` left out,
    booleans ``"1"``/``"0"`` (CoreML compares against ``"1"``: ``"True"`` would switch it off)."""
    return {name: encode_option(value) for name, value in pairs if value is not None}


def plain_options(config: Any, exclude: Iterable[str] = ()) -> dict[str, object]:
    """A config's set fields as a plain dict (for cache keys and reports)."""
    skip = set(exclude)
    return {
        f.name: getattr(config, f.name)
        for f in attrs.fields(type(config))
        if f.name not in skip and getattr(config, f.name) is not None
    }
