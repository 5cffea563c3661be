"""``ortplug variants``: what it writes, what it refuses and says, and the verdict of each variant
it wrote (moved with the command from the core's ``test_verify``, ``test_cli_hardening`` and
``test_cli_snags``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import models
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from terminal import run_on_terminal, screen
from variant_models import mlp_model

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"


def _child_env(cache: Path) -> dict[str, str]:
    """A child's environment: its own cache folder, no ORTPLUG_ setting of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORTPLUG_")}
    return {**env, "ORTPLUG_CACHE_DIR": str(cache)}


def _untimed(out: bytes) -> bytes:
    return re.sub(rb", \d+ ms\)", b", ? ms)", out)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "ORTPLUG_PLUGINS": "cpu"}
    return subprocess.run(
        [ORTPLUG, *args], capture_output=True, text=True, env=environment, timeout=300
    )


def _one_error(done: subprocess.CompletedProcess[str], code: int, prefix: str) -> str:
    """The one stderr line of a failed command, checked for its exit code and prefix."""
    lines = done.stderr.strip().splitlines()
    assert (done.returncode, len(lines)) == (code, 1), done.stderr
    assert lines[0].startswith(prefix), lines[0]
    assert "Traceback" not in done.stderr
    return lines[0]


def _cancelling_model() -> bytes:
    """y = x @ w1 - x @ w2, w2 within 1e-3 of w1: int8 and fp16 errors of each product dwarf
    their difference (as real models whose int8 variant verification rejects)."""
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((64, 10)).astype(np.float32)
    w2 = (w1 + 1e-3 * rng.standard_normal((64, 10))).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["a"]),
            helper.make_node("MatMul", ["x", "w2"], ["b"]),
            helper.make_node("Sub", ["a", "b"], ["y"]),
        ],
        "cancel",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_ortplug_variants_verifies_what_it_wrote_and_says_what_calibration_ran_on(
    tmp_path: Path,
) -> None:
    """It wrote int8 variants its own verify rejected, silently, calibrated on generated inputs."""
    model = models.write(tmp_path, "cancel.onnx", _cancelling_model())
    built = _cli("variants", str(model), "--int8")
    assert built.returncode == 0, built.stderr
    lines = built.stdout.splitlines()
    assert lines[1] == (
        "calibrate int8 on 8 seeded draws of generated inputs: the checkpoint carries no samples "
        "(samples/<input>.npy beside the model)"
    )
    assert lines[3].startswith(
        "verdict   int8   variant int8 (int8) on CPUExecutionProvider failed verification: "
        "output 'y': at ["
    )
    (warning,) = built.stderr.splitlines()
    assert warning.startswith(
        "ortplug: warning: variant int8 (int8) on CPUExecutionProvider failed"
    )
    assert warning.endswith(
        "; variant int8 is kept in the manifest, but ortplug run serves a variant only where it "
        "passes verification; it was calibrated on generated inputs: real ones "
        "(samples/<input>.npy beside the model) may make it pass"
    )
    checked = _cli("verify", str(model), "--providers", "cpu", "--variant", "int8")
    assert checked.returncode == 1 and checked.stdout.startswith("FAIL      variant int8")

    (tmp_path / "samples").mkdir()
    np.save(tmp_path / "samples" / "x.npy", np.ones((4, 64), np.float32))
    carried = _cli("variants", str(model), "--int8", "--json")
    report = json.loads(carried.stdout)
    assert report["calibration_inputs"] == "carried"
    (row,) = report["variants"]
    assert row["verification"]["status"] == "fail" and row["verification"]["chain"] == ["cpu"]
    assert "failed verification" in carried.stderr and "generated" not in carried.stderr

    (tmp_path / "mlp").mkdir()
    passing = models.write(tmp_path / "mlp", "mlp.onnx", mlp_model())
    clean = _cli("variants", str(passing), "--fp16")
    assert clean.returncode == 0 and "warning" not in clean.stderr
    assert "verdict   fp16   verified variant fp16 (fp16) on CPUExecutionProvider" in clean.stdout


def test_a_variant_identical_to_the_reference_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "model"  # beside the private cache
    folder.mkdir()
    model = models.write(folder, "cls.onnx", models.string_label_classifier())
    done = _cli("variants", str(model), "--int8", "--fp16")
    line = _one_error(done, 1, "ortplug variants: error: ")
    assert line == (
        f"ortplug variants: error: int8 variant of {model}: not written: nothing in it runs in "
        "int8 (no QuantizeLinear/DequantizeLinear node: ONNX Runtime's quantizer changes none "
        "of the model's operators LinearClassifier, ZipMap)"
    )
    done = _cli("variants", str(model), "--fp16")
    assert _one_error(done, 1, "ortplug variants: error: ").endswith(
        f"fp16 variant of {model}: not written: nothing in it runs in fp16 (no operator takes a "
        "float16 input: ONNX Runtime's converter keeps LinearClassifier, ZipMap in float32)"
    )
    assert sorted(p.name for p in folder.iterdir()) == ["cls.onnx"]
    # a model with something to quantize still gets its variant
    mm = models.write(folder, "mm.onnx", models.matmul_model())
    done = _cli("variants", str(mm), "--int8", "--fp16", "--json")
    assert done.returncode == 0, done.stderr
    int8 = onnx.load(str(folder / "mm.int8.onnx"))
    assert any(node.op_type == "DequantizeLinear" for node in int8.graph.node)
    fp16 = onnx.load(str(folder / "mm.fp16.onnx"))
    assert [t.data_type for t in fp16.graph.initializer] == [onnx.TensorProto.FLOAT16]
    assert sorted(p.name for p in folder.iterdir()) == [
        "cls.onnx",
        "mm.fp16.onnx",
        "mm.int8.onnx",
        "mm.metadata.json",
        "mm.onnx",
    ]


def _tanh_model(path: Path) -> Path:
    """``y = tanh(x)``: ONNX Runtime's quantizer leaves it as it is; its converter halves it."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    graph = helper.make_graph([helper.make_node("Tanh", ["x"], ["y"])], "tanh", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


def test_variants_writes_the_fp16_one_and_says_why_not_int8(tmp_path: Path) -> None:
    """Regression: ``variants --int8 --fp16`` wrote nothing at all (exit 1) when the int8 one
    would compute nothing in int8; the fp16 one is written and the int8 refusal said."""
    folder = tmp_path / "model"  # beside the private cache
    folder.mkdir()
    model = _tanh_model(folder / "tanh.onnx")
    why = (
        "not written: nothing in it runs in int8 (no QuantizeLinear/DequantizeLinear node: "
        "ONNX Runtime's quantizer changes none of the model's operators Tanh)"
    )
    done = _cli("variants", str(model), "--int8", "--fp16")
    assert done.returncode == 0, done.stderr
    assert f"skipped   int8   {why}" in done.stdout.splitlines()
    assert "calibrate int8" not in done.stdout
    assert sorted(p.name for p in folder.iterdir()) == [
        "tanh.fp16.onnx", "tanh.metadata.json", "tanh.onnx"
    ]  # fmt: skip
    manifest = json.loads((folder / "tanh.metadata.json").read_text())
    assert [v["name"] for v in manifest["variants"]] == ["fp16"]
    report = json.loads(_cli("variants", str(model), "--int8", "--fp16", "--json").stdout)
    assert report["not_written"] == {"int8": f"int8 variant of {model}: {why}"}
    assert [row["name"] for row in report["variants"]] == ["fp16"]
    assert report["variants"][0]["verification"]["status"] == "pass"


def test_usage_errors(tmp_path: Path) -> None:
    model = models.write(tmp_path, "mlp.onnx", mlp_model())
    assert "expected --int8 and/or --fp16" in _cli("variants", str(model)).stderr


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_variants_draws_the_builds_and_checks_on_a_terminal_only(tmp_path) -> None:
    outputs = []
    for name, run in (("a", run_on_terminal), ("b", None)):
        folder = tmp_path / name
        folder.mkdir()
        model = models.write(folder, "mlp.onnx", mlp_model())
        argv = [ORTPLUG, "variants", str(model), "--fp16"]
        env = {**_child_env(tmp_path / f"cache-{name}"), "ORTPLUG_PLUGINS": "cpu"}
        ran = (
            run(argv, env)
            if run is not None
            else subprocess.run(argv, capture_output=True, env=env, timeout=300, check=False)
        )
        assert ran.returncode == 0, ran.stderr
        outputs.append(ran)
    shown, piped = outputs
    assert b"building fp16" in shown.stderr and b"verifying fp16 on the CPU" in shown.stderr
    assert screen(shown.stderr) == [] and piped.stderr == b""
    assert _untimed(shown.stdout.replace(b"/a/", b"/b/")) == _untimed(piped.stdout)
