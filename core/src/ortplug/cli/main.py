"""``ortplug`` console script: argument parsing, dispatch, one-line errors and warnings on stderr
(exit codes and what each command imports: docs/cli.md, docs/internals.md)."""

from __future__ import annotations

import io
import os
import sys
import warnings

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~7 ms of exec's start)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import TextIO

__all__ = ["main"]


#: The core's commands (any other word is an add-on's command).
CORE_COMMANDS = ("run", "info", "plugins", "doctor", "inspect", "bench", "cache", "verify")


def _command(args: argparse.Namespace) -> Callable[[argparse.Namespace], int]:
    """The function of a command, imported only now (the heavy imports live in the commands)."""
    addon_run: Callable[[argparse.Namespace], int] | None = getattr(args, "addon_run", None)
    if addon_run is not None:
        return addon_run
    name = args.command
    if name in ("doctor", "inspect"):
        from . import _diagnose

        return _diagnose.doctor if name == "doctor" else _diagnose.inspect
    if name == "bench":
        from ._bench import bench

        return bench
    if name == "cache":
        from ._cache import cache

        return cache
    if name == "verify":
        from ._verify import verify

        return verify
    from . import _commands

    return {"run": _commands.run, "info": _commands.info, "plugins": _commands.plugins}[name]


def _quick(name: str, arguments: Sequence[str]) -> int | None:
    """An add-on command run from its raw arguments before parsing, by the runner its
    distribution declares in ``ortplug.quick`` (``None``: parse as usual); a shipped add-on's
    command that is not installed is one line saying what to install."""
    from ..plugin_host.entry_points_txt import QUICK_GROUP, declared, load

    runners = [value for point, value in declared(QUICK_GROUP) if point == name]
    runner = load(runners[0]) if len(runners) == 1 else None  # two: the parser's path decides
    code = runner(arguments) if callable(runner) else None
    if isinstance(code, int):
        return code
    from ..addons import COMMANDS_GROUP, entry_point_names, provider_of

    addon = provider_of(COMMANDS_GROUP, name)
    if addon is None or name in entry_point_names(COMMANDS_GROUP):
        return None  # the parser says what is wrong, or parses the add-on's command
    print(f"ortplug {name}: error: {addon.missing(f'ortplug {name}')}", file=sys.stderr)
    return 2


def _one_line(text: str) -> str:
    """A possibly multi-line message (``invalid model inputs:\\n  - ...``) as one line."""
    lines = [line.strip().removeprefix("- ") for line in text.splitlines() if line.strip()]
    return " ".join([*lines[:1], "; ".join(lines[1:])]).strip()


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` for the CLI: ``ortplug: warning: MESSAGE``, one line on stderr."""
    print(f"ortplug: warning: {_one_line(str(message))}", file=file or sys.stderr)


def _silence_stdout() -> None:
    """Stdout cannot be written (its reader went away: ``| head``): send what is left nowhere,
    so the interpreter's final flush does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _discarded_stdout() -> io.StringIO:
    """No stdout at all (``ortplug info >&-``): file descriptor 1 goes to /dev/null, so that no
    file the command opens takes its place, and what the command prints is collected, so that
    the loss can be told (the command still runs: ``bench --save`` keeps its record)."""
    fd = os.open(os.devnull, os.O_WRONLY)
    if fd != 1:
        os.dup2(fd, 1)
        os.close(fd)
    sys.stdout = io.StringIO()
    return sys.stdout


def _print_help(page: str) -> int:
    """Print a page (help, the versions) as argparse prints help: to stderr when there is no stdout, and a page
    that cannot be written is no error (a closed pipe exits 141, as for every command)."""
    stream = sys.stdout or sys.stderr
    try:
        stream.write(page)
        stream.flush()
    except OSError as exc:
        if stream is sys.stdout:
            _silence_stdout()
        return 141 if isinstance(exc, BrokenPipeError) else 0
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (see the module docstring)."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments in (["--version"], ["--version", "--json"], ["--json", "--version"]):
        from ._version import version_json, version_text  # without building the parser

        return _print_help(version_json() if "--json" in arguments else version_text())
    if arguments in (["--help"], ["-h"]):
        from ._help_page import help_page  # the page shipped for the add-ons installed

        return _print_help(help_page())
    word = next((a for a in arguments if not a.startswith("-")), None)
    if word is not None and word not in CORE_COMMANDS and arguments[0] == word:
        code = _quick(word, arguments[1:])  # before the parser: exec's program waits on it
        if code is not None:
            return code
    from ._parser import build_parser

    # a core command's parser needs no add-on imported; any other word may be an add-on's command
    args = build_parser([] if word in CORE_COMMANDS else None).parse_args(arguments)
    prog = f"ortplug {args.command}"
    from ..settings import settings  # deferred: a parse error imports nothing of the core

    debug = settings().debug
    shown = warnings.showwarning
    if not debug:
        warnings.showwarning = _show_warning
    discarded = _discarded_stdout() if sys.stdout is None else None
    try:
        code = _command(args)(args)
        sys.stdout.flush()
        if discarded is not None and discarded.getvalue() and code == 0:
            print(f"{prog}: error: standard output is closed: the output was not written",
                  file=sys.stderr)  # fmt: skip
            return 1
        return code
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line per failure; ORTPLUG_DEBUG=1 shows the traceback
        if debug:
            raise
        message = _one_line(str(exc)) or type(exc).__name__
        print(f"{prog}: error: {message}", file=sys.stderr)
        from ._usage import UsageError

        return 2 if isinstance(exc, UsageError) else 1
    finally:
        warnings.showwarning = shown
        if discarded is not None:
            sys.stdout = None  # as it was given


if __name__ == "__main__":
    sys.exit(main())
