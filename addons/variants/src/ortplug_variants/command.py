"""``ortplug variants``: the variants add-on's command (entry-point group ``ortplug.commands``).

Parsing imports neither numpy nor ONNX Runtime: :mod:`ortplug_variants._command` is imported to
run it.
"""

from __future__ import annotations

import argparse

from ortplug.cli.arguments import add_json, model_file
from ortplug.cli.command import Command

__all__ = ["COMMAND"]


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    """``variants MODEL [--int8] [--fp16] [--json]``."""
    parser.add_argument("model", type=model_file, help="path to an fp32 .onnx file")
    parser.add_argument("--int8", action="store_true", help="static int8 quantization (QDQ)")
    parser.add_argument("--fp16", action="store_true", help="fp16 with fp32 inputs and outputs")
    add_json(parser)


def _run(args: argparse.Namespace) -> int:
    from ._command import variants

    return variants(args)


#: The ``variants`` command.
COMMAND = Command(
    name="variants",
    help="build int8/fp16 variants of a model and list them in its manifest",
    add_arguments=_add_arguments,
    run=_run,
)
