"""``ortplug.verification.precision_variants``: the old spelling of the variants add-on
(``ortplug-variants``), kept one release with a ``DeprecationWarning``."""

from __future__ import annotations

from typing import Any

from ..addons import VARIANTS_NAMES, old_spelling

__all__ = list(VARIANTS_NAMES)


def __getattr__(name: str) -> Any:
    return old_spelling(__name__, name, VARIANTS_NAMES)
