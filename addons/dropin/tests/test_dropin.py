"""``ortplug.InferenceSession`` and ``ortplug.patch()``: ONNX Runtime's class with ortplug's choice.

What ONNX Runtime's own Python tests check only on GPU builds (provider order, ``(name, options)``
tuples, ``provider_options``, ``set_providers``, a mismatched options list) is checked here with
the providers this CPU wheel has (CPU and Azure).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import weakref

import numpy as np
import onnxruntime as ort
import ortplug
import pytest
from models import add_model, write
from ortplug_dropin import InferenceSession

CPU = "CPUExecutionProvider"
AZURE = "AzureExecutionProvider"


@pytest.fixture(autouse=True)
def _cpu_plugin_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy's chain does not depend on the host (an Intel host offers OpenVINO)."""
    monkeypatch.setenv("ORTPLUG_PLUGINS", "cpu")


@pytest.fixture
def model(tmp_path):
    return str(write(tmp_path, "add.onnx", add_model()))


def _feed() -> dict[str, np.ndarray]:
    return {"a": np.arange(4, dtype=np.float32).reshape(1, 4), "b": np.ones((1, 4), np.float32)}


def test_policy_builds_through_ortplug_and_is_onnx_runtimes_class(model):
    session = InferenceSession(model)
    assert isinstance(session, ort.InferenceSession)
    assert session.backend is not None
    assert session.get_providers() == [CPU]
    assert session.report.reasons[0][0] == "cpu"
    assert "ortplug's policy" in session.why
    expected = ort.InferenceSession(model, providers=[CPU]).run(None, _feed())
    np.testing.assert_array_equal(session.run(None, _feed())[0], expected[0])
    binding = session.io_binding()  # ONNX Runtime's IOBinding reads session._sess
    binding.bind_cpu_input("a", _feed()["a"])
    binding.bind_cpu_input("b", _feed()["b"])
    binding.bind_output("c")
    session.run_with_iobinding(binding)
    np.testing.assert_array_equal(binding.copy_outputs_to_cpu()[0], expected[0])


def test_bytes_and_path_like_and_session_options_by_name(model, tmp_path):
    from pathlib import Path

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    by_path = InferenceSession(Path(model), sess_options=options)
    assert by_path.backend is not None
    assert by_path.get_session_options().intra_op_num_threads == 1  # the caller's, kept
    with open(model, "rb") as handle:
        by_bytes = InferenceSession(handle.read())
    assert by_bytes.backend is not None
    assert by_bytes.run(["c"], _feed())[0].tolist() == [[1.0, 2.0, 3.0, 4.0]]


def test_onnx_runtime_forms_are_onnx_runtimes_behaviour(model):
    session = InferenceSession(model, providers=[AZURE, CPU])
    assert session.backend is None
    assert session.get_providers() == [AZURE, CPU]  # order kept
    # This wheel's providers echo no options back: ONNX Runtime's checks of the forms show they
    # reach its own code (the same answers as its class gives).
    tupled = InferenceSession(model, providers=[(AZURE, {"k": 1}), (CPU, {})])
    assert tupled.get_providers() == [AZURE, CPU] and tupled.backend is None
    listed = InferenceSession(model, providers=[AZURE, CPU], provider_options=[{"k": 1}, {}])
    assert listed.get_providers() == [AZURE, CPU] and listed.backend is None
    with pytest.raises(ValueError, match="must be either strings or"):
        InferenceSession(model, providers=[(CPU, "not a dict")], enable_fallback=0)
    with pytest.raises(ValueError, match="Only string values for 'providers'"):
        InferenceSession(model, providers=[(CPU, {})], provider_options=[{}], enable_fallback=0)
    for session_class in (InferenceSession, ort.InferenceSession):
        with pytest.raises(ValueError, match="should be the same length"):
            session_class(model, providers=[AZURE, CPU], provider_options=[{}], enable_fallback=0)


def test_ortplug_forms_are_strict(model):
    for providers in (["cpu"], [{"kind": "cpu"}], [ortplug.parse_provider("cpu")]):
        session = InferenceSession(model, providers=providers)
        assert session.backend is not None
        assert session.report.reasons == (("cpu", "requested explicitly (strict)"),)
    with pytest.raises(
        ValueError, match="provider 'cuda'.* (is not installed|is blocked by ORTPLUG_PLUGINS=)"
    ):
        InferenceSession(model, providers=["cuda", "cpu"])  # ortplug's kind, its plugin not here


def test_names_ortplug_does_not_know_are_onnx_runtimes_to_judge(model):
    for session_class in (InferenceSession, ort.InferenceSession):
        with pytest.raises(RuntimeError, match="Unknown Provider Type: nosuch"):
            session_class(model, providers=[CPU]).set_providers(["nosuch"])


def test_placement_is_recorded_only_when_asked_as_by_onnx_runtime(model):
    for session_class in (InferenceSession, ort.InferenceSession):
        with pytest.raises(Exception, match="record_ep_graph_assignment_info' must be set"):
            session_class(model).get_provider_graph_assignment_info()
    options = ort.SessionOptions()
    options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    session = InferenceSession(model, options)
    assert session.backend is not None
    assert session.report.nodes == {CPU: 1}


def test_set_providers_onnx_runtime_form_then_replanned(model):
    session = InferenceSession(model)
    session.set_providers([AZURE, CPU])
    assert session.get_providers() == [AZURE, CPU]
    assert session.backend is None
    session.set_providers()
    assert session.get_providers() == [CPU]
    assert session.backend is not None
    assert session.run(None, _feed())[0].tolist() == [[1.0, 2.0, 3.0, 4.0]]


def test_a_run_keeps_no_reference_to_its_inputs(model):
    session = InferenceSession(model)
    feed = _feed()
    probes = [weakref.ref(value) for value in feed.values()]
    session.run(None, feed)
    del feed
    gc.collect()
    assert all(probe() is None for probe in probes)


def test_what_ortplug_cannot_read_is_left_to_onnx_runtime(tmp_path):
    bad = write(tmp_path, "bad.onnx", b"not a model")
    with pytest.raises(Exception) as ours:
        InferenceSession(str(bad))
    with pytest.raises(Exception) as theirs:
        ort.InferenceSession(str(bad))
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_kwargs_ortplug_does_not_take_leave_the_choice_to_onnx_runtime(model):
    session = InferenceSession(model, disabled_optimizers=["ConstantFolding"])
    assert session.backend is None
    assert "disabled_optimizers" in session.why


def test_ortplug_forms_with_arguments_only_onnx_runtime_takes_raise_naming_them(model):
    """They were dropped without a word (the session built as if they were not given)."""
    with pytest.raises(
        ValueError, match="disabled_optimizers.*ortplug's forms.*'CPUExecutionProvider'"
    ):
        InferenceSession(model, providers=["cpu"], disabled_optimizers=["ConstantFolding"])
    session = InferenceSession(model, providers=["cpu"])
    assert session.why.startswith("providers=['cpu'] in ortplug's forms (strict): cpu: ")


def test_patch_swaps_records_and_unpatches(model):
    original = ort.InferenceSession
    with ortplug.patch() as patch:
        assert ort.InferenceSession is not original
        assert issubclass(ort.InferenceSession, original)
        ort.InferenceSession(model, providers=[CPU])  # CPU-only: taken over by default
        ort.InferenceSession(model, providers=[AZURE, CPU])  # left to ONNX Runtime
    assert ort.InferenceSession is original
    assert (
        sys.modules["onnxruntime.capi.onnxruntime_inference_collection"].InferenceSession
        is original
    )
    first, second = patch.sessions
    assert first.model == model and first.providers == (CPU,) and "taken over" in first.why
    assert second.providers == (AZURE, CPU) and second.why == "ONNX Runtime's own"


@pytest.mark.parametrize(
    ("takeover", "taken"),
    [("none", [False, False, False]), ("cpu", [True, True, False]), ("all", [True, True, True])],
)
def test_takeover_rules(model, takeover, taken):
    with ortplug.patch(takeover=takeover):
        sessions = [
            ort.InferenceSession(model, providers=[CPU]),
            ort.InferenceSession(
                model, providers=[(CPU, {"arena_extend_strategy": "kSameAsRequested"})]
            ),
            ort.InferenceSession(model, providers=[AZURE, CPU]),
        ]
    assert [session.backend is not None for session in sessions] == taken


def test_takeover_rule_is_checked():
    with pytest.raises(ValueError, match="takeover: expected one of none, cpu, all, got 'gpu'"):
        ortplug.patch(takeover="gpu")


def test_patch_before_onnxruntime_is_imported_applies_on_import(model):
    code = (
        "import sys, ortplug; p = ortplug.patch(); assert 'onnxruntime' not in sys.modules; "
        "import onnxruntime as ort; from ortplug_dropin import InferenceSession; "
        f"s = ort.InferenceSession({model!r}); assert isinstance(s, InferenceSession); "
        "print(p.sessions[0].line())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{model}: CPUExecutionProvider (providers=None: ortplug")


def _exec(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ortplug.cli.main", "exec", *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=False, env=env)


def test_exec_patches_reports_and_passes_the_exit_code_through(model):
    code = (
        "import sys, onnxruntime as ort; "
        f"s = ort.InferenceSession({model!r}, providers=['CPUExecutionProvider']); "
        "print(type(s).__module__, sys.argv[1:]); sys.exit(3)"
    )
    done = _exec("--report", "--", sys.executable, "-c", code, "x", "--y")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "ortplug_dropin._session ['x', '--y']\n"
    assert done.stderr.startswith(f"ortplug: session {model}: CPUExecutionProvider (")
    assert "taken over (takeover='cpu')" in done.stderr


def test_exec_takeover_none_keeps_explicit_lists(model):
    code = f"import onnxruntime as ort; ort.InferenceSession({model!r}, providers=['CPUExecutionProvider'])"
    done = _exec("--takeover", "none", "--report", "--", sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"ortplug: session {model}: CPUExecutionProvider (ONNX Runtime's own)\n"


def test_exec_leaves_a_program_without_onnx_runtime_alone():
    code = (
        "import sys; print('onnxruntime' in sys.modules, 'ortplug_dropin._session' in sys.modules)"
    )
    done = _exec("--report", "--", sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "False False\n"
    assert done.stderr == "ortplug: no ONNX Runtime session was built\n"


def test_exec_passes_signals_through():
    code = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    done = _exec("--", sys.executable, "-c", code)
    assert done.returncode == -15  # the program replaced ortplug's process: its signal is the exit


def test_exec_runs_the_sitecustomize_it_shadows(tmp_path):
    import os

    (tmp_path / "sitecustomize.py").write_text("import builtins; builtins.SHADOWED = True\n")
    paths = (str(tmp_path), os.environ.get("PYTHONPATH"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    done = _exec("--", sys.executable, "-c", "print(SHADOWED)", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"


def test_exec_without_a_command_is_a_usage_error():
    done = _exec()
    assert done.returncode == 2
    assert "expected a command after --" in done.stderr


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--", "python", "-V"], ("cpu", False, ["--", "python", "-V"])),
        (["--report", "--takeover", "all", "python"], ("all", True, ["python"])),
        (["--takeover=none", "--", "x"], ("none", False, ["--", "x"])),
        (["--takeover", "gpu", "--", "x"], None),  # the parser names the bad choice
        (["--verbose", "--", "x"], None),
        (["--"], None),
    ],
)
def test_exec_arguments_read_without_the_parser(arguments, expected):
    from ortplug_dropin._exec import quick_arguments

    quick = quick_arguments(arguments)
    assert (None if quick is None else (quick.takeover, quick.report, quick.program)) == expected


def test_exec_starts_its_program_before_the_parser_attrs_or_the_metadata():
    # the program waits on exec's start: its runner (entry-point group ortplug.quick) is found in
    # the entry_points.txt files themselves and execs before the cache, argparse or attrs load
    code = (
        "import os, sys; from ortplug.cli.main import main\n"
        "heavy = {'argparse', 'attr', 'importlib.metadata', 'ortplug.cache.root', 'typing'}\n"
        "os.execvpe = lambda *a: (print(sorted(heavy & set(sys.modules))), os._exit(0))\n"
        "main(['exec', '--', 'python', '-V'])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


def test_exec_bad_takeover_is_the_parsers_usage_error():
    done = _exec("--takeover", "gpu", "--", sys.executable, "-V")
    assert done.returncode == 2
    assert "invalid choice: 'gpu'" in done.stderr


def test_patch_and_the_build_paths_logger_hook_both_run_after_onnxruntimes_import(model):
    code = (
        "import sys, ortplug; from ortplug.backend import OnnxBackend; p = ortplug.patch(); "
        "assert 'onnxruntime' not in sys.modules; import onnxruntime as ort; "
        "from ortplug_dropin import InferenceSession; "
        "print(issubclass(ort.InferenceSession, InferenceSession), "
        "hasattr(ort.set_default_logger_callback, '__wrapped__'))"  # the build path's wrapper
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True True\n"


def test_patch_swaps_a_name_a_module_imported_before_and_puts_it_back(model):
    import types

    holder = types.ModuleType("holds_the_class")
    holder.InferenceSession = ort.InferenceSession
    sys.modules[holder.__name__] = holder
    try:
        with ortplug.patch():
            assert issubclass(holder.InferenceSession, InferenceSession)
        assert holder.InferenceSession is ort.InferenceSession
    finally:
        del sys.modules[holder.__name__]


def test_leaving_the_patch_undoes_it_in_modules_imported_under_it(model):
    """A module imported inside the block kept the drop-in, which kept taking over CPU lists and
    recording into the dead patch."""
    import types

    with ortplug.patch() as patch:
        late = types.ModuleType("imported_under_the_patch")
        late.InferenceSession = ort.InferenceSession  # `from onnxruntime import InferenceSession`
        kept = ort.InferenceSession
        sys.modules[late.__name__] = late
    try:
        assert late.InferenceSession is ort.InferenceSession
        session = kept(model, providers=[CPU])  # a reference kept past the block
        assert session.backend is None and session.why == "ONNX Runtime's own"
        assert patch.sessions == ()
    finally:
        del sys.modules[late.__name__]


def test_every_method_of_onnx_runtimes_class_works_on_a_session_ortplug_built(model):
    ours, theirs = InferenceSession(model), ort.InferenceSession(model, providers=[CPU])
    assert ours.backend is not None
    for name in ("get_inputs", "get_outputs", "get_overridable_initializers"):
        assert [a.name for a in getattr(ours, name)()] == [a.name for a in getattr(theirs, name)()]
    assert ours.get_modelmeta().graph_name == theirs.get_modelmeta().graph_name
    assert len(ours.get_input_memory_infos()) == len(theirs.get_input_memory_infos()) == 2
    assert len(ours.get_output_memory_infos()) == 1
    assert ours.get_provider_options().keys() == theirs.get_provider_options().keys()
    level = ours.get_session_options().graph_optimization_level
    assert level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert ours.get_profiling_start_time_ns() == 0
    assert ours.end_profiling() == theirs.end_profiling()
    assert ours.get_tuning_results() == theirs.get_tuning_results()
    values = {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in _feed().items()}
    assert ours.run_with_ort_values(["c"], values)[0].numpy().tolist() == [[1.0, 2.0, 3.0, 4.0]]
    done = threading.Event()
    results = []

    def callback(outputs, _user_data, error):
        results.append((outputs[0].tolist() if outputs else None, error))
        done.set()

    ours.run_async(["c"], _feed(), callback, None)
    assert done.wait(30)
    assert results == [([[1.0, 2.0, 3.0, 4.0]], "")]


def test_no_provider_plugin_leaves_the_choice_to_onnx_runtime(model, monkeypatch):
    monkeypatch.setenv("ORTPLUG_PLUGINS", "azuretest")  # no plugin offers a provider for it
    session = InferenceSession(model)
    assert session.backend is None
    assert session.why.startswith("ONNX Runtime's own (ortplug: NoProviderError: ")
    assert session.get_providers() == ort.InferenceSession(model).get_providers()
