"""The ``ortplug`` argument parser: the core's commands and those add-ons register.

Help is rendered at a fixed width (78 columns, as on an 80-column terminal) and without colour,
so that it reads the same on every terminal. An add-on's commands (entry-point group
``ortplug.commands``) are imported only to parse or run them, or for ``ortplug --help``.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ._demo import DEMO_MARK, with_demo_path
from ._providers import GRAMMAR_HELP, provider_chain
from ._usage import (
    caller_counts,
    input_arg,
    model_source,
    positive_int,
    seconds,
    size_mb,
    thread_counts,
    tolerance_pair,
)
from .arguments import MODEL_HELP, add_hint, add_input, add_json, add_verify

__all__ = ["build_parser"]

#: Columns of help text (argparse's own default on an 80-column terminal).
_WIDTH = 78


def _formatter(base: type[argparse.HelpFormatter]) -> Any:
    """``base`` at the fixed :data:`_WIDTH`, whatever the terminal (argparse asks the terminal)."""
    return functools.partial(base, width=_WIDTH)


class _Parser(argparse.ArgumentParser):
    """A parser whose help is 78 columns wide on every terminal and whose errors are one line
    naming the command and pointing at --help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _formatter(argparse.HelpFormatter))
        if sys.version_info >= (3, 14):  # plain help, as kept: not coloured on a terminal
            kwargs.setdefault("color", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._arguments = list(sys.argv[1:] if args is None else args)  # for error()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        return with_demo_path(super().format_help())

    def error(self, message: str) -> NoReturn:
        message = self._flag_like_value(message)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def _flag_like_value(self, message: str) -> str:
        """argparse takes a value that begins with '-' (``--tolerance -1,0``) for a flag and says
        only "expected one argument": check it as the flag's value, or say how to pass it."""
        head, _, tail = message.partition(": ")
        if tail != "expected one argument" or not head.startswith("argument "):
            return message
        names = head.removeprefix("argument ").split("/")
        arguments = getattr(self, "_arguments", [])
        given = [(a, b) for a, b in itertools.pairwise(arguments) if a in names]
        if not given or not given[0][1].startswith("-"):
            return message
        flag, value = given[0]
        if value in self._option_string_actions:  # a real flag: the value is missing
            return message
        check = self._option_string_actions[flag].type
        if callable(check):
            try:
                check(value)
            except argparse.ArgumentTypeError as exc:
                return f"{head}: {exc}"
        return f"{message} (a value that begins with '-' reads as a flag: write {flag}={value})"


class _CommandParser(_Parser):
    """A command's parser: what it does not know is its error (``ortplug run: error:
    unrecognized arguments``), not left to the top parser, which would say ``ortplug: error``."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class _VersionAction(argparse.Action):
    """``--version``: ortplug's, ONNX Runtime's and each plugin's versions, then exit."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> NoReturn:
        from ._version import version_text

        parser._print_message(version_text(), sys.stdout)  # stderr when there is no stdout
        parser.exit()


def _add_callers(bench: argparse.ArgumentParser) -> None:
    """``bench --callers``, ``--seconds`` and ``--hint``: many callers instead of one."""
    bench.add_argument(
        "--callers",
        type=caller_counts,
        metavar="COUNTS",
        help="concurrent callers instead, e.g. 1,4,16: requests/s and p50/p99 latency of "
        "ortplug (--hint) against a plain ONNX Runtime session with the same callers "
        "(default with --hint throughput: 1,4,16)",
    )
    bench.add_argument(
        "--seconds",
        type=seconds,
        default=0.5,
        help="with --callers: seconds each side serves per caller count and round (0.5)",
    )
    add_hint(bench, "ortplug's side of --callers is built")


def _with_grammar(
    sub: argparse._SubParsersAction[_CommandParser], name: str, help: str, before: str = ""
) -> argparse.ArgumentParser:
    """A command that takes ``--providers``: its --help ends with the chain grammar (after
    ``before``)."""
    return sub.add_parser(
        name,
        help=help,
        epilog=before + GRAMMAR_HELP,
        formatter_class=_formatter(argparse.RawDescriptionHelpFormatter),
    )


def _add_verification_commands(sub: argparse._SubParsersAction[_CommandParser]) -> None:
    """``verify``: outputs against the CPU reference (``variants`` is the variants add-on's)."""
    verify = _with_grammar(
        sub, "verify", "check a model's providers and precision variants against the CPU reference"
    )
    verify.add_argument("model", type=model_source, help=MODEL_HELP)
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
    verify.add_argument(
        "--input",
        action="append",
        default=[],
        type=input_arg,
        metavar="NAME=FILE.npy",
        help="an input array to verify on first (numpy.save; real data), before the "
        "checkpoint's samples/; inputs not given are generated",
    )
    add_json(verify)


def _parser_and_commands() -> tuple[
    argparse.ArgumentParser, argparse._SubParsersAction[_CommandParser]
]:
    """The ``ortplug`` parser with the core's commands, and its commands' action."""
    parser = _Parser(
        prog="ortplug",
        description="Run ONNX models on the best execution provider this host has.",
        epilog="exit codes: 0 ok, 1 the command failed, 2 a usage error; "
        "ORTPLUG_DEBUG=1 shows tracebacks and ONNX Runtime's own log",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        default=argparse.SUPPRESS,
        help="print ortplug's, ONNX Runtime's and each plugin's versions and exit "
        "(with --json: as JSON)",
    )
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_CommandParser
    )

    run = _with_grammar(
        sub,
        "run",
        "run a model (by default the small demo model shipped here)",
        f"the demo model (the default): {DEMO_MARK}\n\n",
    )
    run.add_argument(
        "model",
        nargs="?",
        type=model_source,
        help=f"{MODEL_HELP} (default: the demo model, named below)",
    )
    add_input(run)
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
    add_hint(run, "the model is built")
    add_verify(run)
    add_json(run)

    info = sub.add_parser("info", help="host facts, plugins, and the chain the policy would pick")
    info.add_argument(
        "--model",
        type=model_source,
        help="pick the chain for this model or model package (default: the demo model)",
    )
    add_json(info)

    plugins = sub.add_parser("plugins", help="plugins that are loaded, blocked or failed")
    add_json(plugins)

    doctor = sub.add_parser(
        "doctor", help="check this host and installation; print a fix per problem"
    )
    doctor.add_argument(
        "--fix",
        action="store_true",
        help="print the pip commands that make this environment fit the host's hardware "
        "(plugins, the one right runtime wheel); changes nothing",
    )
    doctor.add_argument(
        "--yes", action="store_true", help="with --fix: run those commands, then check again"
    )
    add_json(doctor)

    inspect = sub.add_parser("inspect", help="a model's inputs, outputs, metadata and placement")
    inspect.add_argument("model", type=model_source, help=MODEL_HELP)
    add_json(inspect)

    bench = _with_grammar(sub, "bench", "candidate chains and thread counts side by side")
    bench.add_argument("model", type=model_source, help=MODEL_HELP)
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
    add_input(bench)
    bench.add_argument("--rounds", type=positive_int, default=5, help="interleaved rounds (5)")
    bench.add_argument(
        "--calls", type=positive_int, default=20, help="timed calls per candidate and round (20)"
    )
    bench.add_argument(
        "--save",
        action="store_true",
        help="measure the policy's default too and remember the fastest if it beat the default",
    )
    _add_callers(bench)
    add_verify(bench)
    add_json(bench)

    _add_verification_commands(sub)

    _add_cache(sub)
    info.add_argument(
        "--refresh", action="store_true", help="probe the host again (forget cached probe facts)"
    )
    return parser, sub


def _add_cache(sub: argparse._SubParsersAction[_CommandParser]) -> None:
    """``cache``: list, prune or clear what ortplug keeps in its cache."""
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
        type=size_mb,
        help="with prune: the size to keep under (default: $ORTPLUG_CACHE_MAX_MB, else no cap)",
    )
    add_json(cache)


def _add_addon_commands(
    sub: argparse._SubParsersAction[_CommandParser], names: Sequence[str]
) -> None:
    """A parser for each add-on command in ``names`` (imported now), its run kept as a default."""
    from ..addons import COMMANDS_GROUP, entry_point_target

    for name in names:
        command = entry_point_target(COMMANDS_GROUP, name, needed_for=f"ortplug {name}")
        listed = {} if command.hidden else {"help": command.help}  # no help: not in the list
        parser = sub.add_parser(name, description=command.description or command.help, **listed)
        command.add_arguments(parser)
        parser.set_defaults(addon_run=command.run)


def build_parser(addon_commands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of the ``ortplug`` command line, with the add-on commands ``addon_commands``
    (default: every one installed), listed after the core's in name order."""
    from ..addons import COMMANDS_GROUP, entry_point_names

    parser, sub = _parser_and_commands()
    names = entry_point_names(COMMANDS_GROUP) if addon_commands is None else addon_commands
    _add_addon_commands(sub, sorted(name for name in names if name not in sub.choices))
    return parser
