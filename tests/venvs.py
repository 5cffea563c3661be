"""Fresh virtual environments for the install tests: made with what they are given, and the
Python and pip inside them (what users do, with nothing else in the environment)."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from collections.abc import Sequence
from pathlib import Path

#: The repository's root, whose folders (core/, plugins/*, addons/*) are installed from.
ROOT = Path(__file__).resolve().parents[1]


def python_in(root: Path) -> str:
    """The interpreter of the venv at ``root``."""
    return str(root / ("Scripts" if sys.platform == "win32" else "bin") / "python")


def pip_in(root: Path, *args: str) -> None:
    """``pip ARGS`` in the venv at ``root`` (a failure raises, with pip's output)."""
    subprocess.run(
        [python_in(root), "-m", "pip", *args], check=True, capture_output=True, timeout=600
    )


def fresh_venv(root: Path, *requirements: str) -> Path:
    """A new venv at ``root`` with ``requirements`` installed (none: pip alone); ``root``."""
    venv.EnvBuilder(with_pip=True).create(root)
    if requirements:
        pip_in(root, "install", "--quiet", *requirements)
    return root


#: Prints, as JSON, the message of each name (argv[2:]) that module argv[1] refuses.
_REFUSED = (
    "import importlib, json, sys\n"
    "from ortplug.errors import AddonNotInstalledError\n"
    "module = importlib.import_module(sys.argv[1])\n"
    "said = []\n"
    "for name in sys.argv[2:]:\n"
    "    try:\n"
    "        getattr(module, name)\n"
    "    except AddonNotInstalledError as exc:\n"
    "        said.append(str(exc))\n"
    "print(json.dumps(said))\n"
)


def refused_names(python: str, module: str, names: Sequence[str]) -> list[str]:
    """The one-line errors ``module``'s ``names`` raise under ``python`` (its add-on missing)."""
    done = subprocess.run(
        [python, "-c", _REFUSED, module, *names], capture_output=True, text=True, check=True
    )
    return list(json.loads(done.stdout))
