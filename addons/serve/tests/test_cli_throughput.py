"""The performance hint on the command line: ``run``/``bench``/``batch --hint``, ``bench --callers``,
and the measured serving layout in ``info --model``; the ``ortplug`` console script run as a
real subprocess on the demo model (each test has its own cache folder, so a first throughput
build measures). Nothing here asserts a time or a speed."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest
from ortplug.backend import HINTS
from ortplug.cli.arguments import add_hint

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
DEMO = str(files("ortplug.data") / "demo.onnx")
STATIC = str(files("ortplug.data") / "demo_static.onnx")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ORTPLUG, *args], capture_output=True, text=True)


def test_the_parser_offers_the_backends_hints() -> None:
    parser = argparse.ArgumentParser()
    add_hint(parser, "it is built")
    (hint,) = [action for action in parser._actions if action.dest == "hint"]
    assert tuple(hint.choices or ()) == HINTS


def test_run_with_the_throughput_hint_shows_what_serves() -> None:
    done = _cli("run", DEMO, "--hint", "throughput", "--repeat", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("serving   hint       throughput: measured") for line in lines)
    assert any(line.startswith("serving   device     cpu [cpu]: ") for line in lines)
    again = json.loads(_cli("run", DEMO, "--hint", "throughput", "--json").stdout)
    assert again["performance_hint"] == "throughput"
    assert again["serving"]["source"].startswith("recorded: measured")  # the first build's record
    assert json.loads(_cli("run", DEMO, "--json").stdout)["serving"] is None  # the latency hint


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("run", "--hint", "fast"), "argument --hint: invalid choice: 'fast'"),
        (
            ("run", "--hint", "throughput", "--startup-fallback"),
            "--hint throughput: expected no --startup-fallback",
        ),
        (("bench", DEMO, "--callers", "0"), "expected caller counts from 1 to 1024"),
        (("bench", DEMO, "--callers", "1,x"), "got '1,x'"),
        (("bench", DEMO, "--callers", "1", "--seconds", "0"), "expected seconds above 0"),
        (("bench", DEMO, "--callers", "1", "--save"), "--save: expected no --callers"),
        (
            ("bench", DEMO, "--hint", "throughput", "--threads", "1"),
            "--threads: expected no --hint",
        ),
        (
            ("bench", DEMO, "--callers", "1", "--providers", "cpu", "--providers", "cpu"),
            "--providers: expected at most one chain with --callers, got 2",
        ),
    ],
)
def test_hint_and_callers_usage_errors_are_one_line_with_exit_2(args, fragment) -> None:
    done = _cli(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert fragment in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_bench_callers_serves_both_sides_at_each_count() -> None:
    done = _cli("bench", DEMO, "--callers", "1,3", "--rounds", "2", "--seconds", "0.1", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["hint"] == "latency" and result["serving"] is None
    assert [row["callers"] for row in result["rows"]] == [1, 3]
    for row in result["rows"]:
        for side in ("onnxruntime", "ortplug"):
            assert row[side]["requests"] > 0
            assert 0 < row[side]["p50_ms"] <= row[side]["p99_ms"]
        expected = row["ortplug"]["requests_per_s"] / row["onnxruntime"]["requests_per_s"]
        assert row["ratio"] == pytest.approx(expected, rel=0.01)
    assert result["providers"] == ["CPUExecutionProvider"]


def test_bench_with_the_throughput_hint_runs_many_callers_and_shows_the_layout() -> None:
    done = _cli("bench", DEMO, "--hint", "throughput", "--rounds", "1", "--seconds", "0.1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:2] == ["callers", "onnxruntime"]
    assert "ortplug (throughput) req/s" in lines[0]
    assert [line.split()[0] for line in lines[1:4]] == ["1", "4", "16"]  # the default counts
    assert any(line.startswith("serving  hint       throughput: measured") for line in lines)
    assert any(line.startswith("serving  trial      cpu: ") for line in lines)
    assert any(line.startswith("serving  served     cpu: ") for line in lines)
    assert any(line.startswith("generated x: float32 (1, 8)") for line in lines)


def test_bench_callers_measures_the_layout_on_the_given_arrays(tmp_path: Path) -> None:
    rows = tmp_path / "rows.npy"
    np.save(rows, np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32))
    args = ["--hint", "throughput", "--callers", "2", "--rounds", "1", "--seconds", "0.1"]
    done = _cli("bench", DEMO, *args, "--input", f"x={rows}", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["generated_inputs"] == {}
    assert result["serving"]["source"].startswith("measured")
    assert result["serving"]["inputs"] == "given: x float32 (3, 8)"
    (device,) = result["served"]["devices"]  # every request of the rounds, and the first one
    assert device["requests"] == result["rows"][0]["ortplug"]["requests"] + 1
    assert device["rows"] == 3 * device["requests"] and device["max_wait_ms"] >= 0
    printed = _cli("bench", DEMO, *args, "--input", f"x={rows}").stdout.splitlines()
    assert "serving  inputs     given: x float32 (3, 8)" in printed


def test_info_shows_the_serving_layout_a_throughput_build_recorded() -> None:
    before = _cli("info", "--model", DEMO)
    assert before.returncode == 0, before.stderr
    assert "serving      not measured here yet" in before.stdout
    assert json.loads(_cli("info", "--model", DEMO, "--json").stdout)["serving"] == {
        "throughput": None,
        "cumulative_throughput": None,
    }
    assert _cli("run", DEMO, "--hint", "throughput", "--repeat", "1").returncode == 0
    after = _cli("info", "--model", DEMO)
    assert "serving      hint       throughput: measured" in after.stdout
    assert "serving      device     cpu [cpu]: " in after.stdout
    assert "not measured here yet" not in after.stdout
    data = json.loads(_cli("info", "--model", DEMO, "--json").stdout)
    assert data["serving"]["throughput"]["devices"][0]["state"] == "serving"
    assert data["serving"]["cumulative_throughput"] is None


@pytest.mark.parametrize("model", [DEMO, STATIC])
def test_batch_with_the_throughput_hint_writes_the_same_rows(tmp_path: Path, model: str) -> None:
    pytest.importorskip("ortplug_ray", reason="ortplug batch is the Ray add-on's command")
    inputs = tmp_path / "in"
    inputs.mkdir()
    rows = np.random.default_rng(0).standard_normal((203, 8)).astype(np.float32)
    np.save(inputs / "x.npy", rows)
    plain, served = tmp_path / "plain", tmp_path / "served"
    common = ("--input-dir", str(inputs), "--batch-size", "50")
    assert _cli("batch", model, *common, "--output-dir", str(plain)).returncode == 0
    done = _cli("batch", model, *common, "--output-dir", str(served), "--hint", "throughput")
    assert done.returncode == 0, done.stderr
    assert "(local, throughput hint)" in done.stdout
    for name in ("logits", "probs"):
        assert np.array_equal(np.load(served / f"{name}.npy"), np.load(plain / f"{name}.npy"))
