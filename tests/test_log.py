"""ortplug's log lines reach a configured ``logging``; a program that uses none pays no import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_BUILD = """\
import sys
CONFIGURE
import numpy as np
from ortplug import LocalCheckpoint, OnnxBackend
from ortplug.testing import demo_model
backend = OnnxBackend.from_checkpoint(LocalCheckpoint(demo_model()).resolve())
backend.run({"x": np.zeros((1, 8), np.float32)})
print("logging" in sys.modules)
"""


def _build(configure: str, cache: Path) -> subprocess.CompletedProcess[str]:
    code = _BUILD.replace("CONFIGURE", configure)
    return subprocess.run(
        [sys.executable, "-c", code],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("ORTPLUG_OVERRIDE_")},
            "ORTPLUG_CACHE_DIR": str(cache),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )


def test_a_build_imports_no_logging_when_the_program_uses_none(tmp_path: Path) -> None:
    _build("", tmp_path)  # the probes run and their facts are cached
    assert _build("", tmp_path).stdout.split()[-1] == "False"


def test_a_configured_logging_gets_the_build_lines(tmp_path: Path) -> None:
    done = _build("import logging; logging.basicConfig(level=logging.INFO)", tmp_path)
    assert "INFO:ortplug:session for" in done.stderr
