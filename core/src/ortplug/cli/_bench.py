"""The ``bench`` command: candidate chains and thread counts side by side, and ``--save`` (autotune);
``--callers`` and a throughput ``--hint`` run the serving add-on's ``bench-callers`` command
instead (entry-point group ``ortplug.commands``)."""

from __future__ import annotations

import argparse
import functools
import statistics
from collections.abc import Sequence
from typing import Any

import attrs

from ..backend import OnnxBackend
from ..backend.options import Verification
from ..cache.root import cache_root
from ..checkpoint import LocalCheckpoint, ResolvedCheckpoint
from ..errors import InputValidationError
from ..host.capabilities import fact_label
from ..plugin_host.manager import get_plugin_host
from ..progress import progress, show_progress
from ..providers.configs import ProviderConfig
from ..providers.options import check_threads
from ..providers.session_options import SessionOptionsConfig
from ..selection import DefaultProviderPolicy, ProviderSelection, autotune
from ..session.timing import median_ms
from ._json import print_json
from ._providers import ProviderEntry, chain_label, resolve_chain
from ._usage import UsageError
from .inputs import first_run_error, load_inputs, quiet_run_options, reference_feed

__all__ = ["bench"]


@attrs.frozen
class _Candidate:
    """A chain and a thread count to measure; ``chain=None`` is the policy's own choice."""

    chain: tuple[ProviderConfig, ...] | None
    threads: int | None
    label: str = attrs.field(eq=False)


def _candidate(
    chain: tuple[ProviderConfig, ...] | None, threads: int | None, policy: ProviderSelection
) -> _Candidate:
    if chain is None:
        name = f"policy ({chain_label(policy.chain) or 'ONNX Runtime device policy'})"
    else:
        name = chain_label(chain)
    count = "default threads" if threads is None else f"{threads} threads"
    return _Candidate(chain, threads, f"{name} / {count}")


def _chains(
    policy: ProviderSelection, given: Sequence[Sequence[ProviderEntry]]
) -> list[tuple[ProviderConfig, ...] | None]:
    """Given chains, or: the policy's, CPU alone, and each offered accelerator before CPU."""
    if given:
        return [tuple(resolve_chain(entries)) for entries in given]
    chains: list[tuple[ProviderConfig, ...] | None] = [None]
    cpu = next((c for c in policy.chain if c.kind == "cpu"), None)
    if cpu is not None:
        chains.append((cpu,))
        chains += [(c, cpu) for c in policy.chain if c.kind != "cpu"]
    return [c for c in dict.fromkeys(chains) if c != policy.chain]


def _threads(given: list[int] | None) -> list[int | None]:
    """The thread counts to try: the policy's default (``None``) first, then those given, or
    1, half and all of the usable CPUs."""
    if given:
        return [None, *dict.fromkeys(given)]
    usable = get_plugin_host().host_capabilities().fact("cpu", "usable_cpus", 1)
    usable = check_threads(f"{fact_label('cpu', 'usable_cpus')} (the default --threads)", usable)
    return [None, *sorted({1, max(1, usable // 2), usable})]


#: A candidate must beat the baseline by this much (median of per-round ratios) to replace it.
_MARGIN = 0.97


def _rounds_to_win(rounds: int) -> int:
    """In how many of ``rounds`` a candidate must be faster to replace the baseline: two thirds."""
    return -(-2 * rounds // 3)


def _winner(samples: dict[_Candidate, list[float]], baseline: _Candidate) -> _Candidate:
    """The fastest candidate that clearly beat the baseline (median per-round ratio at most
    ``_MARGIN``, faster in two thirds of the rounds: not noise); else the baseline."""

    def clearly_faster(candidate: _Candidate) -> bool:
        ratios = [mine / theirs for mine, theirs in zip(samples[candidate], samples[baseline])]
        faster = sum(ratio < 1 for ratio in ratios)
        return statistics.median(ratios) <= _MARGIN and faster >= _rounds_to_win(len(ratios))

    contenders = [c for c in samples if c == baseline or clearly_faster(c)]
    return min(contenders, key=lambda c: statistics.median(samples[c]))


def _build(checkpoint: ResolvedCheckpoint, candidate: _Candidate) -> OnnxBackend:
    """The candidate's backend, verified as every build is (one that fails raises and is
    skipped); the benchmark measures, so the build does not (``measure=False``)."""
    options = SessionOptionsConfig(intra_op_num_threads=candidate.threads)
    checked = Verification(measure=False)
    if candidate.chain is None:
        policy = DefaultProviderPolicy(autotune=False)
        return OnnxBackend.from_checkpoint(
            checkpoint, session_options=options, policy=policy, verify=checked
        )
    return OnnxBackend.from_checkpoint(
        checkpoint,
        providers=list(candidate.chain),
        session_options=options,
        verify=checked,
    )


def _short(exc: Exception) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _ready(
    checkpoint: ResolvedCheckpoint, candidates: list[_Candidate], args: argparse.Namespace
) -> tuple[dict[_Candidate, OnnxBackend], dict[str, Any], dict[str, str]]:
    """Each candidate built and run once; those that cannot run here are skipped, with why.

    Inputs that do not fit the model stop the benchmark at once: no candidate could run them.
    """
    backends: dict[_Candidate, OnnxBackend] = {}
    skipped: dict[str, str] = {}
    given: dict[str, Any] = {}
    feed: dict[str, Any] | None = None
    generated: dict[str, str] = {}
    with progress("building candidates", len(candidates), unit="candidate") as shown:
        for candidate in shown.each(candidates, lambda c: c.label):
            try:
                backend = _build(checkpoint, candidate)
            except Exception as exc:  # a candidate that cannot be built here is reported, not fatal
                skipped[candidate.label] = _short(exc)
                continue
            if feed is None:
                given = load_inputs(args.input, backend.input_names)
                chosen = reference_feed(checkpoint, backend, given)
                feed, generated = dict(chosen.feed), dict(chosen.generated)
            try:
                backend.run(feed, run_options=quiet_run_options())
            except InputValidationError as exc:
                error = first_run_error(exc, given, generated)
                if error is None:
                    raise
                raise error from exc
            except Exception as exc:  # nor is one that builds but cannot run
                backend.close()
                skipped[candidate.label] = _short(exc)
                continue
            backends[candidate] = backend
    if feed is None or not backends:
        error = RuntimeError(f"no candidate could be built and run: {skipped}")
        raise first_run_error(error, given, generated) or error
    return backends, feed, skipped


def _check_saveable(given: Sequence[Sequence[ProviderEntry]]) -> None:
    """``--save`` keeps provider kinds and a thread count: chains with options cannot be saved."""
    with_options = [entry.kind for chain in given for entry in chain if entry.options]
    if with_options:
        raise UsageError(
            "--save: expected --providers without options (an autotune record keeps provider "
            f"kinds and a thread count), got options for {', '.join(with_options)}"
        )


def _many_callers(args: argparse.Namespace) -> int:
    """``--callers`` or a throughput ``--hint``: the serving add-on's ``bench-callers`` command
    (one line naming what to install without it); the flags of one caller's benchmark it does
    not take are one usage error line."""
    asked = "--callers" if args.callers else f"--hint {args.hint}"
    if args.save:
        raise UsageError(
            f"--save: expected no {asked} (it records one caller's fastest chain and thread "
            "count), got both"
        )
    if args.threads:
        raise UsageError(
            f"--threads: expected no {asked} (the hint sizes the threads), got --threads"
        )
    from ..addons import COMMANDS_GROUP, entry_point_target

    command = entry_point_target(
        COMMANDS_GROUP, "bench-callers", needed_for=f"ortplug bench {asked}"
    )
    code: int = command.run(args)
    return code


@show_progress()  # bars on a terminal's stderr (ortplug.progress)
def bench(args: argparse.Namespace) -> int:
    """Build every candidate, run them interleaved for ``--rounds``, print medians and ratios;
    with ``--callers`` or a throughput ``--hint``, many callers instead (:func:`_many_callers`)."""
    if args.callers or args.hint != "latency":
        return _many_callers(args)
    if args.save:
        _check_saveable(args.providers)
        autotune.check_can_save()  # an unusable cache fails now, not after the benchmark
    checkpoint = LocalCheckpoint(args.model).resolve()
    plugins = get_plugin_host()
    policy = DefaultProviderPolicy(plugins, autotune=False).explain(
        checkpoint.metadata, plugins.host_capabilities(), checkpoint
    )
    candidates = [
        _candidate(chain, threads, policy)
        for chain in _chains(policy, args.providers)
        for threads in _threads(args.threads)
    ]
    default = _candidate(None, None, policy)
    if args.save and default not in candidates:
        candidates.insert(0, default)  # --save claims a speedup over the default: measure it
    backends, feed, skipped = _ready(checkpoint, candidates, args)
    samples: dict[_Candidate, list[float]] = {c: [] for c in backends}
    order = list(backends)
    with progress("timing candidates", args.rounds * len(order), unit="run") as shown:
        for round_index in range(args.rounds):
            turn = order[round_index % len(order) :] + order[: round_index % len(order)]
            for candidate in shown.each(turn, lambda c: c.label):
                run = functools.partial(backends[candidate].run, feed)
                run()  # warm this candidate after the others ran
                samples[candidate].append(median_ms(run, args.calls))
    for backend in backends.values():
        backend.close()
    baseline = order[0]  # the policy's default (--save or no --providers), else the first chain
    medians = {c: statistics.median(v) for c, v in samples.items()}
    best = _winner(samples, baseline)
    rows = [
        {
            "label": c.label,
            "chain": [p.kind for p in (policy.chain if c.chain is None else c.chain)],
            "threads": c.threads,
            "median_ms": round(medians[c], 6),  # microsecond runs keep their digits
            "ratio": round(medians[c] / medians[baseline], 3),
        }
        for c in order
    ]
    result: dict[str, Any] = {
        "model": str(args.model),
        "baseline": baseline.label,
        "best": best.label,
        "rounds": args.rounds,
        "rows": rows,
        "skipped": skipped,
    }
    if args.save:
        result.update(_save(checkpoint, policy, default, best, medians))
    _print(result, args.json)
    return 0


def _save(
    checkpoint: ResolvedCheckpoint,
    policy: ProviderSelection,
    default: _Candidate,
    best: _Candidate,
    medians: dict[_Candidate, float],
) -> dict[str, Any]:
    """Write the autotune record when the winner beat the measured default; else say why not."""
    host = get_plugin_host().host_capabilities()
    if default not in medians:
        return {"not_saved": f"the policy's default ({default.label}) could not be measured here"}
    if best == default:
        earlier = autotune.lookup(checkpoint, host)
        kept = (
            f"; an earlier record ({earlier.describe()}) still applies: delete "
            f"{cache_root() / 'autotune'} to drop it"
            if earlier is not None
            else ""
        )
        return {"not_saved": f"no candidate clearly beat the policy's default{kept}"}
    chain = tuple(p.kind for p in (policy.chain if best.chain is None else best.chain))
    if not chain:
        return {"not_saved": f"a record cannot hold the winner ({best.label})"}
    speedup = round(medians[default] / medians[best], 3)  # one value: the record's and the answer's
    setting = autotune.TunedSetting(chain, best.threads, speedup, medians[best])
    return {"saved": str(autotune.save(checkpoint, host, setting)), "speedup": speedup}


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(result)
        return
    print(f"{'candidate':<48}{'median ms':>12}{'vs baseline':>14}")
    for row in result["rows"]:
        print(f"{row['label']:<48}{row['median_ms']:>12.4f}{row['ratio']:>13.3f}x")
    for label, error in result["skipped"].items():
        print(f"{label:<48} skipped: {error}")
    rounds = result["rounds"]
    verdict = (
        f" — no candidate beat it clearly (by {1 - _MARGIN:.0%} at the median, in "
        f"{_rounds_to_win(rounds)} of {rounds} rounds)"
        if result["best"] == result["baseline"]
        else ""
    )
    print(f"best: {result['best']} (baseline: {result['baseline']}){verdict}")
    if "saved" in result:
        print(
            f"saved: {result['saved']}; it ran {result['speedup']:.2f}x faster than the policy's "
            "default, which run, inspect and info now use for this model on this host"
        )
    if "not_saved" in result:
        print(f"nothing saved: {result['not_saved']}")
