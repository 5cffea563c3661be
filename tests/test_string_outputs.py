"""String outputs never crash the process (issue 37, T7): ONNX Runtime's IO binding refuses a bound
string input and corrupts memory copying a bound string output out, so the verifier's bound-run
check leaves them out and ``Binding`` refuses them in one line. Each case runs in a child process:
a segfault fails its test instead of killing pytest."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import models
import numpy as np
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend, OptionError
from variant_models import with_variant

_TESTS = str(Path(__file__).parent)
_VERIFY_VARIANT = ("--providers", "cpu", "--variant", "fp32", "--json")


def _child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (_TESTS, os.environ.get("PYTHONPATH")))),
        "PYTHONFAULTHANDLER": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def test_a_string_classifier_with_an_identical_variant_verifies_and_serves(tmp_path) -> None:
    path = with_variant(
        tmp_path, models.string_argmax_classifier(), models.string_argmax_classifier(), "fp32"
    )
    done = _child(
        """
        import sys, numpy as np
        from ortplug import LocalCheckpoint, OnnxBackend
        from ortplug.checkpoint import select_variant
        checkpoint = LocalCheckpoint(sys.argv[1]).resolve()
        chosen = select_variant(checkpoint, "fp32")
        backend = OnnxBackend.from_checkpoint(chosen, providers=["cpu"], verify=True)
        verdict = backend.report.verification
        print("verified", verdict.passed, verdict.variant)
        x = np.array([[1, 0, 0, 0], [0, 0, 0, 1]], np.float32)
        print("labels", list(backend.run({"x": x})["label"]))
        """,
        str(path),
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    lines = done.stdout.splitlines()
    assert lines[0] == "verified True fp32"
    labels = OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(models.string_argmax_classifier()).resolve(), providers=["cpu"]
    ).run({"x": np.array([[1, 0, 0, 0], [0, 0, 0, 1]], np.float32)})["label"]
    assert lines[1] == f"labels {list(labels)}"


def test_ortplug_verify_of_a_string_classifier_with_a_variant_does_not_crash(tmp_path) -> None:
    path = with_variant(
        tmp_path, models.string_argmax_classifier(), models.string_argmax_classifier(), "fp32"
    )
    done = subprocess.run(
        [sys.executable, "-m", "ortplug.cli.main", "verify", str(path), *_VERIFY_VARIANT],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "ORTPLUG_MEASURE": "0", "PYTHONFAULTHANDLER": "1"},
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert "fp32" in done.stdout and '"passed": true' in done.stdout


def test_binding_a_string_output_is_one_line_naming_it_not_a_crash() -> None:
    done = _child(
        """
        import models, numpy as np
        from ortplug import InMemoryCheckpoint, OnnxBackend
        checkpoint = InMemoryCheckpoint(models.string_argmax_classifier()).resolve()
        backend = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"])
        binding = backend.bind().bind_input("x", np.ones((2, 4), np.float32))
        try:
            binding.bind_output("label")
        except Exception as exc:
            print(type(exc).__name__, exc)
        binding.bind_output("scores").run()
        print(binding.outputs()["scores"].shape)
        """
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert done.stdout.splitlines() == [
        "OptionError bind_output: 'label' is tensor(string), which ONNX Runtime's IO binding "
        "cannot hold; run it with backend.run() instead",
        "(2, 3)",
    ]


def test_a_string_input_is_refused_by_binding_and_run_into_writes_no_string_output() -> None:
    from onnx import TensorProto, helper

    echo = models.graph_model(
        [helper.make_node("Identity", ["s"], ["t"])],
        [helper.make_tensor_value_info("s", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info("t", TensorProto.STRING, ["n"])],
    )
    backend = OnnxBackend.from_checkpoint(InMemoryCheckpoint(echo).resolve(), providers=["cpu"])
    words = np.array(["a", "bb"], dtype=object)
    with pytest.raises(OptionError, match=r"^bind_input: 's' is tensor\(string\), which ONNX"):
        backend.bind().bind_input("s", words)
    with pytest.raises(OptionError, match=r"output 't' is tensor\(string\); run_into writes"):
        backend.run_into({"s": words}, {"t": np.empty(2, dtype=object)})
    assert list(backend.run({"s": words})["t"]) == ["a", "bb"]
