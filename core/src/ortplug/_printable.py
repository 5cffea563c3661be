"""Text from outside ortplug (device names, declarations, probe facts) made safe to print."""

from __future__ import annotations

import re

__all__ = ["printable"]

#: C0 controls (ESC, BEL, CR, TAB...), DEL and the C1 controls (CSI is 0x9b): a terminal acts
#: on them instead of showing them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character shown as ``?``: an escape sequence in a device's
    name would otherwise retitle, clear or rewrite the terminal it is printed on."""
    return _CONTROL.sub("?", text)
