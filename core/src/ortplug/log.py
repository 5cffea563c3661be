"""ortplug's log lines (logger ``ortplug``), without importing :mod:`logging` (~2 ms) until one
can show, and where its warnings point (:func:`user_stacklevel`)."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["count_as_ortplug", "debug", "info", "user_stacklevel", "warning"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: The folders whose frames are ortplug's, not the user's: the core's and its add-ons'.
_INSIDE: tuple[str, ...] = (_PACKAGE,)


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


def user_stacklevel(*within: str) -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the calling function point at the
    user's call: the first frame outside ortplug and the packages of ``within`` (an add-on's
    ``__file__``; see also :func:`count_as_ortplug`), whatever path reached it."""
    folders = (*_INSIDE, *(os.path.dirname(os.path.abspath(path)) + os.sep for path in within))
    frame = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(folders):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def count_as_ortplug(module_file: str) -> None:
    """Count the frames of the package holding the module file ``module_file`` as ortplug's in
    :func:`user_stacklevel` (an add-on's: the drop-in builds below the user's call)."""
    global _INSIDE
    folder = os.path.dirname(os.path.abspath(module_file)) + os.sep
    if folder not in _INSIDE:
        _INSIDE = (*_INSIDE, folder)
