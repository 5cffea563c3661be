"""``--json`` output: strict JSON, which ``jq`` and every parser read.

Python's ``json`` writes NaN and infinities as bare ``NaN``/``Infinity`` tokens, which
are not JSON; a model that misbehaves is exactly when an output holds them. They are
written as the strings ``"nan"``, ``"inf"`` and ``"-inf"``.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["print_json"]


def _strict(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(item) for item in value]
    return value


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON; anything else JSON has no type for as its ``str``."""
    print(json.dumps(_strict(data), indent=2, default=str, allow_nan=False))
