"""``ortplug`` console script: argument parsing, dispatch, one-line errors and warnings on stderr.

Exit codes: 0 ok, 1 the command failed, 2 a usage error (a flag's value, a path),
141 stdout closed early (``ortplug inspect M | head``), 130 interrupted. Parsing
imports neither numpy nor ONNX Runtime: each command imports what it needs.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import NoReturn, TextIO

from ._providers import GRAMMAR_HELP, provider_chain
from ._usage import (
    UsageError,
    input_arg,
    input_dir,
    model_file,
    model_source,
    non_negative_float,
    positive_int,
    thread_counts,
    tolerance_pair,
)

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line naming the command and pointing at --help."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _add_input(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        type=input_arg,
        metavar="NAME=FILE.npy",
        help="an input array (numpy.save); inputs not given are generated from a fixed seed "
        "(dynamic sizes from metadata extra.dim_ranges and input names)",
    )


def _add_verify(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check every accelerator and variant against the CPU reference before trusting it",
    )


def _with_grammar(
    sub: argparse._SubParsersAction[_Parser], name: str, help: str
) -> argparse.ArgumentParser:
    """A command that takes ``--providers``: its --help ends with the chain grammar."""
    return sub.add_parser(
        name,
        help=help,
        epilog=GRAMMAR_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _add_verification_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``verify`` (outputs against the CPU reference) and ``variants`` (build int8/fp16 variants)."""
    verify = _with_grammar(
        sub, "verify", "check a model's providers and precision variants against the CPU reference"
    )
    verify.add_argument("model", type=model_source, help="an .onnx file or an ORT model package")
    verify.add_argument(
        "--providers",
        type=provider_chain,
        metavar="CHAIN",
        help="check this chain on the reference and each variant (default: the policy's choices)",
    )
    verify.add_argument("--variant", help="with --providers: only this variant")
    verify.add_argument(
        "--tolerance",
        type=tolerance_pair,
        metavar="RTOL,ATOL",
        help="one tolerance for every output (default: each precision's, or the manifest's)",
    )
    _add_json(verify)

    variants = sub.add_parser(
        "variants", help="build int8/fp16 variants of a model and list them in its manifest"
    )
    variants.add_argument("model", type=model_file, help="path to an fp32 .onnx file")
    variants.add_argument("--int8", action="store_true", help="static int8 quantization (QDQ)")
    variants.add_argument("--fp16", action="store_true", help="fp16 with fp32 inputs and outputs")
    _add_json(variants)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ortplug",
        description="Run ONNX models on the best execution provider this host has.",
        epilog="exit codes: 0 ok, 1 the command failed, 2 a usage error; "
        "ORTPLUG_DEBUG=1 shows tracebacks and ONNX Runtime's own log",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = _with_grammar(sub, "run", "run a model (by default the small demo model shipped here)")
    run.add_argument(
        "model", nargs="?", type=model_file, help="path to an .onnx file (default: the demo model)"
    )
    _add_input(run)
    run.add_argument(
        "--providers",
        type=provider_chain,
        metavar="CHAIN",
        help="explicit chain with options, e.g. cuda:device_id=1,cpu (default: the policy chooses)",
    )
    run.add_argument("--repeat", type=positive_int, default=20, help="timed runs after the first")
    run.add_argument(
        "--startup-fallback",
        action="store_true",
        help="serve on the CPU at once while the accelerator builds and warms up, then switch",
    )
    _add_verify(run)
    _add_json(run)

    info = sub.add_parser("info", help="host facts, plugins, and the chain the policy would pick")
    info.add_argument(
        "--model", type=model_file, help="pick the chain for this model (default: the demo model)"
    )
    _add_json(info)

    plugins = sub.add_parser("plugins", help="plugins that are loaded, blocked or failed")
    _add_json(plugins)

    doctor = sub.add_parser(
        "doctor", help="check this host and installation; print a fix per problem"
    )
    _add_json(doctor)

    inspect = sub.add_parser("inspect", help="a model's inputs, outputs, metadata and placement")
    inspect.add_argument("model", type=model_file, help="path to an .onnx file")
    _add_json(inspect)

    bench = _with_grammar(sub, "bench", "candidate chains and thread counts side by side")
    bench.add_argument("model", type=model_file, help="path to an .onnx file")
    bench.add_argument(
        "--providers",
        action="append",
        default=[],
        type=provider_chain,
        metavar="CHAIN",
        help="a chain to try, e.g. cuda,cpu (repeatable; default: the policy's and alternatives)",
    )
    bench.add_argument(
        "--threads", type=thread_counts, help="intra-op thread counts to try, e.g. 1,2,4"
    )
    _add_input(bench)
    bench.add_argument("--rounds", type=positive_int, default=5, help="interleaved rounds (5)")
    bench.add_argument(
        "--calls", type=positive_int, default=20, help="timed calls per candidate and round (20)"
    )
    bench.add_argument(
        "--save",
        action="store_true",
        help="measure the policy's default too and remember the fastest if it beat the default",
    )
    _add_verify(bench)
    _add_json(bench)

    _add_verification_commands(sub)

    batch = _with_grammar(sub, "batch", "run a folder of inputs through a model, locally or on Ray")
    batch.add_argument("model", type=model_file, help="path to an .onnx file")
    batch.add_argument(
        "--input-dir",
        required=True,
        type=input_dir,
        help="<input>.npy files, or Parquet with --ray",
    )
    batch.add_argument("--output-dir", required=True, help="where <output>.npy (or Parquet) go")
    batch.add_argument(
        "--ray", action="store_true", help="run on Ray Data (pip install 'ortplug[ray]')"
    )
    batch.add_argument("--batch-size", type=positive_int, default=256, help="rows per batch")
    batch.add_argument(
        "--providers",
        type=provider_chain,
        metavar="CHAIN",
        help="explicit chain with options, e.g. cuda:device_id=1,cpu (default: the policy)",
    )
    _add_json(batch)

    cache = sub.add_parser("cache", help="what ortplug keeps in its cache; prune or clear it")
    cache.add_argument(
        "action",
        nargs="?",
        choices=("list", "prune", "clear"),
        default="list",
        help="list (default), prune (stale entries, then least recently used over the cap), clear",
    )
    cache.add_argument(
        "--max-mb",
        type=non_negative_float,
        help="with prune: the size to keep under (default: $ORTPLUG_CACHE_MAX_MB, else no cap)",
    )
    _add_json(cache)

    info.add_argument(
        "--refresh", action="store_true", help="probe the host again (forget cached probe facts)"
    )
    return parser


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    """The function of a command, imported only now (the heavy imports live in the commands)."""
    if name in ("doctor", "inspect"):
        from . import _diagnose

        return _diagnose.doctor if name == "doctor" else _diagnose.inspect
    if name == "bench":
        from ._bench import bench

        return bench
    if name == "batch":
        from ._batch import batch

        return batch
    if name == "cache":
        from ._cache import cache

        return cache
    if name in ("verify", "variants"):
        from . import _variants

        return _variants.verify if name == "verify" else _variants.variants
    from . import _commands

    return {"run": _commands.run, "info": _commands.info, "plugins": _commands.plugins}[name]


def _one_line(text: str) -> str:
    """A possibly multi-line message (``invalid model inputs:\\n  - ...``) as one line."""
    lines = [line.strip().removeprefix("- ") for line in text.splitlines() if line.strip()]
    return " ".join([*lines[:1], "; ".join(lines[1:])]).strip()


def _show_warning(  # noqa: PLR0917 (the signature of warnings.showwarning)
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` for the CLI: ``ortplug: warning: MESSAGE``, one line on stderr."""
    print(f"ortplug: warning: {_one_line(str(message))}", file=file or sys.stderr)


def _stdout_closed() -> int:
    """Stdout's reader went away (``| head``): stop quietly, as a killed-by-SIGPIPE tool would."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
    return 141


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (see the module docstring)."""
    args = _parser().parse_args(argv)
    prog = f"ortplug {args.command}"
    debug = bool(os.environ.get("ORTPLUG_DEBUG"))
    shown = warnings.showwarning
    if not debug:
        warnings.showwarning = _show_warning
    try:
        code = _command(args.command)(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line per failure; ORTPLUG_DEBUG=1 shows the traceback
        if debug:
            raise
        message = _one_line(str(exc)) or type(exc).__name__
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    finally:
        warnings.showwarning = shown


if __name__ == "__main__":
    sys.exit(main())
