"""``ortplug exec``: the drop-in add-on's command (entry-point group ``ortplug.commands``).

Its usual arguments are read without building a parser, by ``_exec.quick`` (entry-point group
``ortplug.quick``): the program's start-up waits on it.
"""

from __future__ import annotations

import argparse

from ortplug.cli.command import Command

from ._exec import exec_program
from ._variants import VARIANTS_ENTRY, VARIANTS_VARIABLE
from .patching import TAKEOVER_RULES

__all__ = ["COMMAND"]

_DESCRIPTION = (
    "Run COMMAND with ortplug's drop-in in place of onnxruntime.InferenceSession (a start-up "
    "hook on PYTHONPATH; nothing is installed). Sessions built with providers=None get "
    "ortplug's choice; arguments, exit code and signals are the program's own."
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    """``exec [--takeover RULE] [--report] [--allow-variants] -- COMMAND ...``."""
    parser.add_argument(
        "--takeover",
        choices=TAKEOVER_RULES,
        default="cpu",
        help="explicit provider lists ortplug replaces too: none, only CPU-only lists (default), "
        "or all",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="on exit, print one line per session built (model, chain, why) to stderr",
    )
    parser.add_argument(
        "--allow-variants",
        action="store_true",
        help="let a session serve a verified precision variant (int8, fp16) its model's "
        f"manifest lists in place of the file the program gave, said on stderr (sets "
        f"{VARIANTS_VARIABLE}=1; a session config entry {VARIANTS_ENTRY}=1 does it per "
        "session); default: never",
    )
    parser.add_argument(
        "program", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the program to run"
    )


#: The ``exec`` command.
COMMAND = Command(
    name="exec",
    help="run a Python program with onnxruntime.InferenceSession chosen by ortplug",
    add_arguments=_add_arguments,
    run=exec_program,
    description=_DESCRIPTION,
)
