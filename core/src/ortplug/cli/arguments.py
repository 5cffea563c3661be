"""The command line's shared arguments and argument types, for core commands and add-ons' alike
(loading and checking the inputs is :mod:`ortplug.cli.inputs`)."""

from __future__ import annotations

import argparse

from ._json import print_json
from ._providers import GRAMMAR_HELP, provider_chain, resolve_chain
from ._usage import (
    HINTS,
    MAX_CALLERS,
    InputArg,
    UsageError,
    caller_counts,
    input_arg,
    input_dir,
    model_file,
    model_source,
    positive_int,
    seconds,
)

__all__ = [
    "GRAMMAR_HELP",
    "MAX_CALLERS",
    "MODEL_HELP",
    "InputArg",
    "UsageError",
    "add_hint",
    "add_input",
    "add_json",
    "add_providers",
    "add_providers_grammar",
    "add_verify",
    "caller_counts",
    "input_arg",
    "input_dir",
    "model_file",
    "model_source",
    "positive_int",
    "print_json",
    "provider_chain",
    "resolve_chain",
    "seconds",
]

#: What a command that reads a model takes.
MODEL_HELP = "an .onnx file or an ORT model package"


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json``: machine-readable output."""
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def add_input(parser: argparse.ArgumentParser) -> None:
    """``--input NAME=FILE.npy``, repeatable; the inputs not given are generated."""
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        type=input_arg,
        metavar="NAME=FILE.npy",
        help="an input array (numpy.save); inputs not given are generated from a fixed seed "
        "(dynamic sizes from metadata extra.dim_ranges and input names)",
    )


def add_verify(parser: argparse.ArgumentParser) -> None:
    """``--verify``: prove every candidate against the CPU reference first."""
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check every accelerator and variant against the CPU reference before trusting it",
    )


def add_hint(parser: argparse.ArgumentParser, serves: str) -> None:
    """``--hint``: the performance hint ``serves`` (what is built) with."""
    parser.add_argument(
        "--hint",
        choices=HINTS,
        default="latency",
        help=f"the performance hint {serves} with: latency (default: each call as fast as one "
        "caller can be served), throughput (streams and a queue that batches concurrent "
        "requests, measured on this host; the serving add-on) or cumulative_throughput (every "
        "verified device at once)",
    )


def add_providers(parser: argparse.ArgumentParser, default: str = "the policy chooses") -> None:
    """``--providers CHAIN``: an explicit chain with options."""
    parser.add_argument(
        "--providers",
        type=provider_chain,
        metavar="CHAIN",
        help=f"explicit chain with options, e.g. cuda:device_id=1,cpu (default: {default})",
    )


def add_providers_grammar(parser: argparse.ArgumentParser) -> None:
    """End the command's ``--help`` with the ``--providers`` chain grammar, kept as written."""
    parser.epilog = GRAMMAR_HELP
    width = getattr(parser.formatter_class, "keywords", {}).get("width")  # the CLI's fixed width
    formatter = argparse.RawDescriptionHelpFormatter

    def raw(prog: str) -> argparse.HelpFormatter:
        return formatter(prog) if width is None else formatter(prog, width=width)

    parser.formatter_class = raw
