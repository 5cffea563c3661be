"""What a plugin provides, declared as data (``ortplug.json``) the core reads without importing
the plugin: the format's tables, its checks and its JSON schema."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import attrs

from ..cache.root import read_cache_file
from ..host.probing import (
    file_identity,
    library_search_dirs,
    site_package_dirs,
    system_library_identity,
)
from .provider_type import DEVICES

__all__ = [
    "DEVICES",
    "FILENAME",
    "FORMAT",
    "HOOKS",
    "HOOK_FORM_HOOKS",
    "MAX_BYTES",
    "SCHEMA_FILE",
    "DeclarationError",
    "FactRead",
    "Identity",
    "KindDeclaration",
    "LibraryDeclaration",
    "MetadataKeyDeclaration",
    "PluginDeclaration",
    "ProbeDeclaration",
    "declaration_path",
    "declaration_schema",
    "declarations_beside",
    "from_json",
    "load_file",
    "mixed_form",
    "parse_declarations",
    "platform_matches",
    "read_declaration",
    "schema_text",
    "source_of",
]

#: The file a plugin's top-level package ships its declaration in.
FILENAME = "ortplug.json"
#: The format version this core reads (the file's ``"ortplug"`` value).
FORMAT = 1
#: The largest declaration file read: one is a few kilobytes, and a bigger one would be
#: parsed at every start (the remembered scan does not keep it).
MAX_BYTES = 256 * 1024
#: The deepest nesting of objects and lists a declaration may have (the format's is 8):
#: deeper JSON is refused before anything walks it, so no check can exhaust the stack.
_MAX_DEPTH = 32
#: Every hook spec (kept in step with ``hookspecs``; checked by a test): a manifest lists those
#: its module implements, never one of :data:`HOOK_FORM_HOOKS`.
HOOKS = frozenset(
    {
        "ortplug_adjust_session_options",
        "ortplug_doctor_checks",
        "ortplug_host_probes",
        "ortplug_metadata_keys",
        "ortplug_offer_providers",
        "ortplug_prepare_provider",
        "ortplug_provider_chain",
        "ortplug_provider_types",
    }
)
#: The hooks that give what a manifest declares (kinds, probes, metadata keys): the hook form's.
#: A plugin is one form or the other, so a manifest never lists them.
HOOK_FORM_HOOKS: Mapping[str, str] = {
    "ortplug_provider_types": "kinds (each with its 'config' class by import path)",
    "ortplug_host_probes": "probes (each with its 'detect' function by import path)",
    "ortplug_metadata_keys": "metadata_keys",
}


#: The value types a metadata key may name.
_TYPE_NAMES: Mapping[str, type] = {
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "list": list,
    "dict": dict,
}


class DeclarationError(ValueError):
    """A declaration that does not check: one line naming the plugin, the field and the problem."""


def _find_unimported(name: str) -> Any:
    """The module spec of ``name``, dotted names too, found part by part without importing
    anything (``importlib.util.find_spec("a.b")`` runs ``a/__init__``)."""
    import importlib.machinery  # deferred: only a probe identity naming packages

    top, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(top)
        for depth in range(len(rest)):
            locations = None if spec is None else spec.submodule_search_locations
            if not locations:
                return None
            full = ".".join([top, *rest[: depth + 1]])
            spec = importlib.machinery.PathFinder.find_spec(full, list(locations))
    except (ImportError, ValueError):
        return None
    return spec


def _package_files(name: str) -> list[list[object]]:
    """A package's file and folder (found, not imported): an upgrade rewrites them."""
    spec = _find_unimported(name)
    if spec is None or spec.origin is None:
        return [[name]]
    return file_identity([spec.origin, os.path.dirname(spec.origin)])


@attrs.frozen
class Identity:
    """What a probe's facts depend on, as data the core computes without the plugin's code: paths
    stat'ed (``files``, ``site_dirs``, ``packages``, ``env_paths``, ``libraries``), variables by
    value (``env``), and ``system``: the loader's cache and search path."""

    files: tuple[str, ...] = ()
    site_dirs: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    env_paths: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    system: bool = False

    def __call__(self) -> dict[str, object]:
        """The identity now (cheap: stats and environment reads), JSON-ready."""
        environ = os.environ
        files = sorted(
            {match for pattern in self.files for match in _expand(pattern)}
            | {
                item
                for name in self.env_paths
                for item in (environ.get(name) or "").split(os.pathsep)
                if item
            }
        )
        folders = library_search_dirs(environ.get("LD_LIBRARY_PATH"))
        libraries = [str(Path(d, name)) for name in self.libraries for d in folders]
        sites = site_package_dirs() if self.site_dirs else []
        found: dict[str, object] = {
            "files": file_identity([*files, *libraries]),
            "site_dirs": file_identity(Path(s, rel) for rel in self.site_dirs for s in sites),
            "packages": [row for name in self.packages for row in _package_files(name)],
            "env": {name: environ.get(name) for name in self.env},
        }
        if self.system:
            found["system"] = system_library_identity()
        return found


def _expand(pattern: str) -> list[str]:
    import glob  # deferred: only a probe identity with file patterns needs it

    path = os.path.expanduser(pattern)
    return sorted(glob.glob(path)) if glob.has_magic(path) else [path]


@attrs.frozen
class FactRead:
    """How a probe's fact is read from plain files, without the plugin's code (the catalog does,
    for ``info`` and ``doctor``): the first of ``paths`` that exists, or, with ``pattern``, its
    first group in the first of them whose text matches. ``label`` names it for people."""

    paths: tuple[str, ...]
    pattern: str | None = None
    label: str = ""


@attrs.frozen
class LibraryDeclaration:
    """The plugin-EP library a kind lives in: registration name and package or path."""

    name: str
    package: str | None = None
    path: str | None = None


@attrs.frozen
class KindDeclaration:
    """A provider kind: its names, library, where it can run and the facts it needs."""

    kind: str
    ort_name: str
    config: str | None = None
    description: str = ""
    device: str = "cpu"
    io_device: str | None = None
    aliases: tuple[str, ...] = ()
    library: LibraryDeclaration | None = None
    platforms: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    hardware: str = ""
    install: str = ""
    # The catalog's conditions and installs stay checked plain data here (``_CONDITION``,
    # ``_INSTALL``): only the catalog, never a build, gives them types and meaning.
    detect: tuple[Mapping[str, Any], ...] | None = None
    runtime: str | None = None
    index_url: str | None = None
    needs: Mapping[str, str] | None = None
    alternatives: tuple[Mapping[str, Any], ...] = ()
    unless: tuple[str, ...] = ()
    optional: bool = False
    concurrent_runs: bool = False
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    def installs(self) -> tuple[Mapping[str, Any], ...]:
        """The catalog's installs for this kind (``_INSTALL``'s fields), in the order to try."""
        own = {name: getattr(self, name) for name in _INSTALL}
        return (own, *self.alternatives) if self.install else self.alternatives

    def names(self) -> tuple[str, ...]:
        """Every name the kind claims (kind, aliases, ORT name), lower-case."""
        return tuple(dict.fromkeys(n.lower() for n in (self.kind, *self.aliases, self.ort_name)))

    def required_probes(self) -> tuple[str, ...]:
        """The probes whose facts ``requires`` names."""
        return tuple(dict.fromkeys(r.partition(".")[0] for r in self.requires))


@attrs.frozen
class ProbeDeclaration:
    """A host probe: its name, facts and (for cached facts) their identity."""

    name: str
    facts: tuple[str, ...]
    detect: str | None = None
    description: str = ""
    types: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, eq=False, hash=False)
    timeout: float | None = None
    identity: Identity | None = None
    read: Mapping[str, FactRead] = attrs.field(factory=dict, eq=False, hash=False)

    def value_types(self) -> dict[str, tuple[type, ...]]:
        """Each fact's declared types as Python types (what its override must be)."""
        return {fact: tuple(_TYPE_NAMES[n] for n in names) for fact, names in self.types.items()}


@attrs.frozen
class MetadataKeyDeclaration:
    """A ``CheckpointMetadata.extra`` key the plugin reads, with its value types."""

    name: str
    types: tuple[str, ...]
    description: str = ""

    def value_types(self) -> tuple[type, ...]:
        """The Python types the names stand for."""
        return tuple(_TYPE_NAMES[name] for name in self.types)


@attrs.frozen
class PluginDeclaration:
    """Everything one plugin (one entry point) declares."""

    plugin: str
    source: str
    distribution: str = ""
    kinds: tuple[KindDeclaration, ...] = ()
    probes: tuple[ProbeDeclaration, ...] = ()
    hooks: frozenset[str] = frozenset()
    metadata_keys: tuple[MetadataKeyDeclaration, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The declaration as its file holds it (for the scan cache)."""
        found: dict[str, object] = _unstructure(self)
        return found

    def kind(self, name: str) -> KindDeclaration | None:
        """The declared kind claiming ``name`` (kind, alias or ORT name, any case)."""
        wanted = name.lower()
        return next((k for k in self.kinds if wanted in k.names()), None)


# -- checking: one table of fields per object, each field (check, required) -----------------
# A check converts a JSON value (or raises DeclarationError) and carries the JSON schema of what
# it accepts: the same tables validate a declaration and write ``declaration_schema()``.


_T = TypeVar("_T")


class _Check(Generic[_T]):
    """One field's converter and the JSON schema of the values it accepts. (A plain class: the
    tables make some forty of them at import, and an attrs class costs ~0.5 ms to make.)"""

    __slots__ = ("convert", "schema")

    def __init__(self, convert: Callable[[str, object], _T], schema: Mapping[str, Any]) -> None:
        self.convert = convert
        self.schema = schema

    def __call__(self, where: str, value: object) -> _T:
        return self.convert(where, value)


_Field = tuple[_Check[Any], bool]


def _check(schema: Mapping[str, Any]) -> Callable[[Callable[[str, object], _T]], _Check[_T]]:
    def wrap(convert: Callable[[str, object], _T]) -> _Check[_T]:
        return _Check(convert, schema)

    return wrap


@_check({"type": "string"})
def _text(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise DeclarationError(f"{where}: expected a string, got {value!r}")
    return value


@_check({"type": "string", "minLength": 1})
def _name(where: str, value: object) -> str:
    text = _text(where, value)
    if not text:
        raise DeclarationError(f"{where}: expected a non-empty string, got {value!r}")
    return text


@_check({"type": "array", "items": {"type": "string", "minLength": 1}})
def _texts(where: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise DeclarationError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(_name(f"{where}[{i}]", item) for i, item in enumerate(value))


@_check({"type": "boolean"})
def _flag(where: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise DeclarationError(f"{where}: expected true or false, got {value!r}")
    return value


@_check({"type": "string", "pattern": r"^[^.]+\.[^.].*$"})
def _fact_name(where: str, value: object) -> str:
    """A probe's fact, ``probe.fact`` (``cuda.driver_version``)."""
    name = _name(where, value)
    probe, dot, fact = name.partition(".")
    if not (dot and probe and fact):
        raise DeclarationError(f"{where}: expected 'probe.fact', got {name!r}")
    return name


@_check({"type": "array", "items": _fact_name.schema})
def _requires(where: str, value: object) -> tuple[str, ...]:
    names = _texts(where, value)
    return tuple(_fact_name(f"{where}[{i}]", name) for i, name in enumerate(names))


@_check(
    {"type": "array", "items": {"enum": sorted(HOOKS - set(HOOK_FORM_HOOKS))}, "uniqueItems": True}
)
def _hooks(where: str, value: object) -> frozenset[str]:
    names = _texts(where, value)
    unknown = sorted(set(names) - HOOKS)
    if unknown:
        raise DeclarationError(
            f"{where}: unknown hook(s) {unknown}; expected some of {', '.join(sorted(HOOKS))}"
        )
    return frozenset(names)


@_check({"type": "array", "items": {"enum": list(_TYPE_NAMES)}, "minItems": 1})
def _types(where: str, value: object) -> tuple[str, ...]:
    names = _texts(where, value)
    unknown = sorted(set(names) - set(_TYPE_NAMES))
    if not names or unknown:
        raise DeclarationError(
            f"{where}: expected type names among {', '.join(_TYPE_NAMES)}, got {value!r}"
        )
    return names


@_check({"type": "object", "additionalProperties": _types.schema})
def _fact_types(where: str, value: object) -> Mapping[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise DeclarationError(f"{where}: expected an object of fact: [type names], got {value!r}")
    return {fact: _types(f"{where}.{fact}", names) for fact, names in value.items()}


_PYTHON_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@_check({"type": "string", "pattern": _PYTHON_NAME.pattern})
def _python_name(where: str, value: object) -> str:
    """An object by import path, npe2's ``python_name``: ``package.module:Name``."""
    text = _text(where, value)
    if not _PYTHON_NAME.match(text):
        raise DeclarationError(
            f"{where}: expected an import path like 'package.module:Name', got {value!r}"
        )
    return text


@_check({"enum": list(DEVICES)})
def _device(where: str, value: object) -> str:
    if value not in DEVICES:
        raise DeclarationError(f"{where}: expected one of {', '.join(DEVICES)}, got {value!r}")
    return str(value)


@_check({"type": "number", "exclusiveMinimum": 0})
def _seconds(where: str, value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise DeclarationError(f"{where}: expected a number of seconds above 0, got {value!r}")
    return float(value)


def _table(cls: type[Any], fields: Mapping[str, _Field], about: str = "") -> _Check[Any]:
    def build(where: str, value: object) -> Any:
        if not isinstance(value, dict):
            raise DeclarationError(f"{where}: expected an object, got {value!r}")
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise DeclarationError(
                f"{where}: unknown field(s) {unknown}; expected some of {', '.join(fields)}"
            )
        missing = [key for key, (_, required) in fields.items() if required and key not in value]
        if missing:
            raise DeclarationError(f"{where}: missing field(s) {missing}")
        return cls(**{key: fields[key][0](f"{where}.{key}", item) for key, item in value.items()})

    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            key: {**check.schema, **_ABOUT.get(key, {})} for key, (check, _) in fields.items()
        },
        "additionalProperties": False,
    }
    required = [key for key, (_, needed) in fields.items() if needed]
    if required:
        schema["required"] = required
    if about:
        schema["description"] = about
    return _Check(build, schema)


def _list_of(item: _Check[Any]) -> _Check[tuple[Any, ...]]:
    def build(where: str, value: object) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise DeclarationError(f"{where}: expected a list, got {value!r}")
        return tuple(item(f"{where}[{i}]", entry) for i, entry in enumerate(value))

    return _Check(build, {"type": "array", "items": item.schema})


@_check({"type": "string", "pattern": "^0[xX][0-9a-fA-F]+$"})
def _hex_id(where: str, value: object) -> str:
    try:
        int(_name(where, value), 16)
    except (ValueError, DeclarationError):
        raise DeclarationError(f"{where}: expected a hex id like '0x10de', got {value!r}") from None
    return str(value)


@_check({"type": "string", "minLength": 1})
def _pattern(where: str, value: object) -> str:
    """A regular expression with a group: what of a file's text a fact is."""
    text = _name(where, value)
    try:
        groups = re.compile(text).groups
    except re.error as exc:
        raise DeclarationError(
            f"{where}: expected a regular expression, got {text!r} ({exc})"
        ) from None
    if groups < 1:
        raise DeclarationError(f"{where}: expected a regular expression with a group, got {text!r}")
    return text


@_check({"type": "string", "pattern": "^https://"})
def _index_url(where: str, value: object) -> str:
    """An extra index pip may take packages from: https only (over plain http anyone on the
    way could serve their own)."""
    url = _name(where, value)
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.netloc or not url.isprintable():
        raise DeclarationError(
            f"{where}: expected an https:// index URL (pip would take packages from a plain-http "
            f"one unverified), got {url!r}"
        )
    return url


@_check({"type": "string", "minLength": 1})
def _requirement(where: str, value: object) -> str:
    from ..host.requirement import Requirement  # deferred: only a declaration with catalog fields

    try:
        return Requirement.parse(_name(where, value)).text
    except ValueError as exc:
        raise DeclarationError(f"{where}: {exc}") from None


#: What each field means, for the JSON schema (the module docstring says it at length).
_ABOUT: Mapping[str, Mapping[str, str]] = {
    name: {"description": text}
    for name, text in {
        "kind": "the provider kind, a lower-case identifier",
        "ort_name": "ONNX Runtime's name of the execution provider",
        "aliases": "other names users may type",
        "description": "one line for people (ortplug plugins, info)",
        "device": "the device class the provider's sessions run on; gpu: an actor of "
        "the Ray add-on (ortplug_ray) reserves one GPU",
        "io_device": "ONNX Runtime's IO-binding device name of the memory outputs can stay in",
        "config": "the provider's config class, by import path (package.module:Class)",
        "concurrent_runs": "Run() from several threads at once is safe (false: serialised)",
        "install": "what to pip install for this kind",
        "runtime": "the ONNX Runtime wheel and version rule the install brings",
        "detect": "a probe: its detect function by import path; a kind: catalog conditions",
        "facts": "the names of the facts a probe gives",
        "types": "the JSON types a value may have",
        "hooks": "the hooks the plugin module implements",
        "before": "the kinds this kind goes ahead of in the default order (installed or not)",
        "fact": "a probe's fact, probe.fact, read from files by the probe's read",
        "min": "the lowest version of the fact that holds (compared number by number)",
        "needs": "a probe-backed fact the install needs, at least min",
        "read": "for each fact: how the catalog reads it from plain files, without the plugin",
        "after": "the kinds this kind goes behind in the default order (installed or not)",
    }.items()
}

_CONDITION: Mapping[str, _Field] = {
    "platform": (_texts, False),
    "machine": (_texts, False),
    "pci_vendor": (_hex_id, False),
    "pci_class": (_hex_id, False),
    "gpu": (_flag, False),
    "macos_min": (_name, False),
    "fact": (_fact_name, False),
    "min": (_name, False),
    "cpu_vendor": (_texts, False),
    "cpu_flags": (_texts, False),
}
#: A probe-backed fact an install needs, at least ``min`` (a version: ``"580"``).
_NEED: Mapping[str, _Field] = {"fact": (_fact_name, True), "min": (_name, True)}
_NEED_TABLE = _table(dict, _NEED, "a fact the install needs, at least min")
_INSTALL: Mapping[str, _Field] = {
    "install": (_requirement, True),
    "runtime": (_requirement, False),
    "index_url": (_index_url, False),
    "needs": (_NEED_TABLE, False),
}
_READ: Mapping[str, _Field] = {
    "paths": (_texts, True),
    "pattern": (_pattern, False),
    "label": (_text, False),
}


_FACT_READ = _table(FactRead, _READ, "how a fact is read from files")


@_check({"type": "object", "additionalProperties": _FACT_READ.schema})
def _fact_reads(where: str, value: object) -> Mapping[str, FactRead]:
    if not isinstance(value, dict):
        raise DeclarationError(
            f"{where}: expected an object of fact: how it is read, got {value!r}"
        )
    return {fact: _FACT_READ(f"{where}.{fact}", item) for fact, item in value.items()}


_IDENTITY: Mapping[str, _Field] = {
    "files": (_texts, False),
    "site_dirs": (_texts, False),
    "packages": (_texts, False),
    "env": (_texts, False),
    "env_paths": (_texts, False),
    "libraries": (_texts, False),
    "system": (_flag, False),
}
_LIBRARY: Mapping[str, _Field] = {
    "name": (_name, True),
    "package": (_name, False),
    "path": (_name, False),
}
_KIND: Mapping[str, _Field] = {
    "kind": (_name, True),
    "ort_name": (_name, True),
    "config": (_python_name, False),
    "description": (_text, False),
    "device": (_device, False),
    "io_device": (_name, False),
    "aliases": (_texts, False),
    "library": (_table(LibraryDeclaration, _LIBRARY, "the plugin-EP library"), False),
    "platforms": (_texts, False),
    "requires": (_requires, False),
    "hardware": (_text, False),
    "install": (_requirement, False),
    "detect": (_list_of(_table(dict, _CONDITION, "a catalog condition")), False),
    "runtime": (_requirement, False),
    "index_url": (_index_url, False),
    "needs": (_NEED_TABLE, False),
    "alternatives": (_list_of(_table(dict, _INSTALL, "an install for an older host")), False),
    "unless": (_texts, False),
    "optional": (_flag, False),
    "concurrent_runs": (_flag, False),
    "before": (_texts, False),
    "after": (_texts, False),
}
_PROBE: Mapping[str, _Field] = {
    "name": (_name, True),
    "facts": (_texts, True),
    "detect": (_python_name, False),
    "description": (_text, False),
    "types": (_fact_types, False),
    "timeout": (_seconds, False),
    "identity": (_table(Identity, _IDENTITY, "what the facts depend on"), False),
    "read": (_fact_reads, False),
}
_METADATA_KEY: Mapping[str, _Field] = {
    "name": (_name, True),
    "types": (_types, True),
    "description": (_text, False),
}
_PLUGIN: Mapping[str, _Field] = {
    "distribution": (_name, False),
    "kinds": (_list_of(_table(KindDeclaration, _KIND, "a provider kind")), False),
    "probes": (_list_of(_table(ProbeDeclaration, _PROBE, "a host probe")), False),
    "hooks": (_hooks, True),
    "metadata_keys": (
        _list_of(_table(MetadataKeyDeclaration, _METADATA_KEY, "a metadata extra key")),
        False,
    ),
}


def mixed_form(where: str, hooks: Iterable[str]) -> str | None:
    """The one line for a plugin with a manifest that also gives its kinds, probes or metadata
    keys through hooks (the mixed form, not supported), naming the fix; ``None`` when it does
    not. ``where`` starts the line: ``"plugin 'acme' (ortplug_acme/ortplug.json) implements"``."""
    mixed = sorted(set(hooks) & set(HOOK_FORM_HOOKS))
    if not mixed:
        return None
    one = len(mixed) == 1
    moved = " and ".join(HOOK_FORM_HOOKS[hook] for hook in mixed)
    return (
        f"{where} {', '.join(mixed)}, {'a hook' if one else 'hooks'} of the hook form; a plugin "
        f"is one form: declare its {moved} in {FILENAME} and delete "
        f"{'that hook' if one else 'those hooks'}, or delete {FILENAME} (the hook form)"
    )


def _check_plugin(declaration: PluginDeclaration, where: str, *, catalog: bool) -> None:
    """What the tables cannot say: a library names one place; each kind and probe points at its
    code (``config``, ``detect``; a ``catalog``'s need not: nothing of it is built); no hook of
    the hook form is listed (one form per plugin)."""
    mixed = mixed_form(f"{where}.hooks: lists", declaration.hooks)
    if mixed is not None:
        raise DeclarationError(mixed)
    for i, kind in enumerate(declaration.kinds):
        library = kind.library
        if library is not None and (library.package is None) == (library.path is None):
            raise DeclarationError(
                f"{where}.kinds[{i}].library: expected exactly one of package or path"
            )
    for i, kind in enumerate(declaration.kinds):
        for j, condition in enumerate(kind.detect or ()):
            if "min" in condition and "fact" not in condition:
                raise DeclarationError(
                    f"{where}.kinds[{i}].detect[{j}]: expected 'fact' beside 'min' (the fact "
                    f"whose minimum it is), got {sorted(condition)}"
                )
    for i, probe in enumerate(declaration.probes):
        unknown = sorted(set(probe.read) - set(probe.facts))
        if unknown:
            raise DeclarationError(
                f"{where}.probes[{i}].read: expected facts of the probe ({', '.join(probe.facts)}), "
                f"got {unknown}"
            )
    for what, field in () if catalog else (("kinds", "config"), ("probes", "detect")):
        for i, item in enumerate(getattr(declaration, what)):
            if getattr(item, field) is None:
                raise DeclarationError(
                    f"{where}.{what}[{i}]: expected {field!r} (an import path like "
                    f"'package.module:Name'), got none"
                )


_PLUGIN_TABLE = _table(dict, _PLUGIN, "one plugin, under its entry-point name")
#: Where the core package ships :func:`declaration_schema`'s output (a test keeps them equal).
SCHEMA_FILE = Path(__file__).with_name("ortplug.schema.json")


def declaration_schema() -> dict[str, Any]:
    """The JSON schema of an ``ortplug.json`` file, written from the tables that check one."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "ortplug.json: what an ortplug plugin provides",
        "type": "object",
        "properties": {
            "ortplug": {"const": FORMAT, "description": "the format version"},
            "plugins": {
                "type": "object",
                "description": "each plugin, by its entry-point name",
                "additionalProperties": _PLUGIN_TABLE.schema,
            },
        },
        "required": ["ortplug", "plugins"],
        "additionalProperties": False,
    }


def schema_text() -> str:
    """:func:`declaration_schema` as the shipped file holds it."""
    return json.dumps(declaration_schema(), indent=2, sort_keys=True) + "\n"


def _too_deep(data: object) -> bool:
    """Whether ``data`` nests objects and lists deeper than ``_MAX_DEPTH`` (walked without
    recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > _MAX_DEPTH:
                return True
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)
    return False


def _nesting_error(source: str) -> DeclarationError:
    return DeclarationError(f"{source}: expected at most {_MAX_DEPTH} levels of nesting, got more")


def parse_declarations(
    data: object, source: str, *, catalog: bool = False
) -> dict[str, PluginDeclaration]:
    """Every plugin's declaration in a file's parsed JSON, by entry-point name; checked
    (``catalog``: kinds to install, whose kinds and probes need not name their code)."""
    if _too_deep(data):
        raise _nesting_error(source)
    if not isinstance(data, dict):
        raise DeclarationError(f"{source}: expected a JSON object, got {type(data).__name__}")
    if data.get("ortplug") != FORMAT:
        raise DeclarationError(
            f'{source}: expected "ortplug": {FORMAT} (the format version), '
            f"got {data.get('ortplug')!r}"
        )
    unknown = sorted(set(data) - {"ortplug", "plugins"})
    if unknown:
        raise DeclarationError(f"{source}: unknown field(s) {unknown}; expected ortplug, plugins")
    plugins = data.get("plugins")
    if not isinstance(plugins, dict):
        raise DeclarationError(f"{source}: plugins: expected an object by entry-point name")
    found = {}
    for name, fields in plugins.items():
        where = f"{source}: plugins.{name}"
        parsed = _PLUGIN_TABLE(where, fields)
        declaration = PluginDeclaration(plugin=name, source=source, **parsed)
        _check_plugin(declaration, where, catalog=catalog)
        found[name] = declaration
    return found


def _unstructure(value: object) -> Any:
    if attrs.has(type(value)):
        out = {}
        for field in attrs.fields(type(value)):  # type: ignore[arg-type]
            item = getattr(value, field.name)
            default = field.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory()
            if field.name in ("plugin", "source") or item == default:
                continue
            out[field.name] = _unstructure(item)
        return out
    if isinstance(value, Mapping):
        return {key: _unstructure(item) for key, item in value.items()}
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, tuple):
        return [_unstructure(item) for item in value]
    return value


def _top_package(entry_point_value: str) -> str:
    return entry_point_value.partition(":")[0].strip().partition(".")[0]


def source_of(entry_point_value: str) -> str:
    """How errors name an entry point's declaration file: ``<top-level package>/ortplug.json``."""
    return f"{_top_package(entry_point_value)}/{FILENAME}"


def declaration_path(entry_point_value: str) -> Path | None:
    """The declaration file of the entry point's top-level package, or where one would be read
    from (``None``: the package is not found); ``find_spec`` executes nothing of it."""
    try:
        spec = importlib.util.find_spec(_top_package(entry_point_value))
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    candidates = [Path(folder, FILENAME) for folder in locations]
    found = next((path for path in candidates if path.is_file()), None)
    return found or (candidates[0] if candidates else None)


def read_declaration(
    name: str, entry_point_value: str, path: Path | None = None
) -> PluginDeclaration | None:
    """The checked declaration of entry point ``name`` (at ``path`` when already found), or
    ``None`` when its package has none; :class:`DeclarationError` when it does not check."""
    path = path or declaration_path(entry_point_value)
    if path is None or not path.is_file():
        return None
    source = source_of(entry_point_value)
    try:
        declarations = parse_declarations(load_file(path, source), source)
    except DeclarationError as exc:
        raise DeclarationError(f"plugin {name!r}: {exc}") from None
    declaration = declarations.get(name)
    if declaration is None:
        raise DeclarationError(
            f"plugin {name!r}: {source} declares {sorted(declarations) or 'no plugin'}, not the "
            f'entry point {name!r}; add it under "plugins"'
        )
    return declaration


def declarations_beside(module: str) -> dict[str, PluginDeclaration]:
    """Every plugin the manifest of ``module``'s top-level package declares (``{}``: it has
    none), checked; the package is found, not imported. Raises :class:`DeclarationError`."""
    path = declaration_path(module)
    if path is None or not path.is_file():
        return {}
    source = source_of(module)
    return parse_declarations(load_file(path, source), source)


def load_file(path: Path, source: str) -> object:
    """A declaration file's JSON, unchecked: at most :data:`MAX_BYTES`, not nested past the
    stack (``source`` names it in errors)."""
    try:
        size = path.stat().st_size
        if size <= MAX_BYTES:
            return json.loads(read_cache_file(path, max_bytes=MAX_BYTES).decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise DeclarationError(f"{source}: not readable JSON: {exc}") from None
    except RecursionError:
        raise _nesting_error(source) from None
    raise DeclarationError(
        f"{source}: expected at most {MAX_BYTES // 1024} KiB ({MAX_BYTES} bytes), got {size} bytes"
    )


def from_json(name: str, data: object, source: str) -> PluginDeclaration:
    """A declaration the scan cache kept (as :meth:`PluginDeclaration.to_json` wrote it)."""
    return parse_declarations({"ortplug": FORMAT, "plugins": {name: data}}, source)[name]


def platform_matches(platforms: tuple[str, ...], platform: str | None = None) -> bool:
    """Whether ``platform`` (default ``sys.platform``) is one of ``platforms`` (empty: any)."""
    current = sys.platform if platform is None else platform
    return not platforms or any(current.startswith(p) for p in platforms)


if __name__ == "__main__":  # python -m ortplug.plugins.declaration --schema
    if sys.argv[1:] != ["--schema"]:
        raise SystemExit("usage: python -m ortplug.plugins.declaration --schema")
    sys.stdout.write(schema_text())
