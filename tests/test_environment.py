"""ortplug.configure: process-wide settings, once per process (each test is its own process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


def test_global_pools_serve_sessions_that_opt_out_of_their_own() -> None:
    done = _python(
        """
        import numpy as np, ortplug
        from ortplug import InMemoryCheckpoint, OnnxBackend, SessionOptionsConfig
        from importlib.resources import files
        ortplug.configure(log_severity_level=3, global_intra_op_num_threads=2, global_inter_op_num_threads=1)
        ortplug.configure(global_intra_op_num_threads=2, global_inter_op_num_threads=1)  # same: no-op
        data = (files("ortplug.data") / "demo.onnx").read_bytes()
        options = SessionOptionsConfig(use_per_session_threads=False)
        backend = OnnxBackend.from_checkpoint(InMemoryCheckpoint(data).resolve(), session_options=options)
        print(backend.run({"x": np.ones((1, 8), np.float32)})["probs"].shape)
        try:
            ortplug.configure(global_intra_op_num_threads=4)
        except RuntimeError as exc:
            print("second:", exc)
        """
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "(1, 3)"
    assert lines[1].startswith(
        "second: ONNX Runtime's global thread pools already exist with intra=2, inter=1"
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("log_severity_level=9", "log_severity_level: expected 0 (verbose) to 4 (fatal), got 9"),
        (
            "global_intra_op_num_threads=-1",
            "global_intra_op_num_threads: expected a thread count from 0 to",
        ),
    ],
)
def test_bad_settings_are_named(call: str, message: str) -> None:
    done = _python(
        f"import ortplug\ntry:\n    ortplug.configure({call})\nexcept ValueError as exc:\n    print(exc)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(message)
