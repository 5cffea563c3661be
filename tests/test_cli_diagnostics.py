"""``ortplug doctor``, ``inspect`` and ``bench`` as real subprocesses of the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import models
import pytest

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
FAKE_DISTS = Path(__file__).parent / "data" / "fake_dists"


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORTPLUG, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )


def _checks(done: subprocess.CompletedProcess[str]) -> dict[str, dict]:
    report = json.loads(done.stdout)
    assert done.returncode == (0 if report["ok"] else 1)
    return {check["name"]: check for check in report["checks"]}


def test_doctor_reports_every_check_and_exits_by_the_result(monkeypatch) -> None:
    monkeypatch.delenv("ORTPLUG_DISABLE_PLUGINS")  # about every installed plugin, the example too
    checks = _checks(_cli("doctor", "--json"))
    assert checks["onnxruntime"]["ok"] and checks["onnxruntime"]["detail"].startswith(
        "onnxruntime "
    )
    assert checks["plugins"]["ok"]
    assert checks["cache"]["ok"]
    assert checks["cpu threads"]["ok"] and checks["cpu threads"]["plugin"] == "cpu"
    library = checks["library OpenVINOExecutionProvider"]  # the example plugin's plugin-EP library
    assert library["ok"] or "offers no device on this host" in library["detail"]
    assert "cuda" not in checks  # no NVIDIA GPU and a CPU build: nothing for the CUDA plugin to say


def test_doctor_checks_every_settings_value() -> None:
    """Regression (issue 37): a bad ``ORTPLUG_SPOT_CHECK``, ``ORTPLUG_REAL_TRAFFIC_CHECKS`` or
    ``ORTPLUG_MEASURE`` was said only where a build used it (never on a CPU-only host) and
    doctor listed none of them."""
    checks = _checks(_cli("doctor", "--json"))
    assert checks["settings"] == {
        "name": "settings", "ok": True, "detail": "every ORTPLUG_* variable set is valid",
        "fix": "", "plugin": "",
    }  # fmt: skip
    bad = {"ORTPLUG_SPOT_CHECK": "2", "ORTPLUG_REAL_TRAFFIC_CHECKS": "-1", "ORTPLUG_MEASURE": "of"}
    checks = _checks(_cli("doctor", "--json", **bad))
    assert "settings" not in checks
    said = {name: check for name, check in checks.items() if name.startswith("setting ")}
    assert said == {
        "setting ORTPLUG_MEASURE": {
            "name": "setting ORTPLUG_MEASURE", "ok": False,
            "detail": "ORTPLUG_MEASURE: expected a flag (1 or 0, true or false, yes or no, on or "
            "off), got 'of'; the default (1) is used",
            "fix": "set ORTPLUG_MEASURE to a flag (1 or 0, true or false, yes or no, on or off), "
            "or unset it for the default",
            "plugin": "",
        },
        "setting ORTPLUG_REAL_TRAFFIC_CHECKS": {
            "name": "setting ORTPLUG_REAL_TRAFFIC_CHECKS", "ok": False,
            "detail": "ORTPLUG_REAL_TRAFFIC_CHECKS: expected a whole number of requests >= 0, "
            "got '-1'; the default (8) is used",
            "fix": "set ORTPLUG_REAL_TRAFFIC_CHECKS to a whole number of requests >= 0, or unset "
            "it for the default",
            "plugin": "",
        },
        "setting ORTPLUG_SPOT_CHECK": {
            "name": "setting ORTPLUG_SPOT_CHECK", "ok": False,
            "detail": "ORTPLUG_SPOT_CHECK: expected a share of calls from 0 to 1, got '2'; the "
            "default (0.01) is used",
            "fix": "set ORTPLUG_SPOT_CHECK to a share of calls from 0 to 1, or unset it for the "
            "default",
            "plugin": "",
        },
    }  # fmt: skip


def test_doctor_flags_threads_wider_than_the_cpus() -> None:
    done = _cli("doctor", ORT_INTRA_OP_NUM_THREADS="512")
    assert done.returncode == 1
    assert (
        "FAIL  cpu threads" in done.stdout
        and "ORT_INTRA_OP_NUM_THREADS=512 is wider than the" in done.stdout
    )
    assert "fix: unset it, or set it to" in done.stdout


def test_doctor_flags_an_unusable_cache_dir(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    checks = _checks(_cli("doctor", "--json", ORTPLUG_CACHE_DIR=str(blocker)))
    assert checks["cache"] == {
        "name": "cache", "ok": False, "detail": f"{blocker} is not a directory",
        "fix": "set ORTPLUG_CACHE_DIR to a writable directory", "plugin": "",
    }  # fmt: skip


def test_doctor_flags_stale_autotune_records(tmp_path) -> None:
    records = tmp_path / "autotune"
    records.mkdir()
    (records / "old.json").write_text(json.dumps({"schema": 1, "ort_version": "1.0.0"}))
    (records / "junk.json").write_text("{")
    checks = _checks(_cli("doctor", "--json", ORTPLUG_CACHE_DIR=str(tmp_path)))
    assert not checks["cache"]["ok"]
    assert checks["cache"]["detail"].startswith(
        "2 autotune record(s) from another ONNX Runtime version"
    )
    assert str(records / "old.json") in checks["cache"]["fix"]


def test_doctor_flags_a_broken_plugin_and_keeps_going() -> None:
    done = _cli(
        "doctor",
        "--json",
        PYTHONPATH=str(FAKE_DISTS),
        ORTPLUG_DISABLE_PLUGINS="fake_never_imported",
    )
    checks = _checks(done)
    broken = checks["plugin fake_import_error"]
    assert not broken["ok"] and broken["detail"].startswith("failed in import")
    assert (
        broken["fix"]
        == "reinstall ortplug-fakes 1.0, or disable it with ORTPLUG_DISABLE_PLUGINS=fake_import_error"
    )
    assert checks["onnxruntime"]["ok"]  # the other checks still ran


def test_inspect_describes_interface_metadata_and_placement(tmp_path) -> None:
    model = models.write(tmp_path, "shared.onnx", models.shared_dim_model())
    data = json.loads(_cli("inspect", str(model), "--json").stdout)
    assert data["inputs"] == [
        {"name": "a", "type": "tensor(float)", "shape": ["batch", 4]},
        {"name": "b", "type": "tensor(float)", "shape": ["batch", 4]},
    ]
    assert data["opsets"] == {"ai.onnx": 17}
    assert data["metadata"]["precision"] == "fp32" and data["metadata"]["static_shapes"] is False
    assert sum(data["placement"]["nodes"].values()) == 1
    assert data["placement"]["realized"][-1] == "CPUExecutionProvider"
    human = _cli("inspect", str(model)).stdout
    assert "input      a: tensor(float) [batch, 4]" in human and "realized   " in human


def test_inspect_of_a_missing_model_is_one_line() -> None:
    done = _cli("inspect", "missing.onnx")
    assert done.returncode == 2 and done.stderr.strip() == (
        "ortplug inspect: error: argument model: expected an .onnx file, got 'missing.onnx' "
        "(no such file) (see ortplug inspect --help)"
    )


def test_bench_compares_candidates_against_the_measured_default(tmp_path) -> None:
    model = models.write(tmp_path, "mm.onnx", models.matmul_model())
    cache = tmp_path / "cache"
    done = _cli("bench", str(model), "--providers", "cpu", "--providers", "cuda,cpu", "--threads", "1,2",
                "--rounds", "2", "--calls", "3", "--save", "--json", ORTPLUG_CACHE_DIR=str(cache),
                ORTPLUG_PLUGINS="cpu,cuda")  # fmt: skip  # the policy's default is the CPU on any host
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [(row["label"], row["threads"]) for row in result["rows"]] == [
        ("policy (cpu) / default threads", None),  # --save measures the policy's default: the
        ("cpu / default threads", None),  # speedup it claims is over it; each chain has its own
        ("cpu / 1 threads", 1),
        ("cpu / 2 threads", 2),
    ]
    assert result["rows"][0]["ratio"] == 1.0
    assert set(result["skipped"]) == {
        "cuda,cpu / default threads",
        "cuda,cpu / 1 threads",
        "cuda,cpu / 2 threads",
    }
    assert "ProviderNotRealizedError" in result["skipped"]["cuda,cpu / 1 threads"]
    records = list((cache / "autotune").glob("*.json"))
    if result["best"] == result["baseline"]:
        assert "saved" not in result and records == []
        return
    saved = Path(result["saved"])
    assert records == [saved]
    threads = result["best"].split(" / ")[1].split()[0]  # "cpu / default threads" may win too:
    best_threads = None if threads == "default" else int(threads)  # it is a chain of its own
    run = json.loads(
        _cli("run", str(model), "--json", "--repeat", "1", ORTPLUG_CACHE_DIR=str(cache)).stdout
    )
    assert run["chain"][0]["reason"].startswith("autotuned by `ortplug bench --save`: cpu")
    assert run["session_options"].get("intra_op_num_threads") == best_threads  # unset: default


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("--rounds", "0"), 2, "argument --rounds: expected a positive integer, got '0'"),
        (("--providers", "cuda,cpu"), 1, "no candidate could be built"),
    ],
)
def test_bench_errors_are_one_line(tmp_path, args, code, message) -> None:
    model = models.write(tmp_path, "mm.onnx", models.matmul_model())
    done = _cli("bench", str(model), *args, "--threads", "1")
    assert done.returncode == code and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
