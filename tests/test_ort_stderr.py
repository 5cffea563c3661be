"""stderr is ONNX Runtime's, or ortplug's one line (issue 31, items 11-13).

Under the drop-in a program's stderr is what ONNX Runtime's own class writes (its severity, its
build and run warnings, its exception); outside it, ONNX Runtime's raw log reaches stderr only
with ``ORTPLUG_DEBUG=1``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import models
import numpy as np
import ortplug
import pytest
from ortplug import InMemoryCheckpoint, InputValidationError, OnnxBackend

#: A program building its own session of ``models.log_model`` and running it once: argv[1] the
#: model, argv[2] the default logger severity it sets (or "default"), argv[3] "patch" to call
#: ``ortplug.patch()`` after setting it (ONNX Runtime imported and its logger set before).
_PROGRAM = """\
import sys
import numpy as np
import ortplug
import onnxruntime as ort
if sys.argv[2] != "default":
    ort.set_default_logger_severity(int(sys.argv[2]))
if sys.argv[3] == "patch":
    import ortplug
    ortplug.patch()
session = ort.InferenceSession(sys.argv[1])
session.run(None, {"x": np.ones((1, 4), np.float32)})
print(type(session).__module__)
"""

_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ ")


def _run(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    return done


def _exec(*command: str) -> subprocess.CompletedProcess[str]:
    return _run(sys.executable, "-m", "ortplug.cli.main", "exec", "--", *command)


def _without_timestamps(stderr: str) -> str:
    return _TIMESTAMP.sub("", stderr)


@pytest.fixture
def log_model(tmp_path: Path) -> str:
    return str(models.write(tmp_path, "log.onnx", models.log_model()))


@pytest.fixture
def program(tmp_path: Path) -> str:
    path = tmp_path / "program.py"
    path.write_text(_PROGRAM)
    return str(path)


# -- 11. under the drop-in, ONNX Runtime's log is as its own class writes it ---------------------


@pytest.mark.parametrize("severity", ["default", "3"])
def test_exec_leaves_onnxruntimes_log_as_the_program_set_it(program, log_model, severity) -> None:
    plain = _run(sys.executable, program, log_model, severity, "-")
    patched = _exec(sys.executable, program, log_model, severity, "-")
    assert patched.stdout == "ortplug_dropin._session\n"  # ortplug built the session
    if severity == "default":  # the build's warning and the run's, as ONNX Runtime writes them
        assert all(line in plain.stderr for line in models.LOG_MODEL_LINES), plain.stderr
    else:  # errors only: nothing
        assert plain.stderr == ""
    assert _without_timestamps(patched.stderr) == _without_timestamps(plain.stderr)


@pytest.mark.parametrize("severity", ["default", "3"])
def test_patch_after_the_program_set_its_logger_leaves_it(program, log_model, severity) -> None:
    plain = _run(sys.executable, program, log_model, severity, "-")
    patched = _run(sys.executable, program, log_model, severity, "patch")
    assert patched.stdout == "ortplug_dropin._session\n"
    assert _without_timestamps(patched.stderr) == _without_timestamps(plain.stderr)


# -- 12. outside it, ONNX Runtime's raw log shows only with ORTPLUG_DEBUG=1 -----------------------


def test_ortplug_run_writes_no_onnxruntime_log_unless_debugging(log_model) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ORTPLUG_DEBUG"}
    command = (sys.executable, "-m", "ortplug.cli.main", "run", log_model)
    quiet = _run(*command, env=env)
    assert "latency" in quiet.stdout
    assert quiet.stderr == ""
    debugging = _run(*command, env={**env, "ORTPLUG_DEBUG": "1"})
    assert all(line in debugging.stderr for line in models.LOG_MODEL_LINES), debugging.stderr


def test_a_backends_build_and_runs_write_no_onnxruntime_log(
    plugin_host, capfd, monkeypatch
) -> None:
    monkeypatch.delenv("ORTPLUG_DEBUG", raising=False)
    checkpoint = InMemoryCheckpoint(models.log_model()).resolve()
    backend = OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)
    backend.run({"x": np.ones((1, 4), np.float32)})  # ONNX Runtime warns: y is declared [2, 4]
    with pytest.raises(InputValidationError, match="input 'x'") as raised:
        backend.run({"x": None})  # ONNX Runtime logs an error, then raises it
    assert "ONNXRuntimeError" in str(raised.value.__cause__)  # ortplug's error carries ORT's
    assert capfd.readouterr().err == ""


def test_debugging_shows_onnxruntimes_log_of_a_backend(plugin_host, capfd, monkeypatch) -> None:
    monkeypatch.setenv("ORTPLUG_DEBUG", "1")
    checkpoint = InMemoryCheckpoint(models.log_model()).resolve()
    backend = OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)
    assert any(models.UNUSED_INITIALIZER_LINE in m for m in backend.build_messages)
    backend.run({"x": np.ones((1, 4), np.float32)})
    stderr = capfd.readouterr().err
    assert all(line in stderr for line in models.LOG_MODEL_LINES), stderr


# -- 13. ONNX Runtime's exception, without ortplug's ----------------------------------------------

#: The installed ortplug package's folder: its frames are those whose file is under it.
_ORTPLUG = Path(ortplug.__file__).resolve().parent
_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+')


def _frames_in(package: Path, lines: list[str]) -> list[str]:
    """The traceback lines of frames whose file is in ``package`` (not every line that says
    "ortplug": a checkout or venv whose path has the word, ONNX Runtime's frames under it too)."""
    found = []
    for line in lines:
        match = _FRAME.match(line)
        if match and Path(match.group(1)).resolve().is_relative_to(package):
            found.append(line)
    return found


def test_only_ortplugs_own_frames_are_counted(tmp_path: Path) -> None:
    """Regression (issue 37): ``.ci/run`` failed in a checkout whose path has "ortplug" in it:
    the count took ONNX Runtime's own frames under its venv for ortplug's."""
    venv = tmp_path / "ortplug-checkout" / ".venv" / "onnxruntime" / "capi" / "session.py"
    lines = [
        f'  File "{_ORTPLUG / "dropin" / "_session.py"}", line 40, in __init__',
        f'  File "{venv}", line 485, in __init__',
        "    self._create_inference_session(providers, provider_options, disabled_optimizers)",
        f"onnxruntime...NoSuchFile: [ONNXRuntimeError] : 3 : NO_SUCHFILE : {tmp_path}/ortplug.onnx",
    ]
    assert _frames_in(_ORTPLUG, lines) == lines[:1]


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
    import ortplug_dropin

    dropin = Path(ortplug_dropin.__file__).resolve().parent
    assert len(_frames_in(dropin, patched_lines)) == 1, patched.stderr
    assert not _frames_in(_ORTPLUG, patched_lines), patched.stderr
    assert len(patched_lines) == len(plain_lines) + 2, patched.stderr
