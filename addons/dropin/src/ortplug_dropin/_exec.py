"""``ortplug exec -- COMMAND ...``: run a program with ``onnxruntime.InferenceSession`` patched.

The program is started in place of this process (``exec``: same process id, so signals
and the exit code are the program's own) with a start-up hook folder first on
``PYTHONPATH``; every Python it starts, and their children, patch ONNX Runtime when
they import it. Nothing is installed.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

from ._variants import VARIANTS_VARIABLE

# Imports kept to what the program's start waits on (pathlib, subprocess and typing cost
# ~35 ms together): the rest only where needed.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["exec_program", "quick", "quick_arguments"]

#: The folder whose ``sitecustomize`` patches ONNX Runtime at the program's start-up.
HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_startup")


def quick_arguments(arguments: Sequence[str]) -> SimpleNamespace | None:
    """``exec``'s arguments read without argparse (building the parser costs ~20 ms of a
    program's start); ``None`` for anything but ``[--takeover RULE] [--report]
    [--allow-variants] [--] COMMAND...``, which the parser then reads (its errors, its help)."""
    from .patching import TAKEOVER_RULES

    takeover, report, variants, rest = "cpu", False, False, list(arguments)
    while rest and rest[0].startswith("-") and rest[0] != "--":
        flag = rest.pop(0)
        if flag == "--report":
            report = True
        elif flag == "--allow-variants":
            variants = True
        elif flag.startswith("--takeover=") and flag.split("=", 1)[1] in TAKEOVER_RULES:
            takeover = flag.split("=", 1)[1]
        elif flag == "--takeover" and rest and rest[0] in TAKEOVER_RULES:
            takeover = rest.pop(0)
        else:
            return None
    if not rest or rest == ["--"]:
        return None
    return SimpleNamespace(takeover=takeover, report=report, allow_variants=variants, program=rest)


def quick(arguments: Sequence[str]) -> int | None:
    """``ortplug exec`` from its raw arguments when they are the usual ones (``None``: the core
    parses them); the core runs it before anything else (entry-point group ``ortplug.quick``)."""
    parsed = quick_arguments(arguments)
    return None if parsed is None else exec_program(parsed)


def exec_program(args: argparse.Namespace | SimpleNamespace) -> int:
    """Replace this process with the program (on Windows, run it and return its exit code)."""
    command = list(args.program)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        from ortplug.cli.arguments import UsageError

        raise UsageError("expected a command after --, e.g. ortplug exec -- python app.py")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (HOOK_DIR, env.get("PYTHONPATH"))))
    env["ORTPLUG_EXEC_TAKEOVER"] = args.takeover
    if args.allow_variants:
        env[VARIANTS_VARIABLE] = "1"
    if args.report:
        env["ORTPLUG_EXEC_REPORT"] = str(os.getpid())
    else:
        env.pop("ORTPLUG_EXEC_REPORT", None)
    if args.report:
        _say_if_not_python(command[0], env)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        if os.name == "nt":  # no exec there: a child, whose exit code is passed on
            import subprocess

            return subprocess.call(command, env=env)
        _replace_with(command, env)
    except FileNotFoundError:  # its text names the last PATH entry tried, as bytes
        where = "no such file" if os.sep in command[0] else "not on PATH"
        print(f"ortplug exec: error: command not found: {command[0]} ({where})", file=sys.stderr)
        return 127  # what a shell answers for a command it cannot find
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        print(f"ortplug exec: error: cannot run {command[0]}: {reason}", file=sys.stderr)
        return 126
    raise AssertionError("unreachable: exec returns only by raising")  # pragma: no cover


def _replace_with(command: list[str], env: dict[str, str]) -> None:
    """``execvp`` as a shell runs a command: a file the system cannot execute (a script
    without ``#!``) is run by ``/bin/sh``."""
    import errno

    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        path = _program_path(command[0], env)
        if exc.errno != errno.ENOEXEC or path is None:
            raise
    os.execve("/bin/sh", ["/bin/sh", path, *command[1:]], env)


def _program_path(name: str, env: dict[str, str]) -> str | None:
    """The file ``exec`` runs for ``name``: itself when it holds a ``/``, else the first
    executable of that name on the program's ``PATH`` (``None``: there is none)."""
    import shutil

    if os.sep in name:
        return name
    return shutil.which(name, path=env.get("PATH", os.defpath))


def _say_if_not_python(name: str, env: dict[str, str]) -> None:
    """``--report`` is said at the exit of a Python program: of another, say now that it says
    nothing (a Python interpreter, or a script whose ``#!`` runs one, is Python)."""
    path = _program_path(name, env)
    if path is None or not os.path.isfile(path) or not os.access(path, os.X_OK):
        return  # exec says why it cannot run it
    if os.path.basename(path).rstrip("0123456789.") in ("python", "pypy"):
        return
    try:
        with open(path, "rb") as program:
            head = program.read(512).split(b"\n")[:2]  # pip's long-path form: exec on line 2
    except OSError:
        return  # exec says why it cannot run it
    if head[0].startswith(b"#!") and any(b"python" in line for line in head):
        return
    sys.stderr.write(
        f"ortplug exec: --report: {name} is not a Python program: it is not patched and builds "
        "no ONNX Runtime session of ortplug's; Python programs it starts are, and report theirs\n"
    )
