"""``RunOptionsConfig``: a typed mirror of ONNX Runtime's ``RunOptions`` for one or many runs."""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

import attrs

from ..errors import OptionError
from ._config_dicts import string_entries
from .options import bool_field, int_field

__all__ = ["RunOptionsConfig"]

# ONNX Runtime's Python layer looks this entry up on every run and pays for an
# exception when it is missing; "0" is its documented default, so setting it
# changes nothing but the cost (40 us per bound run on ORT 1.32).
_GRAPH_ID_ENTRY = ("gpu_graph_id", "0")


def _tag(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise OptionError(f"{attribute.name}: expected a string or null, got {value!r}")


@attrs.frozen(kw_only=True)
class RunOptionsConfig:
    """Per-run settings; ``None`` leaves ONNX Runtime's default."""

    #: Shown in ONNX Runtime's log lines for this run (``RunOptions.logid``).
    tag: str | None = attrs.field(default=None, validator=_tag)
    log_severity_level: int | None = int_field(minimum=0, maximum=4)
    log_verbosity_level: int | None = int_field(minimum=0)
    #: Compute only what the requested outputs need.
    only_execute_path_to_fetches: bool | None = bool_field()
    config_entries: Mapping[str, str] = attrs.field(
        factory=dict, converter=string_entries, eq=False, hash=False
    )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunOptionsConfig:
        """Build from a plain dict; unknown keys are named in the error."""
        allowed = [f.name for f in attrs.fields(cls)]
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise OptionError(
                f"run options: unknown field(s) {unknown}; allowed: {', '.join(allowed)}"
            )
        return cls(**data)

    def to_ort(self, ort: ModuleType) -> Any:
        """A new ``onnxruntime.RunOptions`` with these settings."""
        options = ort.RunOptions()
        if self.tag is not None:
            options.logid = self.tag
        for name in ("log_severity_level", "log_verbosity_level", "only_execute_path_to_fetches"):
            value = getattr(self, name)
            if value is not None:
                setattr(options, name, value)
        entries = dict([_GRAPH_ID_ENTRY], **self.config_entries)
        for key, value in entries.items():
            options.add_run_config_entry(key, value)
        return options
