"""``--providers``: a provider chain with typed options, as text (``cuda:device_id=1,cpu``) or as
JSON (the forms: docs/cli.md); parsing needs no plugin, :func:`resolve_chain` checks kinds."""

from __future__ import annotations

import argparse
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import OptionError
from ._usage import UsageError

if TYPE_CHECKING:
    from ..providers.configs import ProviderConfig

__all__ = ["GRAMMAR_HELP", "ProviderEntry", "chain_label", "provider_chain", "resolve_chain"]

#: The grammar in a few lines, for ``--help``.
GRAMMAR_HELP = """\
--providers takes a chain, tried in order, strictly enforced:
  cuda,cpu                      kinds (or ONNX Runtime names)
  cuda:device_id=1,gpu_mem_limit=2000000000,cpu:threads=4
                                options follow a kind after ':'; a token
                                with '=' belongs to the provider before it
  '[{"kind": "cuda", "device_id": 1}, "cpu"]'
                                JSON (for values containing commas)
values: integers, numbers, true/false/1/0, text; `ortplug info` lists the
kinds"""

_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXAMPLE = "e.g. cuda:device_id=1,cpu"
_BOOLS = {"true": True, "1": True, "false": False, "0": False}


class ProviderEntry(NamedTuple):
    """One provider of a chain as typed: its kind and options, before any plugin checked them."""

    kind: str
    options: Mapping[str, object]
    #: Option values are strings to convert to each field's type (the text form).
    from_text: bool


def provider_chain(text: str) -> tuple[ProviderEntry, ...]:
    """The ``--providers`` argument type: text or JSON into entries (syntax only)."""
    try:
        if text.lstrip()[:1] in ("[", "{"):
            return _from_json(text)
        return _from_text(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _from_text(text: str) -> tuple[ProviderEntry, ...]:
    if not text.strip():
        raise ValueError(f"expected a chain of provider kinds, {_EXAMPLE}, got {text!r}")
    entries: list[tuple[str, dict[str, object]]] = []
    for raw in text.split(","):
        token = raw.strip()
        head, eq, _ = token.partition("=")
        if eq and ":" not in head:
            if not entries:
                raise ValueError(f"option {token!r} comes before any provider kind in {text!r}")
            _add_option(entries[-1], token, text)
            continue
        kind, colon, option = token.partition(":")
        if not _KIND.match(kind):
            what = "an empty entry" if not token else repr(token)
            raise ValueError(f"expected a provider kind, {_EXAMPLE}, got {what} in {text!r}")
        entries.append((kind, {}))
        if colon:
            _add_option(entries[-1], option, text)
    return tuple(ProviderEntry(kind, options, True) for kind, options in entries)


def _add_option(entry: tuple[str, dict[str, object]], token: str, text: str) -> None:
    kind, options = entry
    field, eq, value = token.partition("=")
    if not eq or not _FIELD.match(field) or not value:
        raise ValueError(f"{kind}: expected FIELD=VALUE, got {token!r} in {text!r}")
    if field in options:
        raise ValueError(f"{kind}: option {field!r} given twice in {text!r}")
    options[field] = value


def _from_json(text: str) -> tuple[ProviderEntry, ...]:
    import json  # deferred: only a JSON chain needs it

    expected = 'a JSON list of kinds and {"kind": ...} objects'
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"expected {expected}, got {text!r} ({exc})") from None
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise ValueError(f"expected {expected}, got {text!r}")
    entries = []
    for item in items:
        if isinstance(item, str) and item:
            entries.append(ProviderEntry(item, {}, False))
        elif isinstance(item, dict) and isinstance(item.get("kind"), str):
            options = {k: v for k, v in item.items() if k != "kind"}
            entries.append(ProviderEntry(item["kind"], options, False))
        else:
            raise ValueError(f"expected {expected}, got the item {item!r} in {text!r}")
    return tuple(entries)


def resolve_chain(
    entries: Sequence[ProviderEntry], flag: str = "--providers"
) -> list[ProviderConfig]:
    """Configs from the plugins' registry; an unknown kind, a bad option or a kind listed twice
    is a usage error."""
    from ..plugin_host.manager import get_plugin_host
    from ..plugin_host.registry import check_distinct

    registry = get_plugin_host().provider_registry()
    configs = []
    try:
        for entry in entries:
            spec = registry.lookup(entry.kind)
            kind = spec.type.kind
            options = entry.options
            if entry.from_text:
                options = _typed_options(kind, spec.type.config_cls, options)
            configs.append(registry.parse({**options, "kind": kind}))
        check_distinct([(entry.kind, config) for entry, config in zip(entries, configs)])
    except OptionError as exc:
        raise UsageError(f"{flag}: {exc}") from exc
    return configs


def _typed_options(kind: str, cls: type[Any], options: Mapping[str, object]) -> dict[str, object]:
    """Each text value converted to its field's annotated type (unknown fields left to the registry)."""
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # annotations that cannot be resolved: the config checks text
        hints = {}
    return {
        field: _convert(kind, field, str(value), hints[field]) if field in hints else value
        for field, value in options.items()
    }


def _convert(kind: str, field: str, value: str, hint: object) -> object:
    """``value`` as the first of bool, int, float the field accepts; else the text itself."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    accepted = typing.get_args(hint) if union else (hint,)
    if bool in accepted and value.lower() in _BOOLS:
        return _BOOLS[value.lower()]
    if int in accepted:
        try:
            return int(value)
        except ValueError:
            pass
    if float in accepted:
        try:
            return float(value)
        except ValueError:
            pass
    names = {bool: "true, false, 1 or 0", int: "an integer", float: "a number"}
    wanted = [text for kind_of, text in names.items() if kind_of in accepted]
    if wanted and str not in accepted:
        raise OptionError(f"{kind} option {field}: expected {' or '.join(wanted)}, got {value!r}")
    return value


def chain_label(configs: Sequence[ProviderConfig]) -> str:
    """A chain in the ``--providers`` text form, with only the options that differ from defaults."""
    import attrs

    parts = []
    for config in configs:
        changed = []
        cls: Any = type(config)
        if attrs.has(cls):
            for field in attrs.fields(cls):
                value = getattr(config, field.name)
                default = field.default
                if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                    default = default.factory()
                if value != default:
                    text = str(value).lower() if isinstance(value, bool) else str(value)
                    changed.append(f"{field.name}={text}")
        parts.append(config.kind + (":" + ",".join(changed) if changed else ""))
    return ",".join(parts)
