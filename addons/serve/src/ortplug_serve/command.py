"""``ortplug bench-callers``, what ``ortplug bench M --callers 1,4,16 [--hint throughput]`` runs
(entry-point group ``ortplug.commands``; left out of ``ortplug --help``'s list: ``ortplug bench``
is its spelling).

``ortplug --help`` reads every add-on's command: this module imports only the core's argument
helpers (no numpy, no ONNX Runtime); the benchmark itself (:mod:`.bench`) is imported to run.
"""

from __future__ import annotations

import argparse

from ortplug.cli.arguments import (
    MODEL_HELP,
    add_hint,
    add_input,
    add_json,
    add_verify,
    caller_counts,
    model_source,
    positive_int,
    provider_chain,
    seconds,
)
from ortplug.cli.command import Command

__all__ = ["COMMAND", "add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments ``ortplug bench`` gives this benchmark (the core's parser has them too)."""
    parser.usage = "%(prog)s model [--callers COUNTS] [--hint HINT] [options]"  # 78 columns
    parser.add_argument("model", type=model_source, help=MODEL_HELP)
    parser.add_argument(
        "--providers",
        action="append",
        default=[],
        type=provider_chain,
        metavar="CHAIN",
        help="the chain of ortplug's side, e.g. cuda,cpu (default: the policy chooses)",
    )
    add_input(parser)
    parser.add_argument("--rounds", type=positive_int, default=5, help="interleaved rounds (5)")
    parser.add_argument(
        "--callers",
        type=caller_counts,
        metavar="COUNTS",
        help="concurrent callers, e.g. 1,4,16 (default: 1,4,16)",
    )
    parser.add_argument(
        "--seconds",
        type=seconds,
        default=0.5,
        help="seconds each side serves per caller count and round (0.5)",
    )
    add_hint(parser, "ortplug's side is built")
    add_verify(parser)
    add_json(parser)


def _run(args: argparse.Namespace) -> int:
    from .bench import bench_callers  # numpy, ONNX Runtime and the backend: only to run it

    return bench_callers(args)


#: ``ortplug bench-callers``: what ``ortplug bench --callers`` runs.
COMMAND = Command(
    name="bench-callers",
    help="concurrent callers: ortplug's performance hint against a plain ONNX Runtime session",
    add_arguments=add_arguments,
    run=_run,
    description="What `ortplug bench M --callers 1,4,16 [--hint throughput]` runs: requests/s "
    "and p50/p99 latency of ortplug (--hint) against a plain ONNX Runtime session of the same "
    "model file with the same callers.",
    hidden=True,
)
