"""The host: its facts (capabilities, hardware, probes, what fits it), the environment
ortplug configures, the one ONNX Runtime import, and plugin-EP libraries with their trial.

``from ortplug.host import ...`` gives the names of :mod:`ortplug.host.capabilities`,
imported on first use (PEP 562): importing this folder or any module in it imports nothing else.
"""

from __future__ import annotations

#: ``typing.TYPE_CHECKING`` without importing :mod:`typing` at start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .capabilities import (
        DEFAULT_PROBE_TIMEOUT_S,
        OVERRIDE_PREFIX,
        OVERRIDE_TYPES,
        HostCapabilities,
        HostProbe,
        compose_host,
        fact_label,
        override_variable,
    )

__all__ = [
    "DEFAULT_PROBE_TIMEOUT_S",
    "OVERRIDE_PREFIX",
    "OVERRIDE_TYPES",
    "HostCapabilities",
    "HostProbe",
    "compose_host",
    "fact_label",
    "override_variable",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(".capabilities", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
