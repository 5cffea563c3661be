"""Text from outside ortplug (device names, declarations, probe facts) made safe to print."""

from __future__ import annotations

import re

__all__ = ["printable"]

#: C0 controls (ESC, BEL, CR, TAB...), DEL and the C1 controls (CSI is 0x9b): a terminal acts
#: on them instead of showing them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
#: Unicode categories shown as nothing or acted on: format characters (bidi overrides and
#: isolates such as U+202E and U+2066, zero-width U+200B), line and paragraph separators,
#: surrogates (undecodable bytes).
_HIDDEN_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Cs"})
#: Letters that render blank (Hangul fillers, the Braille blank).
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def printable(text: str) -> str:
    """``text`` with every control, format and invisible character shown as ``?``: an escape
    sequence in a device's name would otherwise retitle, clear or rewrite the terminal it is
    printed on, and a bidi override or zero-width character make it read as another name."""
    text = _CONTROL.sub("?", text)
    if text.isascii():
        return text
    import unicodedata  # deferred: most text printed is ASCII

    return "".join(
        "?" if c in _BLANK_LETTERS or unicodedata.category(c) in _HIDDEN_CATEGORIES else c
        for c in text
    )
