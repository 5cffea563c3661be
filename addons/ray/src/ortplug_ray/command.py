"""``ortplug batch``: the Ray add-on's command (entry-point group ``ortplug.commands``).

Parsing imports neither numpy nor Ray: :mod:`ortplug_ray._batch` is imported to run it.
"""

from __future__ import annotations

import argparse

from ortplug.cli.arguments import (
    MODEL_HELP,
    add_hint,
    add_json,
    add_providers,
    add_providers_grammar,
    input_dir,
    model_source,
    positive_int,
)
from ortplug.cli.command import Command

__all__ = ["COMMAND"]


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    """``batch MODEL --input-dir DIR --output-dir DIR [--ray] [--batch-size N] ...``."""
    parser.add_argument("model", type=model_source, help=MODEL_HELP)
    parser.add_argument(
        "--input-dir",
        required=True,
        type=input_dir,
        help="<input>.npy files, or Parquet with --ray",
    )
    parser.add_argument("--output-dir", required=True, help="where <output>.npy (or Parquet) go")
    parser.add_argument(
        "--ray", action="store_true", help="run on Ray Data (pip install 'ortplug[ray]')"
    )
    parser.add_argument("--batch-size", type=positive_int, default=256, help="rows per batch")
    add_providers(parser, "the policy")
    add_hint(parser, "each backend (one per Ray actor) is built")
    add_json(parser)
    add_providers_grammar(parser)


def _run(args: argparse.Namespace) -> int:
    from ._batch import batch

    return batch(args)


#: The ``batch`` command.
COMMAND = Command(
    name="batch",
    help="run a folder of inputs through a model, locally or on Ray",
    add_arguments=_add_arguments,
    run=_run,
)
