"""``ortplug`` console script: argument parsing, dispatch, and one-line errors on stderr."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ortplug",
        description="Run ONNX models on the best execution provider this host has.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a model (by default the small demo model shipped here)")
    run.add_argument("model", nargs="?", help="path to an .onnx file (default: the demo model)")
    run.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="an input tensor; inputs not given are generated from a fixed seed",
    )
    run.add_argument(
        "--providers",
        help="explicit, strictly enforced chain, e.g. cuda,cpu (default: the policy chooses)",
    )
    run.add_argument("--repeat", type=int, default=20, help="timed runs after the first (20)")
    run.add_argument("--json", action="store_true", help="machine-readable output")

    info = sub.add_parser("info", help="host facts, plugins, and the chain the policy would pick")
    info.add_argument("--model", help="pick the chain for this model (default: the demo model)")
    info.add_argument("--json", action="store_true", help="machine-readable output")

    plugins = sub.add_parser("plugins", help="plugins that are loaded, blocked or failed")
    plugins.add_argument("--json", action="store_true", help="machine-readable output")

    doctor = sub.add_parser(
        "doctor", help="check this host and installation; print a fix per problem"
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output")

    inspect = sub.add_parser("inspect", help="a model's inputs, outputs, metadata and placement")
    inspect.add_argument("model", help="path to an .onnx file")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")

    bench = sub.add_parser("bench", help="candidate chains and thread counts side by side")
    bench.add_argument("model", help="path to an .onnx file")
    bench.add_argument(
        "--providers",
        action="append",
        default=[],
        metavar="LIST",
        help="a chain to try, e.g. cuda,cpu (repeatable; default: the policy's and alternatives)",
    )
    bench.add_argument("--threads", help="intra-op thread counts to try, e.g. 1,2,4")
    bench.add_argument("--rounds", type=int, default=5, help="interleaved rounds (5)")
    bench.add_argument(
        "--calls", type=int, default=20, help="timed calls per candidate and round (20)"
    )
    bench.add_argument(
        "--save", action="store_true", help="remember the fastest for this model on this host"
    )
    bench.add_argument("--json", action="store_true", help="machine-readable output")

    batch = sub.add_parser(
        "batch", help="run a folder of inputs through a model, locally or on Ray"
    )
    batch.add_argument("model", help="path to an .onnx file")
    batch.add_argument(
        "--input-dir", required=True, help="<input>.npy files, or Parquet with --ray"
    )
    batch.add_argument("--output-dir", required=True, help="where <output>.npy (or Parquet) go")
    batch.add_argument(
        "--ray", action="store_true", help="run on Ray Data (pip install 'ortplug[ray]')"
    )
    batch.add_argument("--batch-size", type=int, default=256, help="rows per batch (256)")
    batch.add_argument("--providers", help="explicit chain, e.g. cuda,cpu (default: the policy)")
    batch.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (0 ok, 1 error, 2 usage)."""
    args = _parser().parse_args(argv)
    from . import _commands

    command = {"run": _commands.run, "info": _commands.info, "plugins": _commands.plugins}
    if args.command in ("doctor", "inspect"):
        from . import _diagnose

        command = {"doctor": _diagnose.doctor, "inspect": _diagnose.inspect}
    elif args.command == "bench":
        from ._bench import bench

        command = {"bench": bench}
    elif args.command == "batch":
        from ._batch import batch

        command = {"batch": batch}
    try:
        return command[args.command](args)
    except Exception as exc:  # one line per failure; ORTPLUG_DEBUG=1 shows the traceback
        if os.environ.get("ORTPLUG_DEBUG"):
            raise
        print(f"ortplug {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
