"""What a new user tripped on (issue 31, items 17-19): each snag as a test that failed before.

Real ONNX Runtime sessions on small models built with ``onnx.helper``; the console script where
the process itself matters (``exec`` replaces it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import models
import numpy as np
import onnx
import onnxruntime as ort
import ortplug
import pytest
from onnx import TensorProto, helper, numpy_helper
from ortplug import LocalCheckpoint, OnnxBackend
from ortplug.cli.main import main
from ortplug.errors import OptionError

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
DEMO = Path(str(files("ortplug.data") / "demo.onnx"))
README = Path(__file__).resolve().parents[1] / "README.md"
_RECORD = "session.record_ep_graph_assignment_info"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ORTPLUG, *args], capture_output=True, text=True, timeout=300)


def _error_line(capsys: pytest.CaptureFixture[str], code: int, expected: int) -> str:
    """The one stderr line of a command run in this process, checked for its exit code."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert (code, len(lines)) == (expected, 1), err
    return lines[0]


# -- 17: --providers cpu,cpu ---------------------------------------------------------------------


def test_a_provider_listed_twice_is_refused_on_the_command_line_and_in_python(capsys) -> None:
    line = _error_line(capsys, main(["run", "--providers", "cpu,cpu"]), 2)
    assert line == (
        "ortplug run: error: --providers: 'cpu' is listed twice (as 'cpu' and 'cpu'); "
        "a chain names each provider once"
    )
    checkpoint = LocalCheckpoint(DEMO).resolve()
    with pytest.raises(OptionError, match=r"^providers: 'cpu' is listed twice \(as 'cpu' and "
                       r"'CPUExecutionProvider'\); a chain names each provider once$"):  # fmt: skip
        OnnxBackend.from_checkpoint(checkpoint, ["cpu", "CPUExecutionProvider"])


# -- 17: local ortplug batch names the row -------------------------------------------------------


def _lookup_model(tmp_path: Path) -> Path:
    """y = table[i]: a row whose index is outside the table fails in ONNX Runtime, alone."""
    table = numpy_helper.from_array(np.arange(10, dtype=np.float32), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "i"], ["y"])],
        "lookup",
        [helper.make_tensor_value_info("i", TensorProto.INT64, ["batch"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch"])],
        initializer=[table],
    )
    return models.write(tmp_path, "lookup.onnx", models._model(graph))


def test_a_local_batch_error_names_the_row_of_the_input(tmp_path, capsys) -> None:
    model = _lookup_model(tmp_path)
    (tmp_path / "in").mkdir()
    indices = np.arange(100, dtype=np.int64) % 10
    indices[37] = 20
    np.save(tmp_path / "in" / "i.npy", indices)
    args = ["batch", str(model), "--input-dir", str(tmp_path / "in"), "--batch-size", "16"]
    line = _error_line(capsys, main([*args, "--output-dir", str(tmp_path / "out")]), 1)
    assert line.startswith("ortplug batch: error: row 37: RunFailedError: "), line
    assert "idx=20" in line and "actor" not in line and "batch 2" not in line


# -- 17: ortplug exec of an executable without #! ------------------------------------------------


def test_exec_runs_an_executable_without_a_shebang_as_a_shell_does(tmp_path) -> None:
    script = tmp_path / "greet"
    script.write_text('echo "hello $1"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    done = _cli("exec", "--", str(script), "world")
    assert (done.returncode, done.stdout, done.stderr) == (0, "hello world\n", "")


def test_exec_report_of_a_program_that_is_not_python_says_so(tmp_path) -> None:
    true = shutil.which("true")
    assert true is not None
    done = _cli("exec", "--report", "--", true)
    assert done.returncode == 0
    assert done.stderr == (
        f"ortplug exec: --report: {true} is not a Python program: it is not patched and builds no "
        "ONNX Runtime session of ortplug's; Python programs it starts are, and report theirs\n"
    )


# -- 17: nested ortplug.patch() ------------------------------------------------------------------


def test_leaving_a_nested_patch_puts_the_outer_one_back(tmp_path) -> None:
    model = str(models.write(tmp_path, "add.onnx", models.add_model()))
    own = ort.InferenceSession
    with ortplug.patch() as outer:
        with ortplug.patch(takeover="all") as inner:
            assert inner.active and not outer.active
        assert outer.active and not inner.active
        assert ort.InferenceSession is not own
        session = ort.InferenceSession(model)
        assert session.backend is not None  # ortplug's choice: the outer patch is in force
        assert [record.model for record in outer.sessions] == [model] and not inner.sessions
    assert ort.InferenceSession is own and not outer.active


def test_patch_blocks_of_two_threads_ending_out_of_order_put_onnx_runtime_back(tmp_path) -> None:
    """Thread A enters, B enters, A leaves, B leaves: ``onnxruntime.InferenceSession`` stayed
    ortplug's class for good (B's leaving put back A's patch, already left)."""
    import threading

    model = str(models.write(tmp_path, "add.onnx", models.add_model()))
    own = ort.InferenceSession
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def a() -> None:
        with ortplug.patch():
            a_in.set()
            b_in.wait(30)
        a_out.set()

    def b() -> None:
        a_in.wait(30)
        with ortplug.patch() as patch:
            b_in.set()
            a_out.wait(30)
            seen["b in force after a left"] = patch.active and ort.InferenceSession is not own
            ort.InferenceSession(model)
            seen["b recorded its session"] = len(patch.sessions) == 1

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert seen == {"b in force after a left": True, "b recorded its session": True}
    assert ort.InferenceSession is own


# -- 17: the caller's SessionOptions -------------------------------------------------------------


def _has_entry(options: ort.SessionOptions, key: str) -> bool:
    try:
        options.get_session_config_entry(key)
    except RuntimeError:  # ONNX Runtime's answer for a key it does not hold
        return False
    return True


def test_the_drop_in_leaves_the_callers_session_options_as_given(tmp_path) -> None:
    model = str(models.write(tmp_path, "add.onnx", models.add_model()))
    options = ort.SessionOptions()
    with ortplug.patch():
        session = ort.InferenceSession(model, options, providers=[{"kind": "cpu", "threads": 2}])
    assert session.backend is not None
    assert session.get_session_options().intra_op_num_threads == 2  # the session's own copy
    assert options.intra_op_num_threads == 0  # the caller's, as given
    assert not _has_entry(options, _RECORD)


# -- 17: two Ray columns for one model input -----------------------------------------------------


def test_two_ray_columns_for_one_model_input_are_refused() -> None:
    from ortplug_ray import BackendConfig

    with pytest.raises(OptionError) as caught:
        BackendConfig(model=DEMO, input_columns={"a": "x", "b": "x", "c": "y"})
    assert str(caught.value) == (
        "input_columns: expected one column per model input, got 'a' and 'b' both for input 'x'"
    )


# -- 18: the built-in plugin ---------------------------------------------------------------------


def test_the_core_plugin_is_shown_as_built_in_not_by_its_module(capsys) -> None:
    assert main(["plugins", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows if row["distribution"] is None] == ["ortplug"]
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "_builtin" not in out
    assert re.search(r"^ortplug +\(built in\) +active ", out, re.MULTILINE), out
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "_builtin" not in out and "plugin       ortplug (built in): active\n" in out


# -- 18: bench -----------------------------------------------------------------------------------


def test_bench_says_the_rounds_it_ran(capsys) -> None:
    from ortplug.cli._bench import _print

    rows = [{"label": "policy (cpu) / default threads", "median_ms": 0.01, "ratio": 1.0}]
    same = {"baseline": rows[0]["label"], "best": rows[0]["label"], "rows": rows, "skipped": {}}
    for rounds, needed in ((5, 4), (3, 2), (7, 5)):
        _print({**same, "rounds": rounds}, as_json=False)
        assert f"(by 3% at the median, in {needed} of {rounds} rounds)" in capsys.readouterr().out


def test_bench_threads_keep_the_policys_default_in_the_comparison(capsys) -> None:
    assert main(["bench", str(DEMO), "--threads", "1,2", "--rounds", "1", "--calls", "1",
                 "--json"]) == 0  # fmt: skip
    result = json.loads(capsys.readouterr().out)
    assert [row["threads"] for row in result["rows"]] == [None, 1, 2]
    assert result["baseline"] == "policy (cpu) / default threads"


# -- 18: inspect's long symbolic shape -----------------------------------------------------------


def test_inspect_shortens_a_long_symbolic_dimension_and_names_what_it_is_of(tmp_path, capsys):
    expression = " + ".join(f"floor((height - {i})/2) * floor((width + {i})/3)" for i in range(9))
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "long",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "height", "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", expression, "width"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "long.onnx"
    onnx.save(model, path)
    assert main(["inspect", str(path)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("output ")]
    assert line == (
        "output     y: tensor(float) [batch, floor((height - 0)/2) * floor((width + 0)/3) + "
        "flo… (a 420-character expression of height, width), width]"
    )
    assert main(["inspect", str(path), "--json"]) == 0
    (output,) = json.loads(capsys.readouterr().out)["outputs"]
    assert output["shape"] == ["batch", expression, "width"]  # whole, for programs


# -- 18: ortplug --version -----------------------------------------------------------------------


def test_version_reads_only_the_metadata_it_prints() -> None:
    from importlib.metadata import version

    from ortplug.host.runtime import installed_runtimes
    from ortplug.plugin_host import entry_points as _entry_points
    from ortplug.plugins.project import PROJECT

    code = (
        "import sys\n"
        "from ortplug.cli.main import main\n"
        "main(['--version'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('importlib.metadata', 'attr'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    *printed, imported = done.stdout.splitlines()
    assert imported == "[]"  # neither every distribution's metadata nor the plugin host's classes
    plugins = sorted(_entry_points.discover(PROJECT), key=lambda e: e.name)
    assert printed == [
        f"ortplug {version('ortplug')}",
        *(f"runtime {d.name} {d.version}" for d in installed_runtimes()),
        *(f"plugin {e.name}: {e.distribution} {e.version}" for e in plugins),
    ]


# -- 18: run --help names the demo model ---------------------------------------------------------


def test_run_help_says_where_the_demo_model_is(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--help"])
    assert exited.value.code == 0
    assert f"\nthe demo model (the default): {DEMO}\n" in capsys.readouterr().out


# -- 19: the README ------------------------------------------------------------------------------


def _number_shapes(line: str) -> str:
    """``line`` with each number's digits before the point as N (after it: as many d)."""
    return re.sub(r"\d+(?:\.(\d+))?", lambda m: "N" + ("." + "d" * len(m[1]) if m[1] else ""), line)


def test_the_readmes_latency_line_is_written_as_ortplug_run_prints_it(capsys) -> None:
    (shown,) = [x for x in README.read_text().splitlines() if x.startswith("latency   median")]
    assert main(["run"]) == 0
    (printed,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("latency ")]
    assert _number_shapes(printed) == _number_shapes(shown)


def test_the_readme_says_how_long_the_test_suite_takes() -> None:
    text = README.read_text()
    block = text[text.index("```bash\n# lint, type-check and run the test suite") :]
    block = block[: block.index("```", 3)]
    assert "bash .ci/run" in block and re.search(r"about \d+.\d+ minutes on 2 CPUs", block)
