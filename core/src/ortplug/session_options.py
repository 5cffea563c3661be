"""``SessionOptionsConfig``: a typed, validated, serializable mirror of ONNX Runtime's ``SessionOptions``."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import Any

import attrs

from .provider_options import bool_field, seconds_field

__all__ = ["EXECUTION_MODES", "GRAPH_OPTIMIZATION_LEVELS", "SessionOptionsConfig"]

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
    raise ValueError(
        f"{field_name}: expected one of {', '.join(table)} "
        f"(or {', '.join(table.values())}), got {value!r}"
    )


def _graph_level(value: object) -> str | None:
    return _enum("graph_optimization_level", GRAPH_OPTIMIZATION_LEVELS, value)


def _execution_mode(value: object) -> str | None:
    return _enum("execution_mode", EXECUTION_MODES, value)


def _threads(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(
            f"{attribute.name}: expected a non-negative integer (0 = ONNX Runtime default), "
            f"got {value!r}"
        )


def _severity(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and value not in (0, 1, 2, 3, 4):
        raise ValueError(
            f"{attribute.name}: expected 0 (verbose) to 4 (fatal) or null, got {value!r}"
        )


def _config_entries(value: Mapping[str, str]) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(f"config_entries: expected a mapping of strings, got {value!r}")
    for key, entry in value.items():
        if not isinstance(key, str) or not isinstance(entry, str):
            raise ValueError(
                f"config_entries: expected string keys and values, got {key!r}: {entry!r}"
            )
    return MappingProxyType(dict(value))


@attrs.frozen(kw_only=True)
class SessionOptionsConfig:
    """Session settings; ``None`` leaves ONNX Runtime's default (and lets plugins fill it in)."""

    graph_optimization_level: str | None = attrs.field(default=None, converter=_graph_level)
    intra_op_num_threads: int | None = attrs.field(default=None, validator=_threads)
    inter_op_num_threads: int | None = attrs.field(default=None, validator=_threads)
    execution_mode: str | None = attrs.field(default=None, converter=_execution_mode)
    enable_cpu_mem_arena: bool | None = bool_field()
    log_severity_level: int | None = attrs.field(default=None, validator=_severity)
    #: Cancel building the session after this many seconds (``set_load_cancellation_flag``);
    #: for provider builds that can take minutes (TensorRT engines, CoreML compiles).
    load_timeout_s: float | None = seconds_field()
    config_entries: Mapping[str, str] = attrs.field(
        factory=dict, converter=_config_entries, eq=False, hash=False
    )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionOptionsConfig:
        """Build from a plain dict (a JSON or TOML table); unknown keys are named in the error."""
        allowed = [f.name for f in attrs.fields(cls)]
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ValueError(
                f"session options: unknown field(s) {unknown}; allowed: {', '.join(allowed)}"
            )
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """The set fields, JSON-ready."""
        data = {f.name: getattr(self, f.name) for f in attrs.fields(type(self))}
        data["config_entries"] = dict(self.config_entries)
        return {k: v for k, v in data.items() if v not in (None, {})}

    def evolve(self, **changes: Any) -> SessionOptionsConfig:
        """Return a copy with ``changes`` applied (validated like the constructor)."""
        return attrs.evolve(self, **changes)

    def with_config_entries(self, entries: Mapping[str, str]) -> SessionOptionsConfig:
        """Return a copy with ``entries`` added; entries already set here win."""
        return attrs.evolve(self, config_entries={**entries, **self.config_entries})

    def to_ort(self, ort: ModuleType) -> Any:
        """Build an ``onnxruntime.SessionOptions`` from the set fields.

        ``load_timeout_s`` is not a ``SessionOptions`` field: the backend applies it.
        """
        options = ort.SessionOptions()
        if self.graph_optimization_level is not None:
            level = GRAPH_OPTIMIZATION_LEVELS[self.graph_optimization_level]
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        if self.execution_mode is not None:
            mode = EXECUTION_MODES[self.execution_mode]
            options.execution_mode = getattr(ort.ExecutionMode, mode)
        for name in (
            "intra_op_num_threads",
            "inter_op_num_threads",
            "enable_cpu_mem_arena",
            "log_severity_level",
        ):
            value = getattr(self, name)
            if value is not None:
                setattr(options, name, value)
        for key, value in self.config_entries.items():
            options.add_session_config_entry(key, value)
        return options
