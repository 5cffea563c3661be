"""``ortplug.verification.precision_variants``: the old spelling of the variants add-on
(``ortplug-variants``), kept one release.

Each name resolves to ``ortplug_variants``'s with a ``DeprecationWarning`` naming the new spelling
(``from ortplug_variants import write_variants``); without the add-on, one line saying what to
install.
"""

from __future__ import annotations

from typing import Any

from ..addons import VARIANTS_NAMES, old_spelling

__all__ = list(VARIANTS_NAMES)


def __getattr__(name: str) -> Any:
    return old_spelling(__name__, name, VARIANTS_NAMES)
