"""``--json`` output: strict JSON (NaN and infinities as the strings ``"nan"``, ``"inf"``,
``"-inf"``), which ``jq`` and every parser read."""

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
