"""``HostCapabilities``: frozen facts about the host, composed from every plugin's probes."""

from __future__ import annotations

import json
import platform
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from ..errors import OptionError, OrtplugConfigWarning
from ..log import user_stacklevel
from ..settings import OVERRIDE_PREFIX, settings
from .runtime import builtin_providers, onnxruntime_or_none

__all__ = [
    "DEFAULT_PROBE_TIMEOUT_S",
    "OVERRIDE_PREFIX",
    "OVERRIDE_TYPES",
    "HostCapabilities",
    "HostProbe",
    "base_fact",
    "compose_host",
    "fact_label",
    "facts_problem",
    "override_variable",
    "probe_overridden",
]

#: Seconds a probe may take before its facts are taken as unknown.
DEFAULT_PROBE_TIMEOUT_S = 10.0

_PROBE_NAME = re.compile(r"^[a-z][a-z0-9]*$")
_FACT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _check_probe_name(_: Any, __: Any, value: str) -> None:
    if not isinstance(value, str) or not _PROBE_NAME.match(value):
        raise OptionError(
            f"HostProbe.name: expected lower-case letters and digits like 'cuda', got {value!r}"
        )


def _as_names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _check_fact_names(_: Any, __: Any, value: tuple[str, ...]) -> None:
    for name in value:
        if not isinstance(name, str) or not _FACT_NAME.match(name):
            raise OptionError(
                f"HostProbe.facts: expected lower-case identifiers like 'driver_version', "
                f"got {name!r}"
            )


def _check_timeout(_: Any, __: Any, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 600:
        raise OptionError(f"HostProbe.timeout: expected seconds in (0, 600], got {value!r}")


#: The types an override can have (what JSON gives): ``HostProbe.types`` names these only.
OVERRIDE_TYPES = (bool, int, float, str, list, dict)


def _freeze_types(value: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise OptionError(f"HostProbe.types: expected a mapping of fact to type, got {value!r}")
    for fact, allowed in value.items():
        given = allowed if isinstance(allowed, tuple) else (allowed,)
        if not given or any(t not in OVERRIDE_TYPES for t in given):
            names = ", ".join(t.__name__ for t in OVERRIDE_TYPES)
            raise OptionError(
                f"HostProbe.types[{fact!r}]: expected one of {names} or a tuple of them, "
                f"got {allowed!r}"
            )
    return MappingProxyType(dict(value))


@attrs.frozen
class HostProbe:
    """A lazily run detector of host facts, run at most once per process, in a thread.

    ``detect`` returns the declared ``facts`` as JSON values (:func:`facts_problem`); past
    ``timeout`` seconds, or on an exception, they are ``None`` and the probe is reported failed.
    ``ORTPLUG_OVERRIDE_<NAME>_<FACT>`` forces a fact, of the type ``types`` declares
    (``{"usable_cpus": int}``). Code that could crash belongs in a subprocess
    (:func:`ortplug.host.probing.run_probe_script`). ``identity``, a cheap callable returning
    what the facts depend on (library files, environment variables), keeps them across processes.
    """

    name: str = attrs.field(validator=_check_probe_name)
    facts: tuple[str, ...] = attrs.field(converter=_as_names, validator=_check_fact_names)
    detect: Callable[[], Mapping[str, object]] = attrs.field(
        validator=attrs.validators.is_callable()
    )
    description: str = ""
    timeout: float = attrs.field(default=DEFAULT_PROBE_TIMEOUT_S, validator=_check_timeout)
    types: Mapping[str, type | tuple[type, ...]] = attrs.field(
        factory=dict, converter=_freeze_types, eq=False, hash=False
    )
    identity: Callable[[], object] | None = attrs.field(default=None, eq=False, hash=False)


def override_variable(probe: str, fact: str) -> str:
    """The environment variable that forces one probe fact."""
    return f"{OVERRIDE_PREFIX}{probe.upper()}_{fact.upper()}"


def probe_overridden(probe: str, environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` forces any fact of ``probe`` (an ``ORTPLUG_OVERRIDE_<PROBE>_*``)."""
    prefix = f"{OVERRIDE_PREFIX}{probe.upper()}_"
    return any(variable.startswith(prefix) for variable in environ)


def fact_label(probe: str, fact: str) -> str:
    """How an error names a fact: ``cpu usable_cpus``, or its override variable when one is set."""
    variable = override_variable(probe, fact)
    return variable if variable in settings().overrides else f"{probe} {fact}"


#: Bounds of a probe's facts as JSON holds them: device lists and flags, not data.
_MAX_FACT_DEPTH = 32
_MAX_FACT_VALUES = 100_000
_JSON_SCALARS = (str, int, float, bool, type(None))
#: Integers a fact may hold: JSON readers keep 64 bits, and Python refuses to print one of more
#: than 4300 digits (``ortplug info`` failed on ``10**5000``).
_MAX_FACT_INT = 1 << 64


def facts_problem(facts: Mapping[str, object]) -> str | None:
    """Why a probe's facts are not what JSON holds (they are kept and printed as JSON), naming
    the first fact that is not, or ``None``; bounded, walked without recursion."""
    stack: list[tuple[str, str, object, int]] = [
        (str(name), str(name), value, 1) for name, value in facts.items()
    ]
    seen = 0
    while stack:
        fact, where, value, depth = stack.pop()
        seen += 1
        if seen > _MAX_FACT_VALUES or depth > _MAX_FACT_DEPTH:
            return (
                f"fact {fact!r}: expected at most {_MAX_FACT_VALUES} values nested at most "
                f"{_MAX_FACT_DEPTH} deep, got more"
            )
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    kind = type(key).__name__
                    return f"fact {where!r}: expected string keys (JSON), got a {kind} key"
                stack.append((fact, f"{where}.{key}", item, depth + 1))
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack.extend((fact, f"{where}[{i}]", item, depth + 1) for i, item in enumerate(value))
        elif not isinstance(value, _JSON_SCALARS):
            return (
                f"fact {where!r}: expected a JSON value (null, bool, number, string, list or "
                f"mapping), got {type(value).__name__}"
            )
        elif isinstance(value, int) and not -_MAX_FACT_INT < value < _MAX_FACT_INT:
            return (
                f"fact {where!r}: expected an integer JSON readers keep (below 2**64 in size), "
                f"got one of {value.bit_length()} bits"
            )
    return None


def _freeze_facts(value: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in value.items()})


def _normalize_platform(value: str) -> str:
    return {"darwin": "darwin", "linux": "linux", "windows": "win32", "win32": "win32"}.get(
        value.lower(), value.lower()
    )


@attrs.frozen(kw_only=True)
class HostCapabilities:
    """What this host offers: platform, ONNX Runtime build and every plugin's probe facts (by hand
    in tests; :meth:`ortplug.PluginHost.host_capabilities` detects them)."""

    platform: str = attrs.field(converter=_normalize_platform)
    machine: str
    ort_version: str | None = None
    available_providers: tuple[str, ...] = attrs.field(default=(), converter=_as_names)
    facts: Mapping[str, Mapping[str, Any]] = attrs.field(
        factory=dict, converter=_freeze_facts, eq=False, hash=False
    )

    def fact(self, probe: str, name: str, default: Any = None) -> Any:
        """One probe fact, or ``default`` when the probe or fact is absent or ``None``."""
        value = self.facts.get(probe, {}).get(name)
        return default if value is None else value

    def has_provider(self, ort_name: str) -> bool:
        """Whether the ONNX Runtime wheel has this provider built in (a plugin-EP library's
        provider never is: read your probe's ``devices`` for one)."""
        return ort_name in self.available_providers

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``ortplug info --json``."""
        return {
            "platform": self.platform,
            "machine": self.machine,
            "ort_version": self.ort_version,
            "available_providers": list(self.available_providers),
            "facts": {k: _json_ready(dict(v)) for k, v in self.facts.items()},
        }


def _json_ready(value: Any) -> Any:
    """A fact as JSON holds it: mappings as dicts, sets sorted into lists, tuples as lists."""
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        items = [_json_ready(v) for v in value]
        try:
            return sorted(items)
        except TypeError:  # mixed types: still one stable order
            return sorted(items, key=repr)
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


_MISSING = object()


def _bad_override(variable: str, raw: str, expected: str) -> object:
    warnings.warn(
        f"ignoring {variable}={raw!r}: expected {expected}; unset it or fix the value",
        OrtplugConfigWarning,
        stacklevel=user_stacklevel(),
    )
    return _MISSING


def _parse_override(
    variable: str, raw: str, allowed: type | tuple[type, ...] | None = None
) -> object:
    """An override is JSON (``2``, ``true``, ``["avx2"]``), a plain string, or empty (absent).

    A value of another type than ``allowed`` is ignored with one warning naming the variable.
    """
    if raw == "":
        return None
    try:
        value: object = json.loads(raw)
    except (ValueError, RecursionError):
        value = raw
    if allowed is None:
        return value
    allowed_types = allowed if isinstance(allowed, tuple) else (allowed,)
    wrong_bool = isinstance(value, bool) and bool not in allowed_types
    if wrong_bool or not isinstance(value, allowed_types):
        names = " or ".join(t.__name__ for t in allowed_types)
        return _bad_override(variable, raw, f"a JSON {names}")
    return value


def _base_facts() -> dict[str, Any]:
    ort = onnxruntime_or_none()
    return {
        "platform": sys.platform,
        "machine": platform.machine(),
        "ort_version": getattr(ort, "__version__", None),
        "available_providers": builtin_providers(ort) if ort else (),
    }


def base_fact(name: str, detected: str, environ: Mapping[str, str], *, warn: bool = False) -> str:
    """``platform`` or ``machine``: as detected, or as ``ORTPLUG_OVERRIDE_<NAME>`` sets it (a
    blank value is ignored); host facts, hardware and the plugin host all read it here, and
    the host facts' detection (``warn``) is the one that says a value was ignored."""
    variable = OVERRIDE_PREFIX + name.upper()
    raw = environ.get(variable)
    if raw is None:
        return detected
    if not raw.strip():
        if warn:
            _bad_override(variable, raw, f"a non-empty {name} such as {detected!r}")
        return detected
    return raw.strip()


def _apply_base_overrides(base: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    for name in list(base):
        raw = environ.get(OVERRIDE_PREFIX + name.upper())
        if raw is None:
            continue
        if name == "available_providers":
            base[name] = tuple(p.strip() for p in raw.split(",") if p.strip())
        elif name == "ort_version":
            base[name] = raw.strip() or None
        else:
            base[name] = base_fact(name, base[name], environ, warn=True)
    return base


def _probe_facts(
    probe: HostProbe, environ: Mapping[str, str], detected: Mapping[str, object] | None
) -> dict[str, Any]:
    """Keep a probe's declared facts (missing ones ``None``) and apply its overrides."""
    values = {name: (detected or {}).get(name) for name in probe.facts}
    for name in probe.facts:
        variable = override_variable(probe.name, name)
        if variable in environ:
            value = _parse_override(variable, environ[variable], probe.types.get(name))
            if value is not _MISSING:
                values[name] = value
    return values


def compose_host(
    probe_results: Iterable[tuple[HostProbe, Mapping[str, object] | None]],
    environ: Mapping[str, str] | None = None,
) -> HostCapabilities:
    """Assemble ``HostCapabilities`` from base facts and probe results, overrides applied."""
    env = settings().overrides if environ is None else environ
    base = _apply_base_overrides(_base_facts(), env)
    facts = {probe.name: _probe_facts(probe, env, detected) for probe, detected in probe_results}
    return HostCapabilities(facts=facts, **base)
