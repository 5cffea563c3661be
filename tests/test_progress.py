"""Progress bars (ortplug.progress): on a terminal's stderr where asked, nothing on a pipe.

Every command runs in a child process with its stderr on a real pseudo-terminal
(tests/terminal.py), or on a pipe, and stdout in a file: the bar's bytes are read as
written, and the terminal's last lines as a user sees them once the command is done.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ortplug.testing import demo_model
from terminal import run_on_terminal, screen
from variant_models import mlp_with_variants

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
VNNI = {"ORTPLUG_OVERRIDE_CPU_ISA_FLAGS": '["avx2", "avx512_vnni"]', "ORTPLUG_MEASURE": "0",
        "ORTPLUG_PLUGINS": "cpu"}  # fmt: skip


def _env(cache: Path, **extra: str) -> dict[str, str]:
    """The environment of a child: its own cache folder (each run starts from the same state)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORTPLUG_")}
    return {**env, "ORTPLUG_CACHE_DIR": str(cache), **extra}


def _on_pipe(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, capture_output=True, env=env, timeout=300, check=False)


def _untimed(out: bytes) -> bytes:
    return re.sub(rb", \d+ ms\)", b", ? ms)", out)


def test_screen_models_a_terminal() -> None:
    assert screen(b"a\r\nbar 1/2\rbar 2/2\r       \rdone\r\n") == ["a", "done"]
    assert screen(b"longer line\rshort") == ["shortr line"]


@pytest.fixture(scope="module")
def int8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLP with an int8 variant: two choices to verify on a CPU with int8 dot products."""
    return Path(mlp_with_variants(tmp_path_factory.mktemp("int8"), "int8").weights_path)


def test_verify_draws_a_bar_on_a_terminal_and_nothing_on_a_pipe(int8: Path, tmp_path) -> None:
    argv = [ORTPLUG, "verify", str(int8)]
    shown = run_on_terminal(argv, _env(tmp_path / "a", **VNNI))
    piped = _on_pipe(argv, _env(tmp_path / "b", **VNNI))
    hidden = run_on_terminal(argv, _env(tmp_path / "c", **VNNI, ORTPLUG_PROGRESS="0"))
    assert shown.returncode == piped.returncode == hidden.returncode == 0, shown.stderr
    # the output, byte for byte but for the verification's own duration ("..., 88 ms)")
    assert _untimed(shown.stdout) == _untimed(piped.stdout) == _untimed(hidden.stdout)
    assert b"variant int8 (int8) on [cpu]" in shown.stdout
    # the bar: drawn, rewritten in place, naming the choice it checks, cleared at the end
    assert b"verifying choices" in shown.stderr and b"\r" in shown.stderr
    assert b"variant int8 on [cpu]" in shown.stderr
    assert shown.shown == []
    assert piped.stderr == b"" and hidden.stderr == b""


def test_bench_draws_its_candidates_and_rounds_on_a_terminal_only(tmp_path) -> None:
    argv = [ORTPLUG, "bench", str(demo_model()), "--rounds", "2", "--calls", "5", "--json",
            "--providers", "cpu", "--threads", "1"]  # fmt: skip
    shown = run_on_terminal(argv, _env(tmp_path / "a"))
    piped = _on_pipe(argv, _env(tmp_path / "b"))
    assert shown.returncode == piped.returncode == 0, shown.stderr
    assert b"building candidates" in shown.stderr and b"timing candidates" in shown.stderr
    assert b"cpu / 1 threads" in shown.stderr
    assert shown.shown == [] and piped.stderr == b""
    ran, timed = json.loads(shown.stdout), json.loads(piped.stdout)
    assert [r["label"] for r in ran["rows"]] == [r["label"] for r in timed["rows"]]


def test_run_shows_the_build_verifying_its_choices_and_its_warnings_above(
    int8: Path, tmp_path
) -> None:
    argv = [ORTPLUG, "run", str(int8), "--repeat", "1"]
    shown = run_on_terminal(argv, _env(tmp_path / "a", **VNNI))
    assert shown.returncode == 0, shown.stderr
    assert f"verifying {int8}".encode() in shown.stderr  # the build's choices, on a bar
    assert b"variant int8 on [cpu]" in shown.stderr
    # the int8 variant fails here (generated calibration): its warning is one whole line,
    # written above the bar, and all that is left on the terminal
    (warning,) = shown.shown
    assert warning.startswith(f"ortplug: warning: {int8}: variant int8 (int8) on CPU")
    assert warning.endswith("; taking the next choice: the reference weights on [cpu]")


_SCRIPT = textwrap.dedent(
    """
    import os, sys, time, warnings
    from ortplug import LocalCheckpoint, OnnxBackend
    from ortplug.progress import progress, show_progress

    model = LocalCheckpoint(sys.argv[1]).resolve()
    OnnxBackend.from_checkpoint(model).close()  # a library call: silent unless asked
    print("tqdm imported:", "tqdm" in sys.modules, flush=True)
    sys.stderr.write("-- asked\\n")
    with show_progress():
        OnnxBackend.from_checkpoint(model).close()
        with progress("outer work", 2) as outer:
            outer.note("first part")
            with progress("inner work", 3) as inner:
                inner.advance()
            warnings.warn("a warning while the bar shows")
            log = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT)
            saved = os.dup(2)
            os.dup2(log, 2)  # what Ray's output does: descriptor 2 to a log file
            os.write(2, b"to the log\\n")
            time.sleep(0.2)  # tqdm redraws at most every 0.1 s
            outer.advance(2)
            os.dup2(saved, 2)
    sys.stderr.write("-- done\\n")
    """
)


def test_the_seam_draws_one_line_writes_warnings_above_it_and_keeps_its_terminal(
    int8: Path, tmp_path
) -> None:
    log = tmp_path / "fd2.log"
    env = _env(tmp_path / "cache", **VNNI)
    ran = run_on_terminal([sys.executable, "-c", _SCRIPT, str(int8), str(log)], env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == b"tqdm imported: False\n"  # nothing of tqdm without a bar
    before, asked = ran.stderr.split(b"-- asked", 1)
    # the library call drew nothing (its warning, the int8 variant failing, is a plain line)
    assert b"verifying" not in before and b"\r" not in before.replace(b"\r\n", b"")
    assert b"verifying" in asked  # the same build, asked: its choices on a bar
    # inner work shows on the outer bar's line, after the outer's note
    assert b"outer work" in asked and b"first part; inner work 1/3" in asked
    assert b"inner work:" not in asked  # no bar of its own
    # the warning is a whole line above the bar; the bar went on while fd 2 was a log file
    lines = ran.shown
    assert any(line.endswith("UserWarning: a warning while the bar shows") for line in lines)
    assert b"2/2" in asked.split(b"UserWarning", 1)[1]
    assert log.read_bytes() == b"to the log\n"
    assert lines[-1] == "-- done" and all("outer work" not in line for line in lines)
