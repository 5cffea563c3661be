"""``ortplug batch`` on a terminal: the rows on a bar on stderr (local and ``--ray``), not on a pipe.

The command runs in a child process with stderr on a pseudo-terminal
(``tests/terminal.py``); with ``--ray`` the bar stays on the terminal while Ray's own
output goes to its log file (descriptor 2 pointed there), which is removed after a run that worked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from ortplug.testing import demo_model
from terminal import run_on_terminal

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_batch_draws_its_rows_on_a_terminal_and_nothing_on_a_pipe(tmp_path, engine) -> None:
    source = tmp_path / "in"
    source.mkdir()
    np.save(source / "x.npy", np.random.default_rng(0).standard_normal((300, 8), np.float32))
    env = {**os.environ, "ORTPLUG_PLUGINS": "cpu", "RAY_ADDRESS": "local"}
    flags = ["--ray"] if engine == "ray" else []

    def argv(out: str) -> list[str]:
        return [ORTPLUG, "batch", str(demo_model()), "--input-dir", str(source), "--output-dir",
                str(tmp_path / out), "--batch-size", "64", *flags]  # fmt: skip

    logs = set(Path(tempfile.gettempdir()).glob("ortplug-batch-ray-*.log"))
    shown = run_on_terminal(argv("a"), env)
    piped = subprocess.run(argv("b"), capture_output=True, env=env, timeout=300, text=True)
    assert shown.returncode == piped.returncode == 0, shown.stderr[-2000:]
    title = b"batch on Ray" if engine == "ray" else b"batch:"
    assert title in shown.stderr and b"/300" in shown.stderr
    assert shown.shown == []  # cleared once done: nothing else reached the terminal
    assert piped.stderr == ""
    assert shown.stdout.decode().replace(str(tmp_path / "a"), "OUT") == piped.stdout.replace(
        str(tmp_path / "b"), "OUT"
    )
    np.testing.assert_array_equal(
        np.load(tmp_path / "a/probs.npy"), np.load(tmp_path / "b/probs.npy")
    )
    assert set(Path(tempfile.gettempdir()).glob("ortplug-batch-ray-*.log")) <= logs
