"""stderr is ONNX Runtime's, or ortplug's one line (issue 31, items 11-13).

Under the drop-in a program's stderr is what ONNX Runtime's own class writes (its severity, its
build and run warnings, its exception); outside it, ONNX Runtime's raw log reaches stderr only
with ``ORTPLUG_DEBUG=1``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# -- 13. ONNX Runtime's exception, without ortplug's ----------------------------------------------


def test_exec_raises_onnxruntimes_error_without_ortplugs(tmp_path: Path) -> None:
    code = f"import onnxruntime as ort; ort.InferenceSession({str(tmp_path / 'missing.onnx')!r})"
    command = (sys.executable, "-c", code)
    plain = subprocess.run(command, capture_output=True, text=True, check=False)
    patched = subprocess.run(
        [sys.executable, "-m", "ortplug.cli.main", "exec", "--", *command],
        capture_output=True,
        text=True,
        check=False,
    )
    assert plain.returncode == patched.returncode == 1
    plain_lines, patched_lines = plain.stderr.splitlines(), patched.stderr.splitlines()
    assert patched_lines[-1] == plain_lines[-1]  # NoSuchFile: ... missing.onnx ...
    assert "NO_SUCHFILE" in plain_lines[-1]
    assert "During handling" not in patched.stderr and "MissingFileError" not in patched.stderr
    # one frame more than ONNX Runtime's: the drop-in's __init__, which raises it
    ortplug_frames = [line for line in patched_lines if "ortplug" in line and "File " in line]
    assert len(ortplug_frames) == 1, patched.stderr
    assert len(patched_lines) == len(plain_lines) + 2, patched.stderr
