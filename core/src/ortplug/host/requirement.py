"""A pip requirement as the catalog writes them (``onnxruntime-gpu[cuda,cudnn]==1.31.1``), and
whether an installed version meets it: names, extras and plain numeric version rules only."""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

__all__ = ["Requirement", "normalize_name", "release"]

_REQUIREMENT = re.compile(
    r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([A-Za-z0-9_,.\s-]*)\])?\s*(.*)$"
)
_RULE = re.compile(r"^\s*(==|!=|>=|<=|>|<)\s*([0-9]+(?:\.[0-9]+)*)\s*$")
_COMPARE: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
}


def normalize_name(name: str) -> str:
    """A distribution's name as pip compares names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def release(version: str) -> tuple[int, ...]:
    """``"1.31.1"`` -> ``(1, 31, 1)``; trailing zeros dropped, so ``1.24`` == ``1.24.0``."""
    parts = [int(p) for p in re.findall(r"\d+", re.split(r"[+-]|[a-z]", version)[0])[:4]]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


@attrs.frozen
class Requirement:
    """A requirement's text, its distribution's normalized name, extras and version rules."""

    text: str
    name: str
    extras: tuple[str, ...]
    rules: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, text: str) -> Requirement:
        """Parse ``NAME[EXTRAS] RULE,RULE``; ``ValueError`` naming what was expected."""
        match = _REQUIREMENT.match(text)
        if not match:
            raise ValueError(f"expected a requirement like 'onnxruntime>=1.22', got {text!r}")
        name, extras, rest = match.groups()
        rules = []
        for part in filter(None, (p.strip() for p in rest.split(","))):
            rule = _RULE.match(part)
            if not rule:
                raise ValueError(
                    f"expected version rules like '>=1.22' or '==1.31.1' in {text!r}, got {part!r}"
                )
            rules.append((rule.group(1), rule.group(2)))
        listed = tuple(e.strip() for e in (extras or "").split(",") if e.strip())
        return cls(text, normalize_name(name), listed, tuple(rules))

    def satisfied_by(self, version: str) -> bool:
        """Whether an installed ``version`` meets every version rule."""
        return all(_COMPARE[op](release(version), release(v)) for op, v in self.rules)
