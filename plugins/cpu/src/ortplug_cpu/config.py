"""``CpuProvider``: typed options of ONNX Runtime's CPU execution provider."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

__all__ = ["CpuProvider"]


def _optional_bool(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{attribute.name}: expected true, false or null, got {value!r}")


def _optional_threads(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{attribute.name}: expected a positive integer or null, got {value!r}")


@attrs.frozen(kw_only=True)
class CpuProvider:
    """ONNX Runtime's ``CPUExecutionProvider``.

    The CPU provider takes its settings from the session, not from provider
    options (it silently ignores unknown keys), so these fields are applied to
    the session options by the plugin; values set in ``SessionOptionsConfig``
    win. ``None`` keeps the plugin's default.
    """

    kind: ClassVar[str] = "cpu"
    ort_name: ClassVar[str] = "CPUExecutionProvider"

    #: Use ONNX Runtime's CPU memory arena (``SessionOptions.enable_cpu_mem_arena``).
    use_arena: bool | None = attrs.field(default=None, validator=_optional_bool)
    #: Let idle intra-op threads spin (``session.intra_op.allow_spinning``).
    allow_spinning: bool | None = attrs.field(default=None, validator=_optional_bool)
    #: Intra-op threads; by default the CPUs this process may use (affinity and cgroup quota).
    threads: int | None = attrs.field(default=None, validator=_optional_threads)

    def to_ort(self) -> tuple[str, dict[str, str]]:
        """ONNX Runtime's name and provider options (none: see the class docstring)."""
        return self.ort_name, {}
