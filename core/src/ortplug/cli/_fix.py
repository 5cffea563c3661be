"""``ortplug doctor --fix [--yes]``: the pip commands that make this environment fit the host, a dry
run unless ``--yes``; an environment it cannot write, or one PEP 668 marks, is refused."""

from __future__ import annotations

import argparse
import configparser
import importlib
import os
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..fit.catalog import refused_declarations
from ..fit.planner import FitPlan, check_host
from ..printable import printable
from ._json import print_json
from ._usage import UsageError

__all__ = ["externally_managed", "fix", "pip_command", "unwritable"]

#: The findings the commands of ``--fix`` act on.
_FIXED = ("missing", "runtime")
#: Keeps the working directory off pip's ``sys.path`` (``python -m`` puts it first, so a
#: ``pip/`` folder there would run instead): ``-P`` on 3.11+, else isolated mode, which also
#: ignores ``PYTHON*`` variables and the user site but still finds this environment's pip.
_SAFE_PATH = "-P" if sys.version_info >= (3, 11) else "-I"


def pip_command(step: Sequence[str]) -> list[str]:
    """A plan step as run: this interpreter's pip, never one of the working directory; an
    install never falls back to ``--user``."""
    verb, *rest = step
    no_user = ["--no-user"] if verb == "install" else []
    return [sys.executable, _SAFE_PATH, "-m", "pip", verb, *no_user, *rest]


def externally_managed(stdlib: str | None = None, in_venv: bool | None = None) -> str | None:
    """Why pip must not change this interpreter's packages (PEP 668's ``EXTERNALLY-MANAGED``
    marker, outside a virtual environment), or ``None``."""
    venv = sys.prefix != sys.base_prefix if in_venv is None else in_venv
    marker = Path(stdlib or sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
    if venv or not marker.is_file():
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(marker, encoding="utf-8")
        reason = parser.get("externally-managed", "Error", fallback="")
    except (configparser.Error, UnicodeDecodeError):
        reason = ""
    said = " ".join(reason.split()) or "its distributor manages it"
    return f"{sys.executable} is an externally managed environment ({marker}): {said}"


def unwritable() -> str | None:
    """Why pip could not write this environment's packages folder, or ``None``."""
    folder = sysconfig.get_path("purelib")
    if os.access(folder, os.W_OK):
        return None
    return (
        f"{folder} (the packages of {sys.executable}) is not writable by this user; run "
        "ortplug as the environment's owner, or make a virtual environment of your own"
    )


def _refusal() -> str | None:
    why = externally_managed() or unwritable()
    if why is None:
        return None
    return f"{why}; nothing was changed (python3 -m venv .venv, then run .venv/bin/ortplug there)"


def _changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """What pip changed: ``+ name version``, ``- name version``, ``~ name old -> new``."""
    lines = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old is None:
            lines.append(f"+ {name} {new}")
        elif new is None:
            lines.append(f"- {name} {old}")
        elif old != new:
            lines.append(f"~ {name} {old} -> {new}")
    return lines


def _report(plan: FitPlan) -> list[str]:
    """The hardware, then each finding: ``ok``, ``fix`` (the commands below do it) or ``note``
    (theirs to decide: an optional plugin, one installed for absent hardware, the driver);
    printable, as they quote declarations."""
    lines = [f"hardware  {plan.hardware.describe()}"]
    for f in plan.findings:
        if f.kind in _FIXED:  # the commands listed after the findings do it
            lines.append(f"{'fix':<9} {f.detail}")
        else:
            lines.append(f"{'ok' if f.ok and f.kind == 'fits' else 'note':<9} {f.line()}")
    return [printable(line) for line in lines]


def _run(commands: Sequence[Sequence[str]], quiet_stdout: bool) -> None:
    """Run each command; the first that fails stops the run with an error naming it."""
    for command in commands:
        shown = printable(f"$ {shlex.join(command)}")
        print(shown, file=sys.stderr if quiet_stdout else sys.stdout, flush=True)
        done = subprocess.run(command, stdout=sys.stderr if quiet_stdout else None, check=False)
        if done.returncode != 0:
            raise RuntimeError(
                f"pip exited {done.returncode} on: {shlex.join(command)}; the environment is as "
                "pip left it (its output is above); nothing after that command ran"
            )


def fix(args: argparse.Namespace) -> int:
    """Print (or with ``--yes`` run) the commands that make this environment fit the host."""
    if args.yes and not args.fix:
        raise UsageError("--yes: only with --fix (ortplug doctor --fix --yes)")
    plan = check_host()
    refused = refused_declarations()
    commands = [pip_command(step) for step in plan.steps]
    refusal = _refusal() if commands else None
    if refusal and args.yes:
        raise RuntimeError(refusal)
    data: dict[str, object] = {
        "plan": plan.to_dict(),
        "commands": [shlex.join(c) for c in commands],
        "refused_declarations": refused,
    }
    if not args.json:
        print("\n".join(_report(plan)))
        for line in refused:
            print(printable(f"{'note':<9} {line}"))
        if not commands:
            print("nothing to do: this environment has what this host's hardware calls for")
        for command in commands if not args.yes else ():
            print(printable(shlex.join(command)))
        if refusal:
            print(f"note: --yes would refuse: {refusal}")
        elif commands and sys.prefix == sys.base_prefix:
            print(f"note: not a virtual environment: these change {sys.prefix}'s packages")
        if commands and not args.yes:
            print("dry run: nothing was changed; run ortplug doctor --fix --yes to run these")
    if not (args.yes and commands):
        if args.json:
            print_json(data)
        return 0 if not commands else 1
    _run(commands, quiet_stdout=args.json)
    importlib.invalidate_caches()
    after_plan = check_host()
    changed = _changes(plan.installed.distributions, after_plan.installed.distributions)
    data.update(ran=True, changed=changed, after=after_plan.to_dict())
    if args.json:
        print_json(data)
    else:
        print("changed   " + ("; ".join(changed) or "no distribution's version (files repaired)"))
        for line in _report(after_plan)[1:]:
            print(line)
        print("the environment now fits this host" if not after_plan.steps else
              "still to do: run ortplug doctor --fix again")  # fmt: skip
    return 0 if not after_plan.steps else 1
