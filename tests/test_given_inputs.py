"""Inputs a user hands verification (``verify_inputs=``, ``ortplug verify --input``, ``ortplug run
--input``): used first, ahead of the checkpoint's samples and generated inputs, keyed apart in the
verdict cache, said in the verdict (``inputs``: ``given``) and refused in one line when they do
not fit. Real ONNX Runtime sessions; the candidate is a misbehaving test provider or a variant."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import models
import numpy as np
import pytest
from ortplug import LocalCheckpoint, OnnxBackend, OptionError, Verification, VerificationError
from ortplug.errors import GivenInputsError
from ortplug.testing import demo_model, make_plugin_host
from ortplug_misbehaving import MisbehavingPlugin, MisbehavingProvider
from variant_models import INT8_ACCEPTED, mlp_with_variants, set_tolerance

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
VNNI = {"ORTPLUG_OVERRIDE_CPU_ISA_FLAGS": '["avx2", "avx512_vnni"]'}


@pytest.fixture(autouse=True)
def _first_verified_choice_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """About verification: nothing is timed (the measured choice is test_proven_choice.py's)."""
    monkeypatch.setenv("ORTPLUG_MEASURE", "0")


def _build(checkpoint, misbehaviour: str = "slow", **kwargs):
    """``checkpoint`` on the misbehaving provider, an explicit chain: it must pass verification."""
    plugin = MisbehavingPlugin(misbehaviour, delay_s=0)
    return OnnxBackend.from_checkpoint(
        checkpoint,
        providers=[MisbehavingProvider(misbehaviour, 0), "cpu"],
        plugins=make_plugin_host(("bad", plugin)),
        **kwargs,
    )


def _rows(count: int, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(7).standard_normal((count, 8)) * scale).astype(np.float32)


@pytest.fixture
def demo():
    return LocalCheckpoint(demo_model()).resolve()


# -- the Python API --------------------------------------------------------------------------------


def test_given_inputs_are_verified_on_first_and_the_verdict_says_given(demo) -> None:
    with _build(demo, verify_inputs={"x": _rows(5)}) as backend:
        verdict = backend.report.verification
    assert verdict is not None and verdict.passed and verdict.inputs == "given"
    assert verdict.covered[:2] == ("the first feed (x (5, 8))", "batch 1")
    assert verdict.coverage().startswith("given inputs: the first feed (x (5, 8)); batch 1; ")


def test_given_inputs_find_what_generated_ones_miss(demo) -> None:
    """A provider that raises on batches of 64 rows passes on generated inputs (batches 1, 2, 8):
    a user's real batch of 64 rejects it."""
    with _build(demo, "big_batch") as backend:
        assert backend.report.verification is not None and backend.report.verification.passed
    raised = r"raised on .*\(on the first feed \(x \(64, 8\)\)\)"
    with pytest.raises(VerificationError, match=raised):
        _build(demo, "big_batch", verify_inputs={"x": _rows(64)})


def test_given_inputs_key_the_verdict_cache_apart(demo) -> None:
    _build(demo).close()  # generated inputs: measured and cached
    with _build(demo, verify_inputs={"x": _rows(5)}) as given:
        assert given.report.verification is not None and not given.report.verification.cached
    with _build(demo, verify_inputs={"x": _rows(5)}) as again:
        cached = again.report.verification
        assert cached is not None and cached.cached and cached.inputs == "given"
    with _build(demo, verify_inputs={"x": _rows(5, scale=2.0)}) as other:
        assert other.report.verification is not None and not other.report.verification.cached


@pytest.fixture
def pair(tmp_path: Path):
    """c[n] = a[n] + b[n], carrying samples/b.npy (3 values)."""
    model = models.write(tmp_path, "add.onnx", models.add_model(["n"]))
    (tmp_path / "samples").mkdir()
    np.save(tmp_path / "samples" / "b.npy", np.arange(3, dtype=np.float32))
    return LocalCheckpoint(model).resolve()


def test_given_inputs_take_precedence_over_carried_samples(pair) -> None:
    given_b = {"b": np.ones(5, np.float32)}  # a is generated (1 value): it broadcasts
    with _build(pair, verify_inputs=given_b) as backend:
        verdict = backend.report.verification
    assert verdict is not None and verdict.inputs == "given and generated"
    assert "b (5,)" in verdict.covered[0] and "b (3,)" not in verdict.covered[0]
    with _build(pair, verify_inputs={"a": np.ones(3, np.float32)}) as backend:
        verdict = backend.report.verification
    assert verdict is not None and verdict.inputs == "given and carried"
    assert "a (3,)" in verdict.covered[0] and "b (3,)" in verdict.covered[0]


def test_given_inputs_the_cpu_reference_refuses_are_one_error(pair) -> None:
    with pytest.raises(
        GivenInputsError,
        match=r"^verify_inputs: input\(s\) a float32 \(5,\): expected arrays the CPU reference "
        r"runs, got ones it refused: ",
    ):
        _build(pair, verify_inputs={"a": np.ones(5, np.float32)})  # b carries 3 values


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"y": _rows(1)}, "verify_inputs: input 'y': expected one of the model's inputs (x)"),
        ({"x": [[1.0] * 8]}, "verify_inputs: input 'x': expected a numeric numpy array, got list"),
        ({"x": np.array([None])}, "input 'x': expected a numeric numpy array, got dtype object"),
        ([("x", _rows(1))], "expected a mapping of input name to numpy array, got list"),
        ({"x": _rows(2).astype(np.float64)},
         "verify_inputs: input 'x': expected dtype float32 (tensor(float)), got float64"),
        ({"x": np.ones((2, 7), np.float32)},
         "input 'x': dimension 1 must be 8 (shape [batch, 8]), got 7 (shape (2, 7))"),
    ],
)  # fmt: skip
def test_bad_given_inputs_are_one_line_naming_the_input(demo, given, message: str) -> None:
    with pytest.raises(GivenInputsError) as raised:
        _build(demo, verify_inputs=given)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_given_inputs_need_verification_on(demo) -> None:
    with pytest.raises(OptionError, match="Verification.inputs: used only with enabled=True"):
        OnnxBackend.from_checkpoint(
            demo, verify=Verification(enabled=False, inputs={"x": _rows(1)})
        )
    with (  # the keyword of earlier releases says it in its own words
        pytest.warns(DeprecationWarning),
        pytest.raises(OptionError, match="verify_inputs: used only with verification on, got "),
    ):
        OnnxBackend.from_checkpoint(demo, verify=False, verify_inputs={"x": _rows(1)})


def test_a_startup_fallback_verifies_on_the_given_inputs(demo) -> None:
    plugin = MisbehavingPlugin("big_batch", delay_s=0)
    with pytest.warns(Warning, match="failed verification"):
        backend = OnnxBackend.from_checkpoint(
            demo,
            plugins=make_plugin_host(("bad", plugin)),
            startup_fallback=True,
            verify=Verification(inputs={"x": _rows(64)}),
        )
        assert backend.wait_ready(60)
    rejected = backend.report.candidates[0]
    assert rejected.verdict is not None and rejected.verdict.inputs == "given"
    assert "(on the first feed (x (64, 8)))" in rejected.reason
    assert backend.providers == ("CPUExecutionProvider",)
    backend.close()


# -- the command line ------------------------------------------------------------------------------


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "ORTPLUG_PLUGINS": "cpu", **(env or {})}
    return subprocess.run([ORTPLUG, *args], capture_output=True, text=True, env=environment)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLP with an int8 variant its users accept (right on generated inputs) and an fp16 one,
    and an input of real-looking magnitude the int8 calibration never saw."""
    folder = tmp_path_factory.mktemp("mlp")
    mlp_with_variants(folder, "int8", "fp16")
    set_tolerance(folder, "int8", INT8_ACCEPTED)
    wide = 40 * np.random.default_rng(0).standard_normal((3, 64))
    np.save(folder / "wide.npy", wide.astype(np.float32))
    np.save(folder / "doubles.npy", np.ones((3, 64)))
    return folder


def test_ortplug_verify_input_is_verified_on_and_shown(built: Path) -> None:
    model, wide = str(built / "mlp.onnx"), f"x={built / 'wide.npy'}"
    generated = json.loads(_cli("verify", model, "--providers", "cpu", "--json").stdout)
    assert [row["status"] for row in generated["choices"]] == ["reference", "pass", "pass"]
    assert generated["inputs"] == "generated"

    given = _cli("verify", model, "--providers", "cpu", "--input", wide, "--json")
    report = json.loads(given.stdout)
    assert given.returncode == 1 and report["inputs"] == "given"
    (_, int8, fp16) = report["choices"]
    assert (int8["variant"], int8["status"], fp16["status"]) == ("int8", "fail", "pass")
    assert int8["verdict"]["inputs"] == "given" and int8["verdict"]["covered"] == [
        "the first feed (x (3, 64))"
    ]
    assert int8["coverage"] == "given inputs: the first feed (x (3, 64))"
    assert fp16["coverage"].startswith("given inputs: the first feed (x (3, 64)); batch 1; ")

    text = _cli("verify", model, "--providers", "cpu", "--variant", "int8", "--input", wide)
    lines = text.stdout.splitlines()
    assert lines[0] == "FAIL      variant int8 (int8) on [cpu]"
    assert lines[1].endswith("(on the first feed (x (3, 64)))")
    assert lines[2] == "          checked on given inputs: the first feed (x (3, 64))"


def test_ortplug_verify_input_that_does_not_fit_is_a_usage_error(built: Path) -> None:
    model = str(built / "mlp.onnx")
    wrong = _cli("verify", model, "--providers", "cpu", "--input", f"x={built / 'doubles.npy'}")
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr == (
        "ortplug verify: error: --input: input 'x': expected dtype float32 (tensor(float)), "
        "got float64\n"
    )
    unknown = _cli("verify", model, "--input", f"y={built / 'wide.npy'}")
    assert unknown.returncode == 2
    assert "--input y: expected one of the model's inputs (x), got 'y'" in unknown.stderr


@pytest.mark.parametrize(
    ("array", "problem"),
    [
        (np.zeros((2, 5), np.float32), "dimension 1 must be 8 (shape [batch, 8]), got 5 (shape (2, 5))"),
        (np.zeros((2, 8), np.int64), "expected dtype float32 (tensor(float)), got int64"),
    ],
    ids=["shape", "dtype"],
)  # fmt: skip
@pytest.mark.parametrize("providers", [[], ["--providers", "cpu"]], ids=["policy", "cpu"])
def test_ortplug_verify_input_that_does_not_fit_a_model_without_variants_is_refused(
    tmp_path: Path, array: np.ndarray, problem: str, providers: list[str]
) -> None:
    """Regression (issue 37): with no variant (nor accelerator) there was nothing to verify,
    so the given arrays were never checked: a wrong shape or dtype passed, exit 0."""
    path = tmp_path / "x.npy"
    np.save(path, array)
    done = _cli("verify", str(demo_model()), *providers, "--input", f"x={path}")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"ortplug verify: error: --input: input 'x': {problem}\n"
    np.save(path, np.zeros((2, 8), np.float32))  # one that fits: the reference row, exit 0
    fits = _cli("verify", str(demo_model()), *providers, "--input", f"x={path}")
    assert fits.returncode == 0 and fits.stdout.startswith("REFERENCE reference (fp32) on [cpu]")


def test_ortplug_run_input_is_verified_on_and_info_shows_coverage(built: Path, tmp_path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(built, folder)
    model = str(folder / "mlp.onnx")
    once_verified = {**VNNI, "ORTPLUG_MEASURE": "0", "ORTPLUG_REAL_TRAFFIC_CHECKS": "0"}
    info = _cli("info", "--model", model, env=once_verified)
    lines = info.stdout.splitlines()
    at = lines.index("candidate    [cpu] variant int8 (int8): chosen: verified")
    assert lines[at + 1].startswith(
        "  covered    generated inputs: the first feed (x (1, 64)); batch 2; batch 4; batch 5; "
        "batch 8; batch 9; "
    )
    run = _cli("run", model, "--input", f"x={folder / 'wide.npy'}", "--repeat", "1", "--json",
               env={**VNNI, "ORTPLUG_MEASURE": "0"})  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    rejected = report["candidates"][0]
    assert rejected["variant"] == "int8" and rejected["reason"].startswith("rejected: ")
    assert rejected["verdict"]["inputs"] == "given"
    assert report["candidates"][-1]["chosen"] and report["realized"] == ["CPUExecutionProvider"]
