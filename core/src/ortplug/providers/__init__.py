"""What a provider is given: provider configs with their typed option fields, and the
session and run options.

``from ortplug.providers import ...`` gives the names of :mod:`ortplug.providers.configs`,
imported on first use (PEP 562): importing this folder or any module in it imports nothing else.
"""

from __future__ import annotations

#: ``typing.TYPE_CHECKING`` without importing :mod:`typing` at start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .configs import (
        CPU_EP,
        ProviderConfig,
        is_accelerator,
        is_provider_config,
    )

__all__ = [
    "CPU_EP",
    "ProviderConfig",
    "is_accelerator",
    "is_provider_config",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(".configs", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
