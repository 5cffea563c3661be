"""The CLI's user-facing edges: --providers options, usage errors, warnings, generated inputs, pipes.

Each runs the installed ``ortplug`` console script (or ``main(argv)`` in this process) on
real small models built here with ``onnx.helper``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import models
import numpy as np
import onnx
import onnxruntime
import ortplug.cli.main as main_module
import pytest
from onnx import TensorProto, helper, numpy_helper

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
FAKE_DISTS = Path(__file__).parent / "data" / "fake_dists"
LOGREG_IRIS = Path(onnxruntime.__file__).parent / "datasets" / "logreg_iris.onnx"


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORTPLUG, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )


def _model(nodes, inputs, outputs, initializers=()) -> bytes:
    graph = helper.make_graph(nodes, "cli", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _vad_model(with_sample_rate: bool = True) -> bytes:
    """Like Silero VAD: audio [?, ?] cut into 256-sample frames, a state, and (optionally) sr.

    Generated with every dynamic size 1, the audio cannot be cut into frames and the run fails.
    """
    frame = numpy_helper.from_array(np.array([-1, 256], np.int64), "frame")
    inputs = [
        helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, None]),
        helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, None, 128]),
    ]
    nodes = [
        helper.make_node("Reshape", ["input", "frame"], ["frames"]),
        helper.make_node("Shape", ["frames"], ["frames_shape"]),
        helper.make_node("Identity", ["state"], ["stateN"]),
    ]
    outputs = [
        helper.make_tensor_value_info("frames_shape", TensorProto.INT64, [2]),
        helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, None, 128]),
    ]
    if with_sample_rate:
        inputs.append(helper.make_tensor_value_info("sr", TensorProto.INT64, []))
        nodes.append(helper.make_node("Identity", ["sr"], ["rate"]))
        outputs.append(helper.make_tensor_value_info("rate", TensorProto.INT64, []))
    return _model(nodes, inputs, outputs, [frame])


def _identity_model(inputs: dict[str, tuple[int, list]]) -> bytes:
    """Each input passed through as ``<name>_out`` (to see what the CLI generated)."""
    return _model(
        [helper.make_node("Identity", [name], [f"{name}_out"]) for name in inputs],
        [helper.make_tensor_value_info(n, t, shape) for n, (t, shape) in inputs.items()],
        [helper.make_tensor_value_info(f"{n}_out", t, shape) for n, (t, shape) in inputs.items()],
    )


# -- --providers with typed options -------------------------------------------------------------


@pytest.mark.parametrize(
    "chain", ["cpu:threads=1,allow_spinning=false", '[{"kind": "cpu", "threads": 1}]']
)
def test_providers_take_typed_options_as_text_or_json(tmp_path, chain) -> None:
    model = models.write(tmp_path, "add.onnx", models.add_model())
    done = _cli("run", str(model), "--providers", chain, "--repeat", "1", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["realized"] == ["CPUExecutionProvider"]
    assert report["session_options"]["intra_op_num_threads"] == 1  # the cpu plugin applied it


def test_bench_labels_chains_with_their_options(tmp_path) -> None:
    model = models.write(tmp_path, "mm.onnx", models.matmul_model())
    done = _cli("bench", str(model), "--providers", "cpu:threads=1,allow_spinning=false",
                "--providers", "cpu", "--threads", "1", "--rounds", "1", "--calls", "1", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    labels = [row["label"] for row in json.loads(done.stdout)["rows"]]
    with_options = "cpu:allow_spinning=false,threads=1"
    assert labels == [
        f"{with_options} / default threads",
        f"{with_options} / 1 threads",
        "cpu / default threads",
        "cpu / 1 threads",
    ]


# -- usage errors: one line, exit 2, naming the flag, the expected and the given ---------------

_BAD_ARGUMENTS = [
    (("--providers", "cpu:threads=x"), "--providers: cpu option threads: expected an integer, got 'x'"),
    (("--providers", "cpu:allow_spinning=maybe"),
     "--providers: cpu option allow_spinning: expected true, false, 1 or 0, got 'maybe'"),
    (("--providers", "cpu:threads=0"),
     "--providers: provider 'cpu': threads: expected a thread count from 1 to"),
    (("--providers", "cpu:thread=1"), "--providers: provider 'cpu': unknown option(s) ['thread']"),
    (("--providers", '[{"kind": "cpu", "threads": "2"}]'),
     "provider 'cpu': threads: expected a thread count from 1 to"),
    (("--providers", "cpu,"),
     "argument --providers: expected a provider kind, e.g. cuda:device_id=1,cpu, "
     "got an empty entry in 'cpu,'"),
    (("--providers", ""), "argument --providers: expected a chain of provider kinds"),
    (("--providers", "[1]"), "argument --providers: expected a JSON list of kinds and"),
    (("--providers", "tpu"), "--providers: unknown provider 'tpu'"),
    (("--repeat", "0"), "argument --repeat: expected a positive integer, got '0'"),
    (("--input", "a"), "argument --input: expected NAME=FILE.npy, got 'a'"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), _BAD_ARGUMENTS)
def test_bad_run_arguments_are_one_line_usage_errors(tmp_path, args, message) -> None:
    model = models.write(tmp_path, "add.onnx", models.add_model())
    done = _cli("run", str(model), *args)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.startswith("ortplug run: error: ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_paths_that_are_not_files_say_what_they_are(tmp_path) -> None:
    model = models.write(tmp_path, "add.onnx", models.add_model())
    text = tmp_path / "a.txt"
    text.write_text("1 2 3 4\n")
    cases = [
        (("run", str(tmp_path)), "argument model: expected an .onnx file or a model package (a "
                                 f"folder with manifest.json), got the folder '{tmp_path}'"),
        (("info", "--model", str(tmp_path)), "argument --model: expected an .onnx file or a model "
                                             "package"),
        (("variants", str(tmp_path), "--int8"),
         f"argument model: expected an .onnx file, got a directory: '{tmp_path}'"),
        (("inspect", "missing.onnx"), "argument model: expected an .onnx file, got 'missing.onnx' (no such file)"),
        (("run", str(model), "--input", f"a={tmp_path}"),
         f"argument --input: a: expected a .npy file, got a directory: '{tmp_path}'"),
        (("run", str(model), "--input", f"a={text}"),
         f"argument --input: a: expected a .npy file written by numpy.save, got '{text}' (not in .npy format)"),
        (("batch", str(model), "--input-dir", str(text), "--output-dir", str(tmp_path)),
         f"argument --input-dir: expected a directory, got '{text}' (a file)"),
    ]  # fmt: skip
    for args, message in cases:
        done = _cli(*args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "pickle" not in done.stderr


def test_inputs_the_model_lacks_or_that_do_not_fit_name_the_flag(tmp_path) -> None:
    model = models.write(tmp_path, "add.onnx", models.add_model())
    np.save(tmp_path / "wide.npy", np.zeros((1, 8), np.float32))
    done = _cli("run", str(model), "--input", f"nope={tmp_path / 'wide.npy'}")
    assert done.returncode == 2
    assert "--input nope: expected one of the model's inputs (a, b), got 'nope'" in done.stderr
    done = _cli("run", str(model), "--input", f"a={tmp_path / 'wide.npy'}")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "ortplug run: error: --input: invalid model inputs: input 'a'" in done.stderr
    assert "inputs were generated (b float32 (1, 4) normal)" in done.stderr


def test_bench_thread_counts_are_checked_by_the_parser(tmp_path) -> None:
    model = models.write(tmp_path, "mm.onnx", models.matmul_model())
    done = _cli("bench", str(model), "--threads", "1,x")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "ortplug bench: error: argument --threads: expected positive integers separated by "
        "commas such as 1,2,4, got '1,x' (see ortplug bench --help)"
    )


def test_help_documents_the_providers_grammar() -> None:
    for command in ("run", "bench", "batch"):
        done = _cli(command, "--help")
        assert done.returncode == 0
        assert "cuda:device_id=1,gpu_mem_limit=2000000000,cpu:threads=4" in done.stdout
        assert '\'[{"kind": "cuda", "device_id": 1}, "cpu"]\'' in done.stdout


_LOADED = (
    "import atexit, sys\n"
    "atexit.register(lambda: print(sorted({'numpy', 'onnxruntime'} & set(sys.modules)), "
    "file=sys.stderr))\n"
    "from ortplug.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["run", "--help"],
        ["run", "--repeat", "x"],
        ["run", "--providers", "cpu,"],
        ["bench", "M.onnx", "--threads", "1,x"],
        ["bench"],
    ],
)
def test_help_and_argument_errors_import_neither_numpy_nor_onnxruntime(args) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode in (0, 2), done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_every_help_page_fits_78_columns() -> None:
    from ortplug.cli._demo import DEMO_MARK, DEMO_MODEL
    from ortplug.cli._parser import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    pages = [parser.format_help(), *(command.format_help() for command in commands.values())]
    pages = [page.replace(DEMO_MODEL, DEMO_MARK) for page in pages]  # the install's own path
    assert len(pages) > 10
    assert all(max(map(len, page.splitlines())) <= 78 for page in pages)


def test_run_help_is_argparse_s(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main_module.main(["run", "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: ortplug run [-h]")


@pytest.mark.parametrize("redirect", [">&-", ">/dev/full"])
def test_help_that_cannot_be_written_ends_as_argparse_does(redirect: str) -> None:
    """No stdout: help goes to stderr; a full disk: nothing, no traceback; both exit 0."""
    kept, parsed = (
        subprocess.run(
            ["bash", "-c", f'"$0" {args} {redirect}', ORTPLUG],
            capture_output=True,
            text=True,
            timeout=60,
        )
        for args in ("--help", "--json --help")
    )
    assert kept.returncode == parsed.returncode == 0
    assert kept.stderr == parsed.stderr
    assert "Traceback" not in kept.stderr
    assert kept.stderr.startswith("usage: ortplug") == (redirect == ">&-")


def test_an_empty_command_with_help_is_a_usage_error_as_argparse_says() -> None:
    done = _cli("", "--help")
    assert done.returncode == 2
    assert "ortplug: error: argument COMMAND: invalid choice: ''" in done.stderr


@pytest.mark.parametrize("command", [[], ["run"], ["cache"]])
def test_help_is_the_same_on_any_terminal(command) -> None:
    """Help is rendered at a fixed width: the same text whatever the terminal's width."""
    kept = _cli(*command, "--help", COLUMNS="40")
    parsed = _cli(*command, "--json" if command else "-h", "-h", COLUMNS="200")
    assert kept.returncode == parsed.returncode == 0, parsed.stderr
    assert kept.stdout == parsed.stdout
    assert kept.stdout.startswith(f"usage: {' '.join(['ortplug', *command])} ")


def test_help_is_shipped_unless_another_distribution_adds_a_command(tmp_path) -> None:
    """With the shipped add-ons' commands alone, ``ortplug --help`` prints the page shipped in the
    wheel, importing neither argparse nor attrs nor the cache; with a command another distribution
    adds, the parser renders the page, that command in it."""
    probe = (
        "import sys\nfrom ortplug.cli.main import main\ncode = main(['--help'])\n"
        "print(sorted({'argparse', 'attr', 'ortplug.cache'} & set(sys.modules)), file=sys.stderr)\n"
    )
    added = tmp_path / "dists"
    env = {**os.environ, "PYTHONPATH": str(added)}
    added.mkdir()

    def help_page() -> tuple[str, str]:
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout, done.stderr.strip()

    assert help_page() == (_cli("-h", "-h").stdout, "[]")
    (added / "helpcmd.py").write_text(
        "from ortplug.cli.command import Command\n"
        "COMMAND = Command(name='helpcmd', help='a command installed later', "
        "add_arguments=lambda parser: None, run=lambda args: 0)\n"
    )
    (added / "helpcmd-1.0.dist-info").mkdir()
    (added / "helpcmd-1.0.dist-info" / "entry_points.txt").write_text(
        "[ortplug.commands]\nhelpcmd = helpcmd:COMMAND\n"
    )
    page, imported = help_page()
    assert "helpcmd   a command installed later" in page
    assert page == _cli("-h", "-h", PYTHONPATH=str(added)).stdout
    assert "'argparse'" in imported  # rendered by the parser


def test_the_shipped_help_pages_are_what_the_parser_renders() -> None:
    """``data/help_pages.txt`` in step with the parser, for no add-on and every shipped one."""
    from ortplug.addons import ADDONS
    from ortplug.cli._help_page import shipped_pages, shipped_points

    points = shipped_points()
    assert {target.split(".")[0] for _, target in points} == {a.package for a in ADDONS}
    shipped = (resources.files("ortplug") / "data" / "help_pages.txt").read_text("utf-8")
    assert shipped == shipped_pages(points), (
        "regenerate it: PYTHONPATH=core/src python -m ortplug.cli._help_page"
    )


def test_help_imports_neither_numpy_nor_onnxruntime() -> None:
    probe = "import sys; sys.argv = ['ortplug', 'run', '--help']\n" + _LOADED
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ortplug run ")
    assert done.stderr.strip().splitlines()[-1] == "[]"


# -- warnings, pipes ------------------------------------------------------------------------


def test_warnings_are_one_line_each() -> None:
    env = {"PYTHONPATH": str(FAKE_DISTS), "ORTPLUG_DISABLE_PLUGINS": "fake_never_imported"}
    done = _cli("run", "--repeat", "1", **env)
    lines = done.stderr.strip().splitlines()
    assert any("ortplug plugin 'fake_import_error'" in line for line in lines)
    assert all(line.startswith("ortplug: warning: ") for line in lines), done.stderr
    assert "OrtplugPluginWarning" not in done.stderr and ".py:" not in done.stderr


@pytest.mark.parametrize("command", [["inspect", str(LOGREG_IRIS)], ["run"], ["info"]])
def test_a_closed_stdout_ends_quietly(command) -> None:
    process = subprocess.Popen(
        [ORTPLUG, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # like `| head -1` exiting before ortplug wrote
    stderr = process.stderr.read()
    assert process.wait(timeout=300) == 141
    assert stderr == ""


# -- outputs and generated inputs -----------------------------------------------------------


def test_run_prints_every_value_kind() -> None:
    done = _cli("run", str(LOGREG_IRIS), "--repeat", "1")
    assert done.returncode == 0, done.stderr
    assert "output    label: int64 (3,) [" in done.stdout
    assert "output    probabilities: sequence of 3 [map of 3 {0: " in done.stdout
    outputs = json.loads(_cli("run", str(LOGREG_IRIS), "--repeat", "1", "--json").stdout)["outputs"]
    assert outputs["label"]["kind"] == "tensor"
    probabilities = outputs["probabilities"]
    assert (probabilities["kind"], probabilities["length"]) == ("sequence", 3)
    first = probabilities["first"][0]
    assert first["kind"] == "map" and set(first["first"]) == {"0", "1", "2"}
    assert abs(sum(first["first"].values()) - 1) < 1e-5


def test_generated_audio_is_the_first_length_in_seconds_the_cpu_runs(tmp_path) -> None:
    model = models.write(tmp_path, "vad.onnx", _vad_model())
    done = _cli("run", str(model), "--repeat", "1", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["generated_inputs"] == {  # 1 s (16000 samples) is no whole number of frames
        "input": "float32 (1, 32000) normal",
        "state": "float32 (2, 1, 128) normal",
        "sr": "int64 () = 16000 (a sample rate)",
    }
    assert report["outputs"]["frames_shape"]["first"] == [125, 256]
    assert report["outputs"]["rate"]["first"] == [16000]


def test_a_run_that_fails_on_generated_inputs_says_how_to_pass_real_ones(tmp_path) -> None:
    model = models.write(tmp_path, "frames.onnx", _vad_model(with_sample_rate=False))
    done = _cli("run", str(model))
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "Reshape" in done.stderr  # what ONNX Runtime said, once: its own log stays quiet
    assert "[E:onnxruntime" not in done.stderr
    assert (
        "inputs were generated (input float32 (1, 1) normal; state float32 (2, 1, 128) normal); "
        "pass real ones with --input NAME=FILE.npy" in done.stderr
    )
    np.save(tmp_path / "input.npy", np.zeros((1, 512), np.float32))
    given = _cli("run", str(model), "--input", f"input={tmp_path / 'input.npy'}", "--repeat", "1")
    assert given.returncode == 0, given.stderr


def test_generated_sizes_follow_dim_ranges_and_names(tmp_path) -> None:
    model = models.write(tmp_path, "named.onnx", _identity_model({
        "points": (TensorProto.FLOAT, ["batch", "n_points", 3]),
        "input_ids": (TensorProto.INT64, ["batch", "sequence"]),
        "attention_mask": (TensorProto.INT64, ["batch", "sequence"]),
        "seq_len": (TensorProto.INT64, ["batch"]),
    }))  # fmt: skip
    metadata = {
        "input_names": ["points", "input_ids", "attention_mask", "seq_len"],
        "output_names": ["points_out", "input_ids_out", "attention_mask_out", "seq_len_out"],
        "extra": {"dim_ranges": {"n_points": [1, 7, 50]}},
    }
    (tmp_path / "named.metadata.json").write_text(json.dumps(metadata))
    done = _cli("run", str(model), "--repeat", "1", "--json")
    assert done.returncode == 0, done.stderr
    outputs = json.loads(done.stdout)["outputs"]
    assert outputs["points_out"]["shape"] == [1, 7, 3]
    assert outputs["input_ids_out"]["shape"] == [1, 16]
    assert outputs["attention_mask_out"]["first"] == [1, 1, 1, 1]
    assert outputs["seq_len_out"]["first"] == [16]


# -- autotune: what info shows, and what --save claims ---------------------------------------


def test_bench_save_claims_only_a_measured_speedup(tmp_path) -> None:
    model = models.write(tmp_path, "mm.onnx", models.matmul_model())
    cache = str(tmp_path / "cache")
    done = _cli("bench", str(model), "--providers", "cpu", "--threads", "1", "--rounds", "2",
                "--calls", "3", "--save", "--json", ORTPLUG_CACHE_DIR=cache, ORTPLUG_PLUGINS="cpu")  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    baseline = result["rows"][0]
    assert baseline["label"] == result["baseline"] == "policy (cpu) / default threads"
    assert (baseline["threads"], baseline["ratio"]) == (None, 1.0)  # the default was measured
    run = json.loads(
        _cli(
            "run",
            str(model),
            "--json",
            "--repeat",
            "1",
            ORTPLUG_CACHE_DIR=cache,
            ORTPLUG_PLUGINS="cpu",
        ).stdout
    )
    reason = run["chain"][0]["reason"]
    if result["best"] == result["baseline"]:
        assert "saved" not in result and result["not_saved"].startswith("no candidate clearly")
        assert not reason.startswith("autotuned")
    else:
        (best,) = [row for row in result["rows"] if row["label"] == result["best"]]
        speedup = 1 / best["ratio"]  # its median over the default's (medians of microseconds)
        assert abs(result["speedup"] - speedup) < 0.01 * speedup
        assert f"ran {result['speedup']:.2f}x faster than the policy's default" in reason


def test_bench_save_with_option_chains_is_refused_before_measuring(tmp_path) -> None:
    model = models.write(tmp_path, "mm.onnx", models.matmul_model())
    done = _cli("bench", str(model), "--providers", "cpu:threads=2", "--save")
    assert done.returncode == 2 and done.stderr.strip() == (
        "ortplug bench: error: --save: expected --providers without options (an autotune "
        "record keeps provider kinds and a thread count), got options for cpu"
    )


def test_a_saved_winner_drives_run_and_info(tmp_path, monkeypatch, capsys) -> None:
    from ortplug.cli import _bench
    from ortplug.cli.main import main

    def one_thread_is_twice_as_fast(run, calls):  # the measurement, made deterministic
        return 1.0 if run.func.__self__.session_options.intra_op_num_threads == 1 else 2.0

    monkeypatch.setattr(_bench, "median_ms", one_thread_is_twice_as_fast)
    model = models.write(tmp_path, "mm.onnx", models.matmul_model())
    args = ["bench", str(model), "--threads", "1", "--rounds", "3", "--calls", "1", "--save"]
    usable = {"ORTPLUG_OVERRIDE_CPU_USABLE_CPUS": "2", "ORTPLUG_OVERRIDE_CPU_LOGICAL_CPUS": "4"}
    usable["ORTPLUG_PLUGINS"] = "cpu"  # the policy's default is the CPU on any host
    for name, value in usable.items():  # default threads: 2, so the 1-thread candidate differs
        monkeypatch.setenv(name, value)
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["best"] == "policy (cpu) / 1 threads" and result["speedup"] == 2.0
    info = _cli("info", "--model", str(model), "--json")
    chain = json.loads(info.stdout)["chain"]
    expected = "autotuned by `ortplug bench --save`: cpu, 1 threads ran 2.00x faster"
    assert [row["kind"] for row in chain] == ["cpu"] and chain[0]["reason"].startswith(expected)
    run = json.loads(_cli("run", str(model), "--json", "--repeat", "1").stdout)
    assert run["chain"][0]["reason"].startswith(expected)
    assert run["session_options"]["intra_op_num_threads"] == 1


def test_the_core_command_list_is_the_parser_s() -> None:
    """``main`` names the core's commands before building a parser (an add-on's command runs its
    quick path first): the list must be the parser's own, or a core word would go looking for
    an add-on."""
    from ortplug.cli._parser import build_parser

    commands = next(a for a in build_parser([])._actions if a.dest == "command").choices
    assert sorted(main_module.CORE_COMMANDS) == sorted(commands)
