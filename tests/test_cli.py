"""The ``ortplug`` console script, run as a real subprocess from the installed distribution."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import models
import numpy as np
import pytest

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
REPOSITORY = Path(__file__).resolve().parents[1]
#: The README's CPU install, from this checkout (the core was installed from its folder).
_CPU_INSTALL = f"pip install '{REPOSITORY}/core[cpu]' {REPOSITORY}/plugins/cpu"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORTPLUG, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


def test_run_without_model_uses_the_shipped_demo() -> None:
    done = _cli("run", "--json", "--repeat", "3")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["realized"][-1] == "CPUExecutionProvider"
    assert len(report["realized"]) == len(report["chain"])  # every provider chosen was realized
    assert report["chain"][-1]["kind"] == "cpu" and report["chain"][-1]["reason"]
    assert set(report["outputs"]) == {"logits", "probs"}
    assert report["outputs"]["probs"]["shape"] == [1, 3]
    assert abs(sum(report["outputs"]["probs"]["first"]) - 1.0) < 1e-5
    assert report["latency_ms"]["runs"] == 3


def test_run_human_output_and_given_inputs(tmp_path) -> None:
    model = models.write(tmp_path, "add.onnx", models.add_model())
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, np.full((1, 4), 2, np.float32))
    np.save(b, np.full((1, 4), 3, np.float32))
    done = _cli("run", str(model), "--input", f"a={a}", "--input", f"b={b}", "--providers", "cpu")
    assert done.returncode == 0, done.stderr
    assert "output    c: float32 (1, 4) [5, 5, 5, 5]" in done.stdout
    assert "realized  CPUExecutionProvider" in done.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("run", "missing.onnx"), "argument model: expected an .onnx file, got 'missing.onnx'"),
        (("run", "--providers", "tpu"), "--providers: unknown provider 'tpu'"),
        (("run", "--input", "x"), "argument --input: expected NAME=FILE.npy, got 'x'"),
        (("run", "--input", "x=nope.npy"), "x: expected a .npy file, got 'nope.npy' (not found)"),
    ],
)
def test_usage_errors_go_to_stderr_as_one_line_with_exit_2(args, fragment) -> None:
    done = _cli(*args)
    assert done.returncode == 2
    assert fragment in done.stderr and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1


def test_info_and_plugins_json() -> None:
    info = json.loads(_cli("info", "--json").stdout)
    assert info["host"]["facts"]["cpu"]["usable_cpus"] >= 1
    assert "cpu" in info["provider_kinds"]
    plugins = {p["name"]: p for p in json.loads(_cli("plugins", "--json").stdout)}
    assert plugins["cpu"]["distribution"] == "ortplug-cpu"
    assert plugins["cpu"]["status"] == "active"


def test_disabled_plugin_is_listed_as_blocked() -> None:
    done = _cli("plugins", env={"ORTPLUG_DISABLE_PLUGINS": "cpu"})
    assert done.returncode == 0
    assert any(line.startswith("cpu ") and " blocked" in line for line in done.stdout.splitlines())


_WITHOUT_ORT = "import sys; sys.modules['onnxruntime'] = None\n"


def test_import_and_info_work_without_onnxruntime() -> None:
    code = _WITHOUT_ORT + "from ortplug.cli.main import main; sys.exit(main(['info']))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "onnxruntime  not installed: install exactly one ONNX Runtime" in done.stdout
    assert _CPU_INSTALL in done.stdout


def test_building_without_onnxruntime_says_what_to_install() -> None:
    code = _WITHOUT_ORT + "from ortplug.cli.main import main; sys.exit(main(['run']))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert "ONNX Runtime is not installed" in done.stderr and _CPU_INSTALL in done.stderr


def test_import_loads_neither_onnxruntime_nor_onnx() -> None:
    code = "import sys, ortplug; print(sorted({'onnxruntime', 'onnx'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_first_result_imports_only_what_its_path_needs() -> None:
    # start-up cost: verification, startup fallback, model packages and importlib's ABCs and
    # metadata (the entry points and probe results are remembered) are other paths' imports
    code = (
        "import sys, numpy as np\nfrom ortplug import LocalCheckpoint, OnnxBackend\n"
        f"checkpoint = LocalCheckpoint({str(files('ortplug.data') / 'demo.onnx')!r}).resolve()\n"
        "OnnxBackend.from_checkpoint(checkpoint).run({'x': np.zeros((1, 8), np.float32)})\n"
        "print(sorted(set(sys.argv[1:]) & set(sys.modules)))"
    )
    deferred = [
        "importlib.abc",
        "importlib.metadata",
        "ortplug.pipeline.real_traffic",
        "ortplug.pipeline.startup",
        "ortplug.pipeline.traffic_check",
        "ortplug.verification.verifier",
        "ortplug.checkpoint.model_package",
        "ortplug.verification.verdicts",
    ]
    for _ in range(2):  # the first start may scan and probe; the second must not
        done = subprocess.run(
            [sys.executable, "-c", code, *deferred], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_explicit_cpu_build_imports_no_add_on_verification_nor_report() -> None:
    # start-up cost: the report is made when asked for, the add-ons only for their hints
    code = (
        "import sys, numpy as np\nfrom ortplug import LocalCheckpoint, OnnxBackend\n"
        f"checkpoint = LocalCheckpoint({str(files('ortplug.data') / 'demo.onnx')!r}).resolve()\n"
        "b = OnnxBackend.from_checkpoint(checkpoint, providers=['cpu'])\n"
        "b.run({'x': np.zeros((1, 8), np.float32)})\n"
        "print(sorted(set(sys.argv[1:]) & set(sys.modules)))"
    )
    deferred = [
        "importlib.metadata",
        "ortplug.pipeline.report",
        "ortplug.verification.verifier",
        "ortplug_dropin",
        "ortplug_ray",
        "ortplug_serve",
        "ortplug_variants",
    ]
    for _ in range(2):  # the first start may scan and probe; the second must not
        done = subprocess.run(
            [sys.executable, "-c", code, *deferred], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_info_lists_wheels_and_why_providers_declined(monkeypatch) -> None:
    monkeypatch.delenv("ORTPLUG_DISABLE_PLUGINS")  # about every installed plugin, the example too
    info = json.loads(_cli("info", "--json").stdout)
    assert info["runtime_distributions"] == [f"onnxruntime {info['onnxruntime']}"]
    assert info["problems"] == []
    declined = {row["kind"]: row["reason"] for row in info["declined"]}
    assert declined["coreml"] == "CoreML runs on macOS only [coreml]"
    assert declined["cuda"].startswith("no usable NVIDIA driver")
    chain = [row["kind"] for row in info["chain"]]
    assert chain[-1] == "cpu" and set(chain) <= {"cpu", "openvino"}  # the example plugin, by host
    assert ("openvino" in chain) != ("openvino" in declined)


def test_info_for_a_model_on_a_simulated_apple_silicon_mac(tmp_path) -> None:
    model = models.write(tmp_path, "static.onnx", models.matmul_model(static=True))
    mac = {
        "ORTPLUG_OVERRIDE_PLATFORM": "darwin",
        "ORTPLUG_OVERRIDE_MACHINE": "arm64",
        "ORTPLUG_OVERRIDE_AVAILABLE_PROVIDERS": "CoreMLExecutionProvider,CPUExecutionProvider",
        "ORTPLUG_OVERRIDE_COREML_MACOS_VERSION": '"14.5"',
        "ORTPLUG_OVERRIDE_COREML_APPLE_SILICON": "true",
        "ORTPLUG_DISABLE_PLUGINS": "openvino",  # a Mac has no onnxruntime-ep-openvino wheel
    }
    done = _cli("info", "--model", str(model), env=mac)
    assert done.returncode == 0, done.stderr
    chain = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("chain ")]
    assert chain == ["coreml", "cpu"]
    assert "macOS 14.5: fp32 static-shape checkpoint on CoreML MLProgram, CPUAndGPU" in done.stdout
