"""``ortplug bench --callers`` and a first throughput build on a terminal: bars on stderr, not on a pipe.

The command runs in a child process with stderr on a pseudo-terminal
(``tests/terminal.py``) or on a pipe; the bars are the core's (``ortplug.progress``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ortplug.testing import demo_model
from terminal import run_on_terminal

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORTPLUG_")}
    return {**env, "ORTPLUG_CACHE_DIR": str(cache), "ORTPLUG_PLUGINS": "cpu"}


def test_bench_callers_draws_the_measuring_and_the_rounds_on_a_terminal_only(tmp_path) -> None:
    argv = [ORTPLUG, "bench", str(demo_model()), "--callers", "1,2", "--seconds", "0.05",
            "--rounds", "1", "--hint", "throughput", "--json"]  # fmt: skip
    shown = run_on_terminal(argv, _env(tmp_path / "a"))  # each a first throughput build
    piped = subprocess.run(argv, capture_output=True, env=_env(tmp_path / "b"), timeout=300)
    assert shown.returncode == piped.returncode == 0, shown.stderr
    # the first build measures its layouts, each slice noted; then each side at each count
    assert b"measuring serving layouts" in shown.stderr and b"stream" in shown.stderr
    assert b"serving callers" in shown.stderr and b"ortplug at 2 callers" in shown.stderr
    assert shown.shown == []  # cleared once done
    assert piped.stderr == b""  # nothing on a pipe
    ran, timed = json.loads(shown.stdout), json.loads(piped.stdout)
    assert [r["callers"] for r in ran["rows"]] == [r["callers"] for r in timed["rows"]] == [1, 2]
    measured = [r["serving"]["source"].split(" (")[0] for r in (ran, timed)]  # less its seconds
    assert measured[0] == measured[1] and measured[0].startswith("measured on")
