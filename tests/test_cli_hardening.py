"""The command line as a new user and a tester tried it (issue 24, items 6-18 but 10).

Each runs the ``ortplug`` console script on real small models built here with ``onnx.helper``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path

import models
import numpy as np
import onnx
import pytest

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
DEMO = Path(str(files("ortplug.data") / "demo.onnx"))
DEMO_STATIC = Path(str(files("ortplug.data") / "demo_static.onnx"))


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORTPLUG, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )


def _one_error(done: subprocess.CompletedProcess[str], code: int, prefix: str) -> str:
    """The one stderr line of a failed command, checked for its exit code and prefix."""
    lines = done.stderr.strip().splitlines()
    assert (done.returncode, len(lines)) == (code, 1), done.stderr
    assert lines[0].startswith(prefix), lines[0]
    assert "Traceback" not in done.stderr
    return lines[0]


# -- 6: a classifier with string labels ----------------------------------------------------------


def test_run_prints_the_string_labels_of_a_classifier(tmp_path) -> None:
    model = models.write(tmp_path, "cls.onnx", models.string_label_classifier())
    done = _cli("run", str(model), "--repeat", "1", "--json")
    assert done.returncode == 0, done.stderr
    outputs = json.loads(done.stdout)["outputs"]
    assert outputs["label"]["kind"] == "tensor" and outputs["label"]["first"] == ["owl"]
    assert outputs["probabilities"]["first"][0]["kind"] == "map"
    text = _cli("run", str(model), "--repeat", "1")
    assert text.returncode == 0, text.stderr
    assert "output    label: object (1,) ['owl']" in text.stdout


def test_run_json_is_strict_json_when_outputs_are_not_finite(tmp_path) -> None:
    """``NaN``/``Infinity`` tokens are not JSON (jq refuses them): they are written as strings."""
    tensor = onnx.helper.make_tensor_value_info
    model = models.write(tmp_path, "nan.onnx", models._typed_model(
        [onnx.helper.make_node("Sub", ["x", "x"], ["zero"]),
         onnx.helper.make_node("Div", ["zero", "zero"], ["nan"]),
         onnx.helper.make_node("Reciprocal", ["zero"], ["inf"])],
        [tensor("x", onnx.TensorProto.FLOAT, [1, 2])],
        [tensor("nan", onnx.TensorProto.FLOAT, [1, 2]), tensor("inf", onnx.TensorProto.FLOAT, [1, 2])],
    ))  # fmt: skip
    done = _cli("run", str(model), "--repeat", "1", "--providers", "cpu", "--json")
    assert done.returncode == 0, done.stderr

    def refuse(token: str) -> None:
        raise AssertionError(f"not JSON: {token}")

    outputs = json.loads(done.stdout, parse_constant=refuse)["outputs"]
    assert outputs["nan"]["first"] == ["nan", "nan"] and outputs["inf"]["first"] == ["inf", "inf"]


# -- 4: "..." only where values were left out ----------------------------------------------------


def test_run_marks_only_values_it_left_out() -> None:
    done = _cli("run", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    logits = next(line for line in done.stdout.splitlines() if line.startswith("output    logits"))
    assert logits.startswith("output    logits: float32 (1, 3) [") and logits.endswith("]")
    assert "..." not in logits
    wide = _cli("run", str(DEMO_STATIC), "--repeat", "1")  # (4, 3): 12 values, 4 shown
    assert wide.returncode == 0, wide.stderr
    assert "output    logits: float32 (4, 3) [" in wide.stdout and ", ...]" in wide.stdout


# -- 7, 8: verify's exit codes -------------------------------------------------------------------


def test_verify_of_a_chain_that_cannot_be_built_exits_1() -> None:
    for json_flag in ((), ("--json",)):
        done = _cli(
            "verify", str(DEMO), "--providers", "cuda,cpu", *json_flag, CUDA_VISIBLE_DEVICES=""
        )
        assert done.returncode == 1, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["choices"][0]["status"] == "error"


def test_verify_of_a_variant_the_model_lacks_is_a_usage_error() -> None:
    done = _cli("verify", str(DEMO), "--providers", "cpu", "--variant", "int8")
    line = _one_error(done, 2, "ortplug verify: error: --variant: ")
    assert "expected one of the variants of" in line and "(it has none), got 'int8'" in line


# -- 9: model packages everywhere a model is read ------------------------------------------------


def _package(root: Path) -> Path:
    component = root / "models" / "demo" / "cpu"
    component.mkdir(parents=True)
    shutil.copy(DEMO, component / "model.onnx")
    variants = {"cpu": {"ep": "CPUExecutionProvider", "device": "cpu"}}
    (root / "models" / "demo" / "metadata.json").write_text(
        json.dumps({"component_name": "demo", "variants": variants})
    )
    (root / "manifest.json").write_text(json.dumps({"schema_version": 1, "components": ["demo"]}))
    return root


def test_every_command_that_reads_a_model_takes_a_model_package(tmp_path) -> None:
    package = str(_package(tmp_path / "pkg"))
    weights = str(tmp_path / "pkg" / "models" / "demo" / "cpu" / "model.onnx")
    np.save(tmp_path / "x.npy", np.zeros((3, 8), np.float32))
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "x.npy", np.zeros((3, 8), np.float32))
    commands = {
        "run": ("run", package, "--repeat", "1", "--json"),
        "inspect": ("inspect", package, "--json"),
        "info": ("info", "--model", package, "--json"),
        "bench": ("bench", package, "--threads", "1", "--rounds", "1", "--calls", "1", "--json"),
        "batch": ("batch", package, "--input-dir", str(tmp_path / "in"),
                  "--output-dir", str(tmp_path / "out"), "--json"),
    }  # fmt: skip
    for name, args in commands.items():
        done = _cli(*args)
        assert done.returncode == 0, (name, done.stderr)
        json.loads(done.stdout)
    assert json.loads(_cli(*commands["inspect"]).stdout)["model"] == weights
    assert np.load(tmp_path / "out" / "probs.npy").shape == (3, 3)


# -- 11: a closed stdout -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["info", "plugins", "run --repeat 1"])
def test_a_closed_stdout_is_one_line_naming_it(command) -> None:
    done = subprocess.run(
        ["bash", "-c", f'"$0" {command} >&-', ORTPLUG], capture_output=True, text=True, timeout=120
    )
    name = command.split()[0]
    line = _one_error(done, 1, f"ortplug {name}: error: ")
    assert line == (f"ortplug {name}: error: standard output is closed: the output was not written")


# -- 12: --output-dir that cannot be a folder ----------------------------------------------------


def test_an_output_dir_that_cannot_be_made_names_the_flag(tmp_path) -> None:
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "x.npy", np.zeros((2, 8), np.float32))
    model = tmp_path / "model.onnx"
    shutil.copy(DEMO, model)
    for target, reason in (
        (model, "a file"),
        (Path("/proc/nope/out"), "No such file or directory"),
    ):
        done = _cli("batch", str(model), "--input-dir", str(tmp_path / "in"),
                    "--output-dir", str(target))  # fmt: skip
        line = _one_error(done, 2, "ortplug batch: error: ")
        assert line == (
            f"ortplug batch: error: --output-dir: expected a folder that exists or can be "
            f"created, got '{target}' ({reason})"
        )
    assert model.read_bytes() == DEMO.read_bytes()


# -- 13: a value that begins with "-" ------------------------------------------------------------


def test_a_negative_tolerance_says_what_a_tolerance_must_be() -> None:
    for args in (("--tolerance", "-1,0"), ("--tolerance=-1,0",)):
        done = _cli("verify", str(DEMO), *args)
        line = _one_error(done, 2, "ortplug verify: error: ")
        assert "argument --tolerance: expected RTOL,ATOL (two numbers >= 0, e.g. " in line
        assert "got '-1,0'" in line


def test_a_flag_taken_for_a_value_is_named() -> None:
    done = _cli("run", "--repeat", "--json")
    line = _one_error(done, 2, "ortplug run: error: ")
    assert "argument --repeat: expected a positive integer, got '--json'" not in line
    assert "argument --repeat: expected one argument" in line


# -- 14: --version -------------------------------------------------------------------------------


def test_version_names_ortplug_the_runtime_and_each_plugin() -> None:
    done = _cli("--version")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"ortplug {version('ortplug')}"
    assert f"onnxruntime {version('onnxruntime')}" in lines[1]
    assert f"plugin cpu: ortplug-cpu {version('ortplug-cpu')}" in lines


def test_version_imports_no_plugin_and_no_runtime() -> None:
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith("
        "('ortplug_', 'onnxruntime', 'numpy'))), file=sys.stderr))\n"
        "from ortplug.cli.main import main\n"
        "sys.exit(main(['--version']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"


# -- 15: what blocked the CPU plugin -------------------------------------------------------------


def test_no_provider_names_the_variable_that_blocked_the_plugins() -> None:
    done = _cli("run", "--repeat", "1", ORTPLUG_PLUGINS="nosuch")
    line = _one_error(done, 1, "ortplug run: error: ")
    assert "installed provider kinds: none" in line
    assert "ORTPLUG_PLUGINS=nosuch blocked the installed plugin(s) " in line and "cpu" in line
    # the OpenVINO example blocked too: on a host its library supports, it would offer a chain
    done = _cli("run", "--repeat", "1", ORTPLUG_DISABLE_PLUGINS="cpu,openvino")
    line = _one_error(done, 1, "ortplug run: error: ")
    assert (
        "ORTPLUG_DISABLE_PLUGINS=cpu,openvino blocked the installed plugin(s) cpu, openvino" in line
    )
    rows = json.loads(_cli("plugins", "--json", ORTPLUG_DISABLE_PLUGINS="cpu").stdout)
    cpu = next(row for row in rows if row["name"] == "cpu")
    assert (cpu["status"], cpu["error"]) == ("blocked", "blocked by ORTPLUG_DISABLE_PLUGINS=cpu")


# -- 16: unknown arguments name the command ------------------------------------------------------


def test_an_unknown_flag_is_the_commands_error() -> None:
    done = _cli("run", str(DEMO), "--bogus")
    assert _one_error(done, 2, "ortplug run: error: ") == (
        "ortplug run: error: unrecognized arguments: --bogus (see ortplug run --help)"
    )
    done = _cli("--bogus", "info")
    assert _one_error(done, 2, "ortplug: error: ").startswith("ortplug: error: unrecognized")


# -- 17: a static batch, locally -----------------------------------------------------------------


def test_local_batch_splits_rows_for_a_static_batch_model(tmp_path) -> None:
    (tmp_path / "in").mkdir()
    rows = np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32)
    np.save(tmp_path / "in" / "x.npy", rows)
    done = _cli("batch", str(DEMO_STATIC), "--input-dir", str(tmp_path / "in"),
                "--output-dir", str(tmp_path / "out"), "--providers", "cpu")  # fmt: skip
    assert done.returncode == 0, done.stderr
    import onnxruntime

    session = onnxruntime.InferenceSession(str(DEMO), providers=["CPUExecutionProvider"])
    (expected,) = session.run(["probs"], {"x": rows})
    np.testing.assert_allclose(np.load(tmp_path / "out" / "probs.npy"), expected, atol=1e-6)


def _named_model(tmp_path, input_name: str, output_names: list[str]):
    nodes = [onnx.helper.make_node("Identity", [input_name], [name]) for name in output_names]
    tensor = onnx.helper.make_tensor_value_info
    return models.write(tmp_path, "named.onnx", models._typed_model(
        nodes,
        [tensor(input_name, onnx.TensorProto.FLOAT, ["batch", 2])],
        [tensor(name, onnx.TensorProto.FLOAT, ["batch", 2]) for name in output_names],
    ))  # fmt: skip


def test_batch_files_of_tensor_names_stay_in_their_folders(tmp_path) -> None:
    """A model's names chose the paths: ``../escaped`` was written outside --output-dir, and a
    TensorFlow name such as ``dense/BiasAdd:0`` failed after the whole run."""
    model = _named_model(tmp_path, "in/x", ["dense/BiasAdd:0", "../escaped"])
    source, target = tmp_path / "in", tmp_path / "out" / "sub"
    source.mkdir()
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.save(source / "in%2Fx.npy", rows)
    done = _cli("batch", str(model), "--input-dir", str(source), "--output-dir", str(target))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in target.iterdir()) == [
        "%2E.%2Fescaped.npy",
        "dense%2FBiasAdd%3A0.npy",
    ]
    assert not (tmp_path / "out" / "escaped.npy").exists()
    np.testing.assert_array_equal(np.load(target / "dense%2FBiasAdd%3A0.npy"), rows)


def test_batch_of_no_rows_writes_empty_outputs_and_a_single_value_is_refused(tmp_path) -> None:
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "x.npy", np.zeros((0, 8), np.float32))
    args = ["batch", str(DEMO), "--input-dir", str(tmp_path / "in"), "--output-dir"]
    done = _cli(*args, str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert np.load(tmp_path / "out" / "probs.npy").shape == (0, 3)
    np.save(tmp_path / "in" / "x.npy", np.float32(1.0))
    line = _one_error(_cli(*args, str(tmp_path / "out2")), 2, "ortplug batch: error: --input-dir")
    assert "expected rows on the first axis, got a single value in x.npy" in line


def test_a_local_batch_that_fails_in_onnx_runtime_is_one_line(tmp_path) -> None:
    frames = onnx.helper.make_tensor("frame", onnx.TensorProto.INT64, [2], [-1, 256])
    model = models.write(tmp_path, "frames.onnx", models._typed_model(
        [onnx.helper.make_node("Reshape", ["x", "frame"], ["y"])],
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 256])],
        initializers=[frames],
    ))  # fmt: skip
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "x.npy", np.zeros((2, 3), np.float32))
    done = _cli("batch", str(model), "--input-dir", str(tmp_path / "in"),
                "--output-dir", str(tmp_path / "out"))  # fmt: skip
    line = _one_error(done, 1, "ortplug batch: error: rows 0..1: RunFailedError: ")
    assert "ONNX Runtime failed to run model" in line and "Reshape" in line  # every row fails
