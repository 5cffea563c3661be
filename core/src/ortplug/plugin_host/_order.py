"""The order between provider kinds, as their manifests declare it: ``before`` and ``after``
(docs/internals.md, "The plugin host")."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["Placement", "kind_order"]


class Placement(NamedTuple):
    """One kind's declared place: the kinds it goes ahead of and behind; ``fallback``: last."""

    kind: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    fallback: bool = False


def _in_circle(kind: str, ahead: dict[str, set[str]], left: set[str]) -> bool:
    """Whether ``kind`` is ahead of itself through the kinds ``left`` (part of a circle)."""
    seen: set[str] = set()
    stack = list(ahead.get(kind, ()))
    while stack:
        other = stack.pop()
        if other == kind:
            return True
        if other in left and other not in seen:
            seen.add(other)
            stack.extend(ahead.get(other, ()))
    return False


def kind_order(placements: Iterable[Placement]) -> tuple[list[str], list[str]]:
    """The kinds of ``placements``, first first, and the kinds caught in a circle (sorted)."""
    given = list(placements)
    ahead: dict[str, set[str]] = {}
    for place in given:
        ahead.setdefault(place.kind, set()).update(place.before)
        for other in place.after:
            ahead.setdefault(other, set()).add(place.kind)
    nodes = set(ahead) | {kind for kinds in ahead.values() for kind in kinds}
    waiting = dict.fromkeys(nodes, 0)
    for kinds in ahead.values():
        for kind in kinds:
            waiting[kind] += 1
    ready = [kind for kind, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    circle: set[str] = set()
    left = set(nodes)
    while left:
        if not ready:  # a circle: the first name of what is left goes next
            first = min(left)
            circle.update(kind for kind in left if _in_circle(kind, ahead, left))
            waiting[first] = 0
            heapq.heappush(ready, first)
        kind = heapq.heappop(ready)
        if kind not in left:
            continue
        left.discard(kind)
        order.append(kind)
        for behind in sorted(ahead.get(kind, ())):
            waiting[behind] -= 1
            if waiting[behind] == 0 and behind in left:
                heapq.heappush(ready, behind)
    installed = {place.kind for place in given}
    fallback = {place.kind for place in given if place.fallback}
    ranked = [kind for kind in order if kind in installed and kind not in fallback]
    return ranked + [kind for kind in order if kind in fallback], sorted(circle)
