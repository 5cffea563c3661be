"""The ``bench`` command: candidate chains and thread counts side by side, and ``--save`` (autotune)."""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from .._timing import median_ms
from ..backend import OnnxBackend
from ..checkpoint import LocalCheckpoint, ResolvedCheckpoint
from ..errors import OptionError
from ..plugins.manager import get_plugin_host
from ..selection import DefaultProviderPolicy, autotune
from ..session_options import SessionOptionsConfig
from ._inputs import build_feed

__all__ = ["bench"]


@attrs.frozen
class _Candidate:
    chain: tuple[str, ...]
    threads: int | None

    @property
    def label(self) -> str:
        threads = "default threads" if self.threads is None else f"{self.threads} threads"
        return f"{','.join(self.chain)} / {threads}"


def _chains(checkpoint: ResolvedCheckpoint, given: Sequence[str]) -> list[tuple[str, ...]]:
    """Given chains, or: the policy's, CPU alone, and each offered accelerator before CPU."""
    if given:
        return [tuple(p.strip() for p in item.split(",") if p.strip()) for item in given]
    plugins = get_plugin_host()
    selection = DefaultProviderPolicy(plugins).explain(
        checkpoint.metadata, plugins.host_capabilities(), checkpoint
    )
    chains = [tuple(c.kind for c in selection.chain), ("cpu",)]
    chains += [(c.kind, "cpu") for c in selection.chain if c.kind != "cpu"]
    return list(dict.fromkeys(chains))


def _threads(given: str | None) -> list[int | None]:
    if given:
        return [int(t) for t in given.split(",")]
    usable = get_plugin_host().host_capabilities().fact("cpu", "usable_cpus", 1)
    return [None, *sorted({1, max(1, usable // 2), usable})]


class _Progress:
    """A one-line progress bar on a terminal's stderr; silent otherwise."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self.enabled = sys.stderr.isatty()

    def step(self, label: str) -> None:
        self.done += 1
        if self.enabled:
            filled = int(30 * self.done / self.total)
            sys.stderr.write(
                f"\r[{'#' * filled}{' ' * (30 - filled)}] {self.done}/{self.total} {label[:40]:<40}"
            )
            sys.stderr.flush()
            if self.done == self.total:
                sys.stderr.write("\n")


#: A candidate must beat the baseline by this much (median of per-round ratios) to replace it.
_MARGIN = 0.97


def _winner(samples: dict[_Candidate, list[float]], baseline: _Candidate) -> _Candidate:
    """The fastest candidate that clearly beat the baseline; else the baseline.

    Clearly: its median per-round ratio is at most ``_MARGIN`` and it was faster
    in at least two thirds of the rounds. A "win" inside run-to-run noise would
    pin a setting that is not better.
    """

    def clearly_faster(candidate: _Candidate) -> bool:
        ratios = [mine / theirs for mine, theirs in zip(samples[candidate], samples[baseline])]
        faster = sum(ratio < 1 for ratio in ratios)
        return statistics.median(ratios) <= _MARGIN and 3 * faster >= 2 * len(ratios)

    contenders = [c for c in samples if c == baseline or clearly_faster(c)]
    return min(contenders, key=lambda c: statistics.median(samples[c]))


def _build(checkpoint: ResolvedCheckpoint, candidate: _Candidate) -> OnnxBackend:
    options = SessionOptionsConfig(intra_op_num_threads=candidate.threads)
    return OnnxBackend.from_checkpoint(
        checkpoint, providers=list(candidate.chain), session_options=options
    )


def bench(args: argparse.Namespace) -> int:
    """Build every candidate, run them interleaved for ``--rounds``, print medians and ratios."""
    if args.rounds < 1 or args.calls < 1:
        raise OptionError(
            f"--rounds and --calls: expected positive counts, got {args.rounds} and {args.calls}"
        )
    if args.save:
        autotune.check_can_save()  # an unusable cache fails now, not after the benchmark
    checkpoint = LocalCheckpoint(Path(args.model)).resolve()
    candidates = [
        _Candidate(c, t)
        for c in _chains(checkpoint, args.providers)
        for t in _threads(args.threads)
    ]
    backends: dict[_Candidate, OnnxBackend] = {}
    skipped: dict[str, str] = {}
    for candidate in candidates:
        try:
            backends[candidate] = _build(checkpoint, candidate)
        except Exception as exc:  # a candidate that cannot run here is reported, not fatal
            skipped[candidate.label] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    if not backends:
        raise RuntimeError(f"no candidate could be built: {skipped}")
    first = next(iter(backends.values()))
    feed, _ = build_feed(first.input_specs, {})
    samples: dict[_Candidate, list[float]] = {c: [] for c in backends}
    progress = _Progress(args.rounds * len(backends))
    order = list(backends)
    for round_index in range(args.rounds):
        for candidate in order[round_index % len(order) :] + order[: round_index % len(order)]:
            run = functools.partial(backends[candidate].run, feed)
            run()  # warm this candidate after the others ran
            samples[candidate].append(median_ms(run, args.calls))
            progress.step(candidate.label)
    for backend in backends.values():
        backend.close()
    baseline = order[0]  # the policy's chain with default threads
    medians = {c: statistics.median(v) for c, v in samples.items()}
    best = _winner(samples, baseline)
    rows = [
        {
            "chain": list(c.chain),
            "threads": c.threads,
            "median_ms": round(medians[c], 4),
            "ratio": round(medians[c] / medians[baseline], 3),
        }
        for c in order
    ]
    result: dict[str, Any] = {
        "model": str(args.model),
        "baseline": baseline.label,
        "best": best.label,
        "rows": rows,
        "skipped": skipped,
    }
    if args.save:
        host = get_plugin_host().host_capabilities()
        setting = autotune.TunedSetting(
            best.chain, best.threads, medians[baseline] / medians[best], medians[best]
        )
        result["saved"] = str(autotune.save(checkpoint, host, setting))
    _print(result, args.json)
    return 0


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2))
        return
    print(f"{'candidate':<44}{'median ms':>12}{'vs baseline':>14}")
    for row in result["rows"]:
        threads = "default threads" if row["threads"] is None else f"{row['threads']} threads"
        label = f"{','.join(row['chain'])} / {threads}"
        print(f"{label:<44}{row['median_ms']:>12.4f}{row['ratio']:>13.3f}x")
    for label, error in result["skipped"].items():
        print(f"{label:<44} skipped: {error}")
    verdict = (
        ""
        if result["best"] != result["baseline"]
        else (" — no candidate beat it by 3% in every round")
    )
    print(f"best: {result['best']} (baseline: {result['baseline']}){verdict}")
    if "saved" in result:
        print(f"saved: {result['saved']}; the default policy uses it for this model on this host")
