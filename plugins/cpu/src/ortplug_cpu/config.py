"""``CpuProvider``: typed options of ONNX Runtime's CPU execution provider."""

from __future__ import annotations

from typing import ClassVar

import attrs
from ortplug.plugins import bool_field, declared_kind, threads_field

__all__ = ["CpuProvider"]


@declared_kind
@attrs.frozen(kw_only=True)
class CpuProvider:
    """ONNX Runtime's ``CPUExecutionProvider``.

    The CPU provider takes its settings from the session, not from provider
    options (it silently ignores unknown keys), so these fields are applied to
    the session options by the plugin; values set in ``SessionOptionsConfig``
    win. ``None`` keeps the plugin's default.
    """

    kind: ClassVar[str]  # kind and ort_name: the manifest's (ortplug.json)
    ort_name: ClassVar[str]

    #: Use ONNX Runtime's CPU memory arena (``SessionOptions.enable_cpu_mem_arena``).
    use_arena: bool | None = bool_field()
    #: Let idle intra-op threads spin (``session.intra_op.allow_spinning``).
    allow_spinning: bool | None = bool_field()
    #: Intra-op threads; by default the CPUs this process may use (affinity and cgroup quota).
    threads: int | None = threads_field()

    def to_ort(self) -> tuple[str, dict[str, str]]:
        """ONNX Runtime's name and provider options (none: see the class docstring)."""
        return self.ort_name, {}
