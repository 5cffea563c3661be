"""ortplug's log lines (logger ``ortplug``), without importing :mod:`logging` until one can show,
and where its warnings point (:func:`user_stacklevel`).

Importing ``logging`` costs ~2 ms of every process's start-up. A debug or info line
reaches only handlers a program configured, and a program that configured one has
imported ``logging``; a warning also reaches ``logging``'s last-resort handler
(stderr), so it always imports it.
"""

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
    first frame outside the ortplug package: the user's call (past the end of the stack: none
    is outside). A fixed ``stacklevel`` is right on one path only; ortplug reaches the same
    warning from ``from_checkpoint``, the drop-in, a background thread and the CLI. ``within``:
    a file of each other package whose frames are not the user's either (an add-on passes its
    module's ``__file__``; an add-on whose frames sit below every warning of a build, as the
    drop-in's do, registers them once with :func:`count_as_ortplug`)."""
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
