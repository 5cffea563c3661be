"""Libraries that build their own ONNX Runtime sessions, unchanged, under ``ortplug exec`` and
``ortplug.patch()``: the same outputs as without ortplug, every session listed with its chain.

magika hard-codes ``providers=["CPUExecutionProvider"]``, nudenet leaves ``providers=None``,
rapidocr-onnxruntime imports the class by name and passes a CPU ``(name, options)`` tuple and its
own ``SessionOptions``, faster-whisper's Silero VAD a CPU list and its own ``SessionOptions``.
All ship their models in their wheels (nothing is downloaded); requirements-test.txt installs
all but nudenet, so a missing one fails here.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: nudenet is optional (requirements-test.txt leaves it out: its opencv-python-headless and
#: rapidocr's opencv-python are two wheels of one cv2 module).
NUDENET = importlib.util.find_spec("nudenet") is not None

APP = Path(__file__).with_name("dropin_app.py")
# Patched after the libraries imported ONNX Runtime's class (rapidocr holds it by name).
PATCHED = (
    "import runpy, sys, magika, rapidocr_onnxruntime, faster_whisper.vad, ortplug; "
    "current = ortplug.patch(); "
    f"runpy.run_path({str(APP)!r}, run_name='__main__'); "
    "[print('ortplug: session ' + r.line(), file=sys.stderr) for r in current.sessions]"
)


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ORTPLUG_PLUGINS": "cpu"}  # the same chain on every host
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def plain() -> str:
    return _run(sys.executable, str(APP)).stdout


def _sessions(stderr: str) -> dict[str, str]:
    """``{model file name: the rest of its report line}``."""
    lines = [line.removeprefix("ortplug: session ") for line in stderr.splitlines()]
    return {Path(line.split(": ")[0]).name: line for line in lines if line.endswith(")")}


def _check(sessions: dict[str, str]) -> None:
    expected = [
        *(["320n.onnx"] if NUDENET else []),
        "ch_PP-OCRv4_det_infer.onnx",
        "ch_PP-OCRv4_rec_infer.onnx",
        "ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "model.onnx",
        "silero_vad_v6.onnx",
    ]
    assert sorted(sessions) == expected
    for line in sessions.values():
        assert ": CPUExecutionProvider (" in line
    if NUDENET:
        assert "providers=None: ortplug's policy" in sessions["320n.onnx"]
    assert "taken over (takeover='cpu')" in sessions["model.onnx"]
    assert "taken over (takeover='cpu')" in sessions["ch_PP-OCRv4_rec_infer.onnx"]
    assert "taken over (takeover='cpu')" in sessions["silero_vad_v6.onnx"]


def test_under_exec_outputs_equal_and_sessions_listed(plain):
    done = _run(
        sys.executable, "-m", "ortplug.cli.main", "exec", "--report", "--", sys.executable, str(APP)
    )
    assert done.stdout == plain
    _check(_sessions(done.stderr))


def test_under_patch_outputs_equal_and_sessions_listed(plain):
    done = _run(sys.executable, "-c", PATCHED)
    assert done.stdout == plain
    _check(_sessions(done.stderr))
