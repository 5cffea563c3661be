"""The inputs a candidate is verified on beyond the first feed, where wrong results hide: batches,
another size, other magnitudes, ids over their range (docs/internals.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

import attrs
import numpy as np

from .sample_inputs import GeneratedFeed, InputSpec, candidate_feeds

__all__ = [
    "BATCH_SIZES",
    "IDS_WITHOUT_TABLE",
    "MAGNITUDE",
    "MAGNITUDES",
    "RANDOM_BATCHES",
    "REPEATED_RUNS",
    "REPEATED_RUNS_AT_MOST",
    "REPEAT_BUDGET_S",
    "VERIFY_BUDGET_S",
    "ProbeFeed",
    "probe_feeds",
    "varied_feeds",
]

#: Batch sizes checked besides the first feed's (the largest capped by ``dim_ranges``), with
#: :data:`RANDOM_BATCHES` sizes drawn between them and one row past the largest.
BATCH_SIZES = (1, 2, 8)
#: Batch sizes drawn (seeded) between the second and the largest of :data:`BATCH_SIZES`.
RANDOM_BATCHES = 2
#: Scales of generated float inputs checked besides 1 (standard normal values).
MAGNITUDES = (0.01, 3.0, 8.0)
#: The group of the magnitude probes (candidates computing below fp32 skip it).
MAGNITUDE = "magnitude"
#: Integer ids of an input that indexes no table of the graph are spread up to this.
IDS_WITHOUT_TABLE = 1000
#: Runs of a candidate's session before the first feed's outputs are compared again (warm-up,
#: caches, counters).
REPEATED_RUNS = 10
#: Runs of a candidate's session verification makes at most: after the probes, their feeds are
#: run again in a seeded order until this many ran or :data:`REPEAT_BUDGET_S` is spent (a
#: provider wrong after 40 runs, or on every 17th, fails).
REPEATED_RUNS_AT_MOST = 100
#: Seconds the repeated runs may take at most (projected from a run after warm-up).
REPEAT_BUDGET_S = 1.0
#: Seconds a candidate's verification runs may take: beyond, the runs left are skipped (the
#: verdict lists them). A model that takes seconds a run on a slow provider (a software GPU)
#: still verifies on its first feed; real traffic checks the rest.
VERIFY_BUDGET_S = 30.0

_NORMAL = re.compile(r" normal$")
_IDS = re.compile(r" in 0\.\.9$")


@attrs.frozen
class ProbeFeed:
    """One more feed to compare on, and what it covers (``batch 8``, ``x (1, 64)``...)."""

    label: str
    feed: Mapping[str, np.ndarray]
    #: ``size``: alternatives, the first the reference runs is the only one; ``magnitude``.
    group: str = ""


def _dynamic_batch(specs: Sequence[InputSpec]) -> list[str]:
    """The inputs whose first axis is dynamic (the batch, where a model has one)."""
    return [
        spec.name
        for spec in specs
        if spec.shape and not (isinstance(spec.shape[0], int) and spec.shape[0] > 0)
    ]


def _batch_limit(specs: Sequence[InputSpec], ranges: Mapping[str, tuple[int, int, int]]) -> int:
    limits = [
        ranges[dim][2]
        for spec in specs
        if spec.shape and isinstance(dim := spec.shape[0], str) and dim in ranges
    ]
    return min(limits) if limits else max(BATCH_SIZES) + 1


def _batched(
    first: GeneratedFeed, names: Sequence[str], rows: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """The first feed at ``rows`` rows: its rows at a random position among rows cycled from it,
    generated values drawn afresh for the rows added."""
    feed = dict(first.feed)
    given = {int(np.shape(first.feed[name])[0]) for name in names if np.ndim(first.feed[name])}
    had = min(given) if given else 0
    at = int(rng.integers(0, rows - had + 1)) if 0 < had < rows else 0
    for name in names:
        value = np.asarray(first.feed[name])
        if value.ndim == 0 or value.shape[0] == 0:
            return {}  # a scalar or an empty batch: nothing to grow
        order = (np.arange(rows) - at) % value.shape[0]
        taken = np.take(value, order, axis=0)
        fresh = np.ones(rows, bool)
        fresh[at : at + value.shape[0]] = False
        how = first.generated.get(name, "")
        if _NORMAL.search(how):
            taken[fresh] = rng.standard_normal(taken[fresh].shape).astype(value.dtype)
        elif _IDS.search(how):
            taken[fresh] = rng.integers(0, 10, taken[fresh].shape).astype(value.dtype)
        feed[name] = taken
    return feed


def _batch_sizes(limit: int, rng: np.random.Generator) -> list[int]:
    """:data:`BATCH_SIZES`, sizes drawn between them and one past the largest, within ``limit``."""
    low, high = BATCH_SIZES[1] + 1, max(BATCH_SIZES) - 1
    count = min(RANDOM_BATCHES, high - low + 1)
    drawn = rng.choice(np.arange(low, high + 1), size=count, replace=False)
    sizes = {*BATCH_SIZES, *(int(size) for size in drawn), max(BATCH_SIZES) + 1}
    return sorted({min(size, limit) for size in sizes})


def _batches(
    specs: Sequence[InputSpec], first: GeneratedFeed, ranges: Mapping[str, tuple[int, int, int]]
) -> Iterator[ProbeFeed]:
    names = [name for name in _dynamic_batch(specs) if name in first.feed]
    if not names:
        return
    given = {np.shape(first.feed[name])[0] for name in names if np.ndim(first.feed[name])}
    limit = _batch_limit(specs, ranges)
    rng = np.random.default_rng(1)
    for rows in sorted(set(_batch_sizes(limit, rng)) - given):
        feed = _batched(first, names, rows, rng)
        if feed:
            yield ProbeFeed(f"batch {rows}", feed)


def varied_feeds(
    first: GeneratedFeed, count: int, seed: int = 3
) -> Iterator[dict[str, np.ndarray]]:
    """``count`` feeds of the first feed's shapes with other values: generated ones drawn afresh,
    the rows of the others (samples, real data) rotated, masks and lengths as they are."""
    rng = np.random.default_rng(seed)
    for index in range(count):
        feed = dict(first.feed)
        for name, value in first.feed.items():
            how = first.generated.get(name)
            if how is None and np.ndim(value) and np.shape(value)[0] > 1:
                feed[name] = np.roll(value, index + 1, axis=0)
            elif how is not None and _NORMAL.search(how):
                feed[name] = rng.standard_normal(np.shape(value)).astype(value.dtype)
            elif how is not None and _IDS.search(how):
                feed[name] = rng.integers(0, 10, np.shape(value)).astype(value.dtype)
        yield feed


def _next_size(
    specs: Sequence[InputSpec],
    extra: Mapping[str, object],
    first: GeneratedFeed,
    given: Mapping[str, np.ndarray],
) -> Iterator[ProbeFeed]:
    """The representative feeds of other sizes than the first's (a second length, image size)."""
    shapes = {name: np.shape(value) for name, value in first.feed.items()}
    for feed in candidate_feeds(specs, extra, given):
        other = {n: np.shape(v) for n, v in feed.feed.items()}
        if other != shapes:
            changed = [f"{n} {other[n]}" for n in other if other[n] != shapes.get(n)]
            yield ProbeFeed(", ".join(changed), feed.feed, group="size")


def _scaled(first: GeneratedFeed, scale: float) -> dict[str, np.ndarray] | None:
    names = [n for n, how in first.generated.items() if _NORMAL.search(how)]
    if not names:
        return None
    feed = dict(first.feed)
    for name in names:
        value = np.asarray(first.feed[name])
        feed[name] = (value.astype(np.float64) * scale).astype(value.dtype)
    return feed


def _spread_ids(
    first: GeneratedFeed, bounds: Mapping[str, int], rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], str] | None:
    names = [n for n, how in first.generated.items() if _IDS.search(how)]
    if not names:
        return None
    feed = dict(first.feed)
    ranges = []
    for name in names:
        value = np.asarray(first.feed[name])
        top = bounds.get(name, IDS_WITHOUT_TABLE)
        if np.iinfo(value.dtype).max < top - 1:
            top = int(np.iinfo(value.dtype).max) + 1
        spread = rng.integers(0, top, value.shape)
        if spread.size:
            spread.ravel()[-1] = top - 1  # the largest valid id, always
        feed[name] = spread.astype(value.dtype)
        ranges.append(f"{name} 0..{top - 1}")
    return feed, "ids " + ", ".join(ranges)


def probe_feeds(
    specs: Sequence[InputSpec],
    extra: Mapping[str, object],
    first: GeneratedFeed,
    given: Mapping[str, np.ndarray],
    ranges: Mapping[str, tuple[int, int, int]],
    index_bounds: Mapping[str, int],
) -> Iterator[ProbeFeed]:
    """The feeds besides ``first`` (the one the reference ran), in order, each labelled."""
    yield from _batches(specs, first, ranges)
    for scale in MAGNITUDES:
        scaled = _scaled(first, scale)
        if scaled is not None:
            yield ProbeFeed(f"values x{scale:g}", scaled, group=MAGNITUDE)
    spread = _spread_ids(first, index_bounds, np.random.default_rng(2))
    if spread is not None:
        yield ProbeFeed(spread[1], spread[0])
    yield from _next_size(specs, extra, first, given)
