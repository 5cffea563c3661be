"""ortplug's log lines (logger ``ortplug``), without importing :mod:`logging` until one can show.

Importing ``logging`` costs ~2 ms of every process's start-up. A debug or info line
reaches only handlers a program configured, and a program that configured one has
imported ``logging``; a warning also reaches ``logging``'s last-resort handler
(stderr), so it always imports it.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["debug", "info", "warning"]


def _logger() -> Any:
    import logging

    return logging.getLogger("ortplug")


def debug(message: str, *args: object) -> None:
    """``logging.getLogger("ortplug").debug(...)`` when ``logging`` is in use."""
    if "logging" in sys.modules:
        _logger().debug(message, *args, stacklevel=2)


def info(message: str, *args: object) -> None:
    """``logging.getLogger("ortplug").info(...)`` when ``logging`` is in use."""
    if "logging" in sys.modules:
        _logger().info(message, *args, stacklevel=2)


def warning(message: str, *args: object) -> None:
    """``logging.getLogger("ortplug").warning(...)``."""
    _logger().warning(message, *args, stacklevel=2)
