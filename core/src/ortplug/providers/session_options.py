"""``SessionOptionsConfig``: a typed, validated, serializable mirror of ONNX Runtime's ``SessionOptions``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import attrs

from ..errors import MissingFileError, OptionError, OptionTypeError
from ._config_dicts import config_from_dict, string_entries
from .options import bool_field, int_field, seconds_field, threads_field

__all__ = [
    "EXECUTION_MODES",
    "GRAPH_OPTIMIZATION_LEVELS",
    "FreeDimensionOverride",
    "SessionOptionsConfig",
    "settings_kept",
]

#: Short names accepted for ``graph_optimization_level`` and the ORT enum member each means.
GRAPH_OPTIMIZATION_LEVELS = MappingProxyType(
    {
        "disable": "ORT_DISABLE_ALL",
        "basic": "ORT_ENABLE_BASIC",
        "extended": "ORT_ENABLE_EXTENDED",
        "layout": "ORT_ENABLE_LAYOUT",
        "all": "ORT_ENABLE_ALL",
    }
)
#: Short names accepted for ``execution_mode`` and the ORT enum member each means.
EXECUTION_MODES = MappingProxyType({"sequential": "ORT_SEQUENTIAL", "parallel": "ORT_PARALLEL"})


def _enum(field_name: str, table: Mapping[str, str], value: object) -> str | None:
    """Accept a short name, ORT's member name or the ORT enum itself; return the short name."""
    if value is None:
        return None
    text = getattr(value, "name", value)
    if isinstance(text, str):
        key = text.lower()
        if key in table:
            return key
        for short, ort_name in table.items():
            if key == ort_name.lower():
                return short
    raise OptionError(
        f"{field_name}: expected one of {', '.join(table)} "
        f"(or {', '.join(table.values())}), got {value!r}"
    )


def _graph_level(value: object) -> str | None:
    return _enum("graph_optimization_level", GRAPH_OPTIMIZATION_LEVELS, value)


def _execution_mode(value: object) -> str | None:
    return _enum("execution_mode", EXECUTION_MODES, value)


def _severity(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and value not in (0, 1, 2, 3, 4):
        raise OptionError(
            f"{attribute.name}: expected 0 (verbose) to 4 (fatal) or null, got {value!r}"
        )


@attrs.frozen
class FreeDimensionOverride:
    """Fix a symbolic dimension, found by its name (``batch``) or its denotation (``DATA_BATCH``)."""

    by: str = attrs.field(validator=attrs.validators.in_(("name", "denotation")))
    key: str = attrs.field(validator=attrs.validators.min_len(1))
    value: int = attrs.field(
        validator=attrs.validators.and_(attrs.validators.instance_of(int), attrs.validators.ge(1))
    )


def _free_dimensions(value: object) -> tuple[FreeDimensionOverride, ...]:
    """``{"batch": 1}`` (by name) or a list of ``{"by", "key", "value"}`` / overrides."""
    if isinstance(value, Mapping):
        items: list[object] = [{"by": "name", "key": k, "value": v} for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise OptionError(
            "free_dimension_overrides: expected {dim_name: size} or a list of "
            f"{{'by': 'name'|'denotation', 'key': ..., 'value': ...}}, got {value!r}"
        )
    overrides = []
    for item in items:
        if isinstance(item, FreeDimensionOverride):
            overrides.append(item)
            continue
        try:
            if not isinstance(item, Mapping) or set(item) != {"by", "key", "value"}:
                raise OptionTypeError("expected exactly the keys by, key, value")
            if isinstance(item["value"], bool):
                raise OptionTypeError("value must be an integer")
            overrides.append(FreeDimensionOverride(**item))
        except (TypeError, ValueError) as exc:
            raise OptionError(
                f"free_dimension_overrides: bad entry {item!r} ({exc}); expected "
                "{'by': 'name' or 'denotation', 'key': a dimension name, 'value': a size >= 1}"
            ) from exc
    return tuple(overrides)


def _paths(value: object) -> tuple[str, ...]:
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(p, (str, os.PathLike)) and str(p) for p in value
    ):
        raise OptionError(f"custom_op_libraries: expected a path or a list of paths, got {value!r}")
    return tuple(os.fspath(p) for p in value)


def _optional_text(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise OptionError(f"{attribute.name}: expected a non-empty string or null, got {value!r}")


@attrs.frozen(kw_only=True)
class SessionOptionsConfig:
    """Session settings, each one ``SessionOptions`` setting (``log_id`` -> ``logid``, ...);
    ``None`` leaves ONNX Runtime's default (and lets plugins fill it in)."""

    graph_optimization_level: str | None = attrs.field(default=None, converter=_graph_level)
    intra_op_num_threads: int | None = threads_field(minimum=0)
    inter_op_num_threads: int | None = threads_field(minimum=0)
    execution_mode: str | None = attrs.field(default=None, converter=_execution_mode)
    deterministic_compute: bool | None = bool_field()
    enable_cpu_mem_arena: bool | None = bool_field()
    enable_mem_pattern: bool | None = bool_field()
    enable_mem_reuse: bool | None = bool_field()
    #: Write the optimized graph here (inspect what ONNX Runtime fused).
    optimized_model_path: str | None = attrs.field(default=None, validator=_optional_text)
    enable_profiling: bool | None = bool_field()
    profile_file_prefix: str | None = attrs.field(default=None, validator=_optional_text)
    free_dimension_overrides: tuple[FreeDimensionOverride, ...] = attrs.field(
        default=(), converter=_free_dimensions
    )
    #: Shared libraries with custom operators, registered before the model loads.
    custom_op_libraries: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    log_id: str | None = attrs.field(default=None, validator=_optional_text)
    log_severity_level: int | None = attrs.field(default=None, validator=_severity)
    log_verbosity_level: int | None = int_field(minimum=0)
    #: False runs on the process-wide pools sized by ``ortplug.configure(...)``.
    use_per_session_threads: bool | None = bool_field()
    #: Cancel building the session after this many seconds (``set_load_cancellation_flag``);
    #: for provider builds that can take minutes (TensorRT engines, CoreML compiles).
    load_timeout_s: float | None = seconds_field()
    config_entries: Mapping[str, str] = attrs.field(
        factory=dict, converter=string_entries, eq=False, hash=False
    )
    #: An ``onnxruntime.SessionOptions`` to build on instead of a new one (the drop-in's caller's):
    #: what it holds that this mirror cannot read (config entries, custom ops) is kept.
    ort_base: Any = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def from_ort(cls, options: Any) -> SessionOptionsConfig:
        """Mirror an ``onnxruntime.SessionOptions``: its settings that differ from ONNX Runtime's
        defaults (the rest stay unset for plugins to fill), built on ``options`` itself."""
        fresh = type(options)()
        changed = {
            field_name: getattr(options, ort_name)
            for field_name, ort_name in (*_ENUM_SETTINGS, *_PLAIN_SETTINGS)
            if field_name not in _NOT_MIRRORED
            and getattr(options, ort_name) != getattr(fresh, ort_name)
        }
        return cls(**changed, ort_base=options)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionOptionsConfig:
        """Build from a plain dict (a JSON or TOML table); unknown keys are named in the error."""
        return config_from_dict(cls, data, "session options")

    def to_dict(self) -> dict[str, Any]:
        """The set fields, JSON-ready."""
        data = {f.name: getattr(self, f.name) for f in attrs.fields(type(self))}
        data["config_entries"] = dict(self.config_entries)
        data["free_dimension_overrides"] = [attrs.asdict(o) for o in self.free_dimension_overrides]
        data["custom_op_libraries"] = list(self.custom_op_libraries)
        data.pop("ort_base")
        return {k: v for k, v in data.items() if v not in (None, {}, [])}

    def evolve(self, **changes: Any) -> SessionOptionsConfig:
        """Return a copy with ``changes`` applied (validated like the constructor)."""
        return attrs.evolve(self, **changes)

    def with_defaults(self, defaults: Mapping[str, Any]) -> SessionOptionsConfig:
        """Return a copy with ``defaults`` filled in where this config leaves a field unset."""
        unset = {name: value for name, value in defaults.items() if getattr(self, name) is None}
        return attrs.evolve(self, **unset) if unset else self

    def with_config_entries(self, entries: Mapping[str, str]) -> SessionOptionsConfig:
        """Return a copy with ``entries`` added; entries already set here win."""
        return attrs.evolve(self, config_entries={**entries, **self.config_entries})

    def to_ort(self, ort: ModuleType) -> Any:
        """Build an ``onnxruntime.SessionOptions`` from the set fields (on ``ort_base``, keeping its
        config entries); a missing custom op library is a ``FileNotFoundError``, one that does not
        load a ``ValueError``."""
        options = ort.SessionOptions() if self.ort_base is None else self.ort_base
        if self.graph_optimization_level is not None:
            level = GRAPH_OPTIMIZATION_LEVELS[self.graph_optimization_level]
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        if self.execution_mode is not None:
            mode = EXECUTION_MODES[self.execution_mode]
            options.execution_mode = getattr(ort.ExecutionMode, mode)
        for field_name, ort_name in _PLAIN_SETTINGS:
            value = getattr(self, field_name)
            if value is not None:
                setattr(options, ort_name, value)
        for override in self.free_dimension_overrides:
            if override.by == "name":
                options.add_free_dimension_override_by_name(override.key, override.value)
            else:
                options.add_free_dimension_override_by_denotation(override.key, override.value)
        for library in self.custom_op_libraries:
            if not Path(library).is_file():
                raise MissingFileError(f"custom_op_libraries: file not found: {library}")
            try:
                options.register_custom_ops_library(library)
            except Exception as exc:
                raise OptionError(
                    f"custom_op_libraries: {library} is not a loadable custom-op library: {exc}"
                ) from exc
        for key, value in self.config_entries.items():
            if self.ort_base is None or not _has_entry(options, key):
                options.add_session_config_entry(key, value)
        return options


@contextlib.contextmanager
def settings_kept(options: Any) -> Iterator[None]:
    """The settings of ``options`` (an ``onnxruntime.SessionOptions`` or ``None``) put back as
    they were after the block: ``to_ort`` sets fields on an ``ort_base``, the caller's own object,
    and a session copies them when it is built."""
    names = [ort_name for _, ort_name in (*_ENUM_SETTINGS, *_PLAIN_SETTINGS)]
    saved = {} if options is None else {name: getattr(options, name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(options, name, value)


def _has_entry(options: Any, key: str) -> bool:
    try:
        options.get_session_config_entry(key)
    except RuntimeError:  # ONNX Runtime's answer for a key it does not hold
        return False
    return True


# (field, SessionOptions attribute) pairs whose values are ONNX Runtime enums.
_ENUM_SETTINGS = (
    ("graph_optimization_level", "graph_optimization_level"),
    ("execution_mode", "execution_mode"),
)
# Left on ``ort_base`` by from_ort: ortplug's check of ``use_per_session_threads=False`` is
# for its own configure(); a caller of ONNX Runtime's API sizes the global pools through it.
_NOT_MIRRORED = frozenset({"use_per_session_threads"})


# (field, SessionOptions attribute) pairs set as plain values.
_PLAIN_SETTINGS = (
    ("intra_op_num_threads", "intra_op_num_threads"),
    ("inter_op_num_threads", "inter_op_num_threads"),
    ("deterministic_compute", "use_deterministic_compute"),
    ("enable_cpu_mem_arena", "enable_cpu_mem_arena"),
    ("enable_mem_pattern", "enable_mem_pattern"),
    ("enable_mem_reuse", "enable_mem_reuse"),
    ("optimized_model_path", "optimized_model_filepath"),
    ("enable_profiling", "enable_profiling"),
    ("profile_file_prefix", "profile_file_prefix"),
    ("log_id", "logid"),
    ("log_severity_level", "log_severity_level"),
    ("log_verbosity_level", "log_verbosity_level"),
    ("use_per_session_threads", "use_per_session_threads"),
)
