"""Where a warning of the build points: the first frame outside ortplug (the user's call).

A fixed ``stacklevel`` is right on one path only: the build reaches the same warning from
``from_checkpoint``, the drop-in session, the startup thread and the CLI at different depths.
"""

from __future__ import annotations

import os
import sys

__all__ = ["user_stacklevel"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the calling function point at the
    first frame outside the ortplug package (past the end of the stack: none is outside)."""
    frame = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level
