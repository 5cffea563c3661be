"""``ortplug bench M --callers 1,4,16 [--hint throughput]``: many callers, ortplug against ONNX Runtime.

The core's ``bench`` hands ``--callers`` (and a throughput ``--hint``) to the ``bench-callers``
command this add-on registers (:mod:`.command`), which runs :func:`bench_callers`. At each count
of concurrent callers (:mod:`.callers`), ortplug's backend built with ``--hint``
and a plain ``onnxruntime.InferenceSession`` of the same model file, on the providers ortplug
realized and ONNX Runtime's default options, serve the same request for ``--seconds`` each, in
``--rounds`` interleaved rounds: requests per second, p50 and p99 latency, and the ratio.
Under a throughput hint the serving layout the build measured (or found recorded) is shown,
and what it served over every round (:func:`~.server.served`: rows per second per stream,
queueing delay, batch fill);
arrays given with ``--input`` are what both sides serve and what the build verifies and
measures its layout on (``Verification(inputs=...)``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ortplug.backend import OnnxBackend, Verification
from ortplug.checkpoint import LocalCheckpoint
from ortplug.cli.arguments import UsageError, print_json, resolve_chain
from ortplug.cli.inputs import (
    first_run,
    given_usage,
    load_inputs,
    quiet_run_options,
    reference_feed,
)
from ortplug.errors import InputValidationError
from ortplug.host.runtime import require_onnxruntime
from ortplug.progress import Progress, progress, show_progress

from .callers import Served, drive
from .server import served

__all__ = ["DEFAULT_CALLERS", "bench_callers"]

#: ``--callers`` when only ``--hint`` asks for this benchmark.
DEFAULT_CALLERS = (1, 4, 16)
_SIDES = ("onnxruntime", "ortplug")


def _check_flags(args: argparse.Namespace) -> None:
    """One chain at most (ortplug's side and ONNX Runtime's run on it): one usage error line."""
    if len(args.providers) > 1:
        asked = "--callers" if args.callers else f"--hint {args.hint}"
        raise UsageError(
            f"--providers: expected at most one chain with {asked}, got {len(args.providers)}"
        )


@show_progress()  # the build's measuring and the rounds, on a terminal's stderr
def bench_callers(args: argparse.Namespace) -> int:
    """Serve ``--callers`` concurrent callers with ortplug and ONNX Runtime; print the table."""
    _check_flags(args)
    counts = list(args.callers or DEFAULT_CALLERS)
    checkpoint = LocalCheckpoint(args.model).resolve()
    providers = resolve_chain(args.providers[0]) if args.providers else None
    given = load_inputs(args.input, checkpoint.metadata.input_names)
    verify = Verification(inputs=given) if given else (True if args.verify else None)
    with given_usage():  # arrays the model does not take: one usage error line
        backend = OnnxBackend.from_checkpoint(
            checkpoint, providers, verify=verify, performance_hint=args.hint
        )
    with backend:
        chosen = reference_feed(checkpoint, backend, given)
        feed, generated = dict(chosen.feed), dict(chosen.generated)
        ort = require_onnxruntime()
        realized = list(backend.providers)
        session = ort.InferenceSession(str(checkpoint.weights_path), providers=realized)
        names = [output.name for output in session.get_outputs()]
        quiet = quiet_run_options()
        runs: dict[str, Callable[[], object]] = {
            "onnxruntime": lambda: session.run(names, feed),
            "ortplug": lambda: backend.run(feed),
        }
        with first_run(given, generated, (InputValidationError, RuntimeError)):  # before timing
            backend.run(feed, run_options=quiet)
            runs["onnxruntime"]()
        with progress("serving callers", len(counts) * args.rounds * 2, unit="slice") as shown:
            rows = [_row(runs, callers, args.rounds, args.seconds, shown) for callers in counts]
        serving = backend.serving
        traffic = served(backend)
    result: dict[str, Any] = {
        "model": str(args.model),
        "hint": args.hint,
        "providers": realized,
        "rounds": args.rounds,
        "seconds": args.seconds,
        "generated_inputs": generated,
        "rows": rows,
        "serving": None if serving is None else serving.to_dict(),
        "served": None if traffic is None else traffic.to_dict(),
    }
    if args.json:
        print_json(result)
        return 0
    lines = [] if serving is None else serving.lines()
    _print(result, lines + ([] if traffic is None else traffic.lines()))
    return 0


def _row(
    runs: dict[str, Callable[[], object]],
    callers: int,
    rounds: int,
    seconds: float,
    shown: Progress,
) -> dict[str, Any]:
    """Both sides at ``callers``, interleaved (the first side turns each round)."""
    slices: dict[str, list[Served]] = {side: [] for side in _SIDES}
    for index in range(rounds):
        turn = _SIDES[index % 2 :] + _SIDES[: index % 2]
        for side in shown.each(turn, lambda side: f"{side} at {callers} callers"):
            slices[side].append(drive(runs[side], callers, seconds))
    pooled = {side: Served.pooled(parts) for side, parts in slices.items()}
    row: dict[str, Any] = {"callers": callers}
    for side, pool in pooled.items():
        row[side] = {
            "requests": pool.requests,
            "requests_per_s": round(pool.requests_per_s, 1),
            "p50_ms": round(pool.p50_ms, 3),
            "p99_ms": round(pool.p99_ms, 3),
        }
    plain = pooled["onnxruntime"].requests_per_s
    row["ratio"] = round(pooled["ortplug"].requests_per_s / plain, 3) if plain else None
    return row


def _print(result: dict[str, Any], serving: list[str]) -> None:
    ours = f"ortplug ({result['hint']})"
    print(f"{'callers':>7}  {'onnxruntime req/s':>17} {'p50 ms':>8} {'p99 ms':>8}  "
          f"{ours + ' req/s':>26} {'p50 ms':>8} {'p99 ms':>8}  {'vs onnxruntime':>14}")  # fmt: skip
    for row in result["rows"]:
        plain, mine = row["onnxruntime"], row["ortplug"]
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        print(
            f"{row['callers']:>7}  {plain['requests_per_s']:>17.1f} {plain['p50_ms']:>8.2f} "
            f"{plain['p99_ms']:>8.2f}  {mine['requests_per_s']:>26.1f} {mine['p50_ms']:>8.2f} "
            f"{mine['p99_ms']:>8.2f}  {ratio:>14}"
        )
    print(
        f"onnxruntime: a plain InferenceSession of the model file on {', '.join(result['providers'])}"
        f" with its default options; {result['rounds']} interleaved rounds of "
        f"{result['seconds']:g} s per side and caller count"
    )
    for name, how in result["generated_inputs"].items():
        print(f"generated {name}: {how} (seed 0; pass real data with --input {name}=FILE.npy)")
    for line in serving:
        print(f"serving  {line}")
