"""A command an add-on adds to the ``ortplug`` command line (entry-point group ``ortplug.commands``),
imported only to parse or run it; one whose start a program waits on also declares a runner of its
raw arguments in ``ortplug.quick``, run before any parsing."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import attrs

__all__ = ["Command"]


@attrs.frozen
class Command:
    """One command: its one-line help, its arguments and what runs it."""

    #: The word after ``ortplug``.
    name: str
    #: The one line ``ortplug --help`` shows for it.
    help: str
    #: Adds the command's arguments (and its description) to its parser.
    add_arguments: Callable[[argparse.ArgumentParser], None]
    #: Runs the parsed command; returns the exit code (0 ok, 1 failed, 2 usage error).
    run: Callable[[argparse.Namespace], int]
    #: The longer text of ``ortplug NAME --help`` (default: the one line).
    description: str | None = None
    #: Left out of ``ortplug --help``'s list: a command another command's flags run (``ortplug
    #: bench --callers`` runs ``bench-callers``), still run by its own name.
    hidden: bool = False
