"""What a drop-in session takes from the app and the user without failing the app (issue 37):
the model file the app gave serves unless the user opted in to variants, a bad ``ortplug.*``
session config entry is one warning, ``ortplug exec`` of a missing program is one line, and an
ONNX Runtime outside the tested range keeps its own class."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from ortplug.errors import OrtplugConfigWarning
from ortplug_dropin import VARIANTS_ENTRY, VARIANTS_VARIABLE, InferenceSession
from ortplug_dropin._runtime import TESTED_ONNXRUNTIME, runtime_problem
from variant_models import INT8_ACCEPTED, mlp_with_variants, set_tolerance

CPU = "CPUExecutionProvider"
#: A CPU with int8 dot products: the policy's first choice is the int8 variant, where one is listed.
VNNI = {"ORTPLUG_OVERRIDE_CPU_ISA_FLAGS": '["avx2", "avx512_vnni"]'}
X = {"x": np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32)}


@pytest.fixture(autouse=True)
def _cpu_host_with_vnni(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORTPLUG_PLUGINS", "cpu")
    monkeypatch.setenv("ORTPLUG_MEASURE", "0")  # the first verified choice serves: the variant
    for name, value in VNNI.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module")
def with_int8(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An MLP whose manifest lists an int8 variant that passes verification."""
    folder = tmp_path_factory.mktemp("mlp")
    mlp_with_variants(folder, "int8")
    set_tolerance(folder, "int8", INT8_ACCEPTED)
    return str(folder / "mlp.onnx")


@pytest.fixture
def at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An opted-in variant serves once verified: by default a lossy one first shadows the CPU
    reference on real requests (tests/test_lossy_real_traffic.py), which is not what these test."""
    monkeypatch.setenv("ORTPLUG_REAL_TRAFFIC_CHECKS", "0")


def _served_variant(session: InferenceSession) -> str | None:
    return next(c.variant for c in session.report.candidates if c.chosen)


def _plain(model: str) -> list[np.ndarray]:
    return list(ort.InferenceSession(model, providers=[CPU]).run(None, X))


# -- variants only when the user opted in ------------------------------------------------------


def test_an_apps_session_serves_the_file_it_gave(with_int8, capfd) -> None:
    session = InferenceSession(with_int8)
    assert _served_variant(session) is None
    np.testing.assert_array_equal(session.run(None, X)[0], _plain(with_int8)[0])
    assert capfd.readouterr().err == ""


def test_the_variable_opts_in_and_one_line_on_stderr_says_so(
    with_int8, at_once, monkeypatch, capfd
):
    monkeypatch.setenv(VARIANTS_VARIABLE, "1")
    session = InferenceSession(with_int8)
    assert _served_variant(session) == "int8"
    assert capfd.readouterr().err == (
        f"ortplug: {with_int8}: serving its int8 variant (int8) on [cpu] in place of the file "
        f"given (opted in: {VARIANTS_VARIABLE}=1)\n"
    )


def test_a_session_config_entry_opts_in_one_session(with_int8, at_once, monkeypatch, capfd) -> None:
    monkeypatch.setenv(VARIANTS_VARIABLE, "1")
    off = ort.SessionOptions()
    off.add_session_config_entry(VARIANTS_ENTRY, "0")  # the session's entry wins
    assert _served_variant(InferenceSession(with_int8, sess_options=off)) is None
    monkeypatch.delenv(VARIANTS_VARIABLE)
    on = ort.SessionOptions()
    on.add_session_config_entry(VARIANTS_ENTRY, "1")
    assert _served_variant(InferenceSession(with_int8, sess_options=on)) == "int8"
    assert capfd.readouterr().err.splitlines() == [
        f"ortplug: {with_int8}: serving its int8 variant (int8) on [cpu] in place of the file "
        f"given (opted in: session config entry {VARIANTS_ENTRY}=1)"
    ]


def test_a_bad_opt_in_is_one_warning_and_no_variant(with_int8, monkeypatch) -> None:
    monkeypatch.setenv(VARIANTS_VARIABLE, "yes please")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sessions = [InferenceSession(with_int8) for _ in range(2)]
    assert [_served_variant(s) for s in sessions] == [None, None]
    lines = [str(w.message) for w in caught if issubclass(w.category, OrtplugConfigWarning)]
    assert lines == [
        f"{VARIANTS_VARIABLE}: expected 1 (serve a verified precision variant the model's "
        "manifest lists) or 0, got 'yes please'; variants are not used"
    ]


def _exec(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ortplug.cli.main", "exec", *arguments]
    return subprocess.run(
        command, capture_output=True, text=True, check=False, env=env, timeout=120
    )


def test_exec_allow_variants_opts_the_program_in(with_int8, at_once) -> None:
    code = (
        "import onnxruntime as ort; "
        f"s = ort.InferenceSession({with_int8!r}); "
        "print(next(c.variant for c in s.report.candidates if c.chosen))"
    )
    plain = _exec("--", sys.executable, "-c", code)
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, "None\n", "")
    opted = _exec("--allow-variants", "--", sys.executable, "-c", code)
    assert (opted.returncode, opted.stdout) == (0, "int8\n"), opted.stderr
    assert opted.stderr == (
        f"ortplug: {with_int8}: serving its int8 variant (int8) on [cpu] in place of the file "
        f"given (opted in: {VARIANTS_VARIABLE}=1)\n"
    )


# -- a bad ortplug.performance_hint entry ---------------------------------------------------------


def test_a_bad_performance_hint_entry_warns_once_and_the_session_runs(tmp_path) -> None:
    import models

    model = str(models.write(tmp_path, "mm.onnx", models.matmul_model()))
    options = ort.SessionOptions()
    options.add_session_config_entry("ortplug.performance_hint", "fastest")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sessions = [InferenceSession(model, sess_options=options) for _ in range(2)]
    for session in sessions:
        assert session.backend is not None and session.backend.performance_hint == "latency"
    feed = {"x": np.arange(8, dtype=np.float32).reshape(2, 4)}
    expected = ort.InferenceSession(model, sess_options=options, providers=[CPU]).run(None, feed)
    np.testing.assert_array_equal(sessions[1].run(None, feed)[0], expected[0])
    bad = [w for w in caught if issubclass(w.category, OrtplugConfigWarning)]
    assert [str(w.message) for w in bad] == [
        "session config entry 'ortplug.performance_hint': expected one of latency, throughput, "
        "cumulative_throughput, got 'fastest'; ignored (the session serves with the latency hint)"
    ]
    assert Path(bad[0].filename).name == Path(__file__).name  # the app's line


def test_under_exec_a_bad_performance_hint_entry_is_one_warning(tmp_path) -> None:
    import models

    model = str(models.write(tmp_path, "mm.onnx", models.matmul_model()))
    code = (
        "import onnxruntime as ort; o = ort.SessionOptions(); "
        "o.add_session_config_entry('ortplug.performance_hint', 'fastest'); "
        f"[ort.InferenceSession({model!r}, sess_options=o) for _ in range(3)]; print('ran')"
    )
    done = _exec("--", sys.executable, "-c", code)
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr
    assert done.stderr.count("OrtplugConfigWarning: session config entry") == 1
    assert "Traceback" not in done.stderr


# -- exec of a missing program --------------------------------------------------------------------


def test_exec_of_a_missing_program_is_one_line_naming_it() -> None:
    done = _exec("--", "no-such-program-for-ortplug", "--flag")
    assert done.returncode == 127
    assert done.stderr == (
        "ortplug exec: error: command not found: no-such-program-for-ortplug (not on PATH)\n"
    )
    relative = _exec("--", "./no/such/program")
    assert relative.returncode == 127
    assert (
        relative.stderr
        == "ortplug exec: error: command not found: ./no/such/program (no such file)\n"
    )


# -- the ONNX Runtime releases it is made for -----------------------------------------------------


def test_the_installed_onnx_runtime_is_one_the_drop_in_is_tested_on() -> None:
    assert runtime_problem(ort.__version__) is None
    low, high = TESTED_ONNXRUNTIME
    below, above = f"{low[0]}.{low[1] - 1}.0", f"{high[0]}.{high[1]}.0"
    for version in (below, above, "nightly"):
        assert runtime_problem(version) == (
            f"the drop-in (ortplug-dropin) works on onnxruntime>={low[0]}.{low[1]},<{high[0]}."
            f"{high[1]}, whose InferenceSession internals it uses; this is onnxruntime {version}: "
            "install a release in that range, or an ortplug-dropin made for this one"
        )


def test_outside_the_range_patch_leaves_onnx_runtimes_class_and_says_so(tmp_path) -> None:
    code = (
        "import ortplug, ortplug_dropin._runtime as r; r.TESTED_ONNXRUNTIME = ((0, 1), (0, 2)); "
        "p = ortplug.patch(); import onnxruntime as ort; "
        "print(ort.InferenceSession.__module__)"
    )
    env = {**os.environ, "ORTPLUG_PLUGINS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "onnxruntime.capi.onnxruntime_inference_collection\n"
    assert done.stderr == (
        "ortplug: the drop-in (ortplug-dropin) works on onnxruntime>=0.1,<0.2, whose "
        f"InferenceSession internals it uses; this is onnxruntime {ort.__version__}: install a "
        "release in that range, or an ortplug-dropin made for this one; "
        "onnxruntime.InferenceSession is left as it is\n"
    )
