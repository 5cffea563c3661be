"""The proven choice: candidates verified, measured and served, on test providers that misbehave as real
ones do (``ortplug_misbehaving``: real ONNX Runtime sessions, registered as plugin objects)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from ortplug import (
    InputValidationError,
    LocalCheckpoint,
    OnnxBackend,
    ProviderFallbackWarning,
    StartupFallback,
    Verification,
    VerificationError,
    VerificationWarning,
)
from ortplug.plugin_host.manager import get_plugin_host
from ortplug.testing import demo_model, demo_static_model, make_plugin_host
from ortplug_misbehaving import MisbehavingPlugin, MisbehavingProvider

CPU = ("CPUExecutionProvider",)
BAD = ("AzureExecutionProvider", "CPUExecutionProvider")


def _host(misbehaviour: str, **kwargs: float):
    """The CPU plugin and one misbehaving accelerator, offered first."""
    return make_plugin_host(("bad", MisbehavingPlugin(misbehaviour, **kwargs)))  # type: ignore[arg-type]


@pytest.fixture
def demo():
    return LocalCheckpoint(demo_model()).resolve()


def _expected(checkpoint, feed):
    with OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"]) as cpu:
        return cpu.run(feed)


REJECTIONS = {
    "off": r"failed verification: output 'logits': at \[0, \d\]: .* exceeds",
    "stale": r"a reused IO binding returned stale outputs: after its inputs were updated in place and bound again",
    "raises": r"it raised on inputs the CPU reference runs: RuntimeError: .*Can't set the input tensor",
    "no_node": r"its accelerators took no node of the graph \(the CPU provider ran all 4\)",
}


@pytest.mark.parametrize("misbehaviour", sorted(REJECTIONS))
def test_a_misbehaving_candidate_is_rejected_in_one_line_and_the_cpu_serves(demo, misbehaviour):
    with pytest.warns(VerificationWarning, match=REJECTIONS[misbehaviour]) as caught:
        backend = OnnxBackend.from_checkpoint(demo, plugins=_host(misbehaviour))
    (line,) = [str(w.message) for w in caught if issubclass(w.category, VerificationWarning)]
    assert "\n" not in line and line.endswith(
        "taking the next choice: the reference weights on [cpu]"
    )
    assert backend.providers == CPU
    first, last = backend.report.candidates
    assert (first.chain, first.chosen, last.chain, last.chosen) == (
        ("misbehaving", "cpu"),
        False,
        ("cpu",),
        True,
    )
    assert first.reason.startswith("rejected: ") and last.reason == "the CPU reference"
    feed = {"x": np.ones((3, 8), np.float32)}
    np.testing.assert_array_equal(backend.run(feed)["probs"], _expected(demo, feed)["probs"])


@pytest.mark.parametrize("misbehaviour", ["off", "stale", "raises"])
def test_an_explicit_misbehaving_chain_raises_verification_error_not_an_ort_error(
    demo, misbehaviour
):
    with pytest.raises(VerificationError, match=REJECTIONS[misbehaviour]):
        OnnxBackend.from_checkpoint(
            demo, providers=[MisbehavingProvider(misbehaviour), "cpu"], plugins=_host(misbehaviour)
        )


def test_verify_false_is_the_opt_out(demo):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backend = OnnxBackend.from_checkpoint(demo, plugins=_host("off"), verify=False)
    assert backend.providers == BAD and backend.report.candidates == ()


def test_a_slower_candidate_loses_to_the_cpu_and_later_builds_take_the_record(demo):
    host = _host("slow", delay_s=0.05)  # 50 ms a run: thousands of times the CPU's
    backend = OnnxBackend.from_checkpoint(demo, plugins=host)
    slow, cpu = backend.report.candidates
    assert backend.providers == CPU and cpu.chosen and not slow.chosen
    assert slow.verdict is not None and slow.verdict.passed
    assert slow.reason == "verified, not faster than the CPU reference"
    assert slow.median_ms is not None and cpu.median_ms is not None
    (record,) = Path(os.environ["ORTPLUG_CACHE_DIR"], "autotune").glob("*.json")
    assert json.loads(record.read_text())["setting"]["chain"] == ["cpu"]
    again = OnnxBackend.from_checkpoint(demo, plugins=host)  # a later process: built directly
    assert again.providers == CPU
    assert again.chain_reasons[0][1].startswith("measured on this model's first build here: cpu")
    assert all(c.median_ms is None for c in again.report.candidates)  # nothing measured


def test_a_later_build_still_says_why_a_candidate_was_passed_over(demo):
    """The record a first build keeps carries each candidate's outcome: a later process, which
    builds the recorded choice directly, shows the rejection instead of "not tried"."""
    with pytest.warns(VerificationWarning):
        first = OnnxBackend.from_checkpoint(demo, plugins=_host("no_node"))
    (rejected,) = [c for c in first.report.candidates if c.chain[0] == "misbehaving"]
    assert rejected.reason.startswith("rejected: ")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is built but the recorded choice
        later = OnnxBackend.from_checkpoint(demo, plugins=_host("no_node"))
    assert later.providers == CPU
    (passed_over,) = [c for c in later.report.candidates if c.chain[0] == "misbehaving"]
    assert passed_over.reason == (
        f"not tried: on this model's measured first build here, {rejected.reason}"
    )
    assert passed_over.verdict is None and not passed_over.chosen


def test_measure_false_serves_the_first_verified_choice_and_records_nothing(demo, monkeypatch):
    backend = OnnxBackend.from_checkpoint(
        demo, plugins=_host("slow"), verify=Verification(measure=False)
    )
    assert backend.providers == BAD and backend.report.verification is not None
    monkeypatch.setenv("ORTPLUG_MEASURE", "0")
    assert OnnxBackend.from_checkpoint(demo, plugins=_host("slow")).providers == BAD
    assert not list(Path(os.environ["ORTPLUG_CACHE_DIR"]).glob("autotune/*.json"))


def test_a_provider_error_at_run_time_falls_back_to_the_next_verified_choice(demo):
    backend = OnnxBackend.from_checkpoint(
        demo, plugins=_host("big_batch"), verify=Verification(measure=False)
    )
    assert backend.providers == BAD  # verified on the generated inputs
    big = {"x": np.random.default_rng(0).random((64, 8), np.float32)}
    with pytest.warns(
        ProviderFallbackWarning, match=r"failed at run time \(RuntimeError: .*\); serving on"
    ):
        out = backend.run(big)
    np.testing.assert_array_equal(out["probs"], _expected(demo, big)["probs"])
    assert backend.providers == CPU
    with pytest.raises(InputValidationError):  # the caller's bad input stays the caller's
        backend.run({"x": np.ones((2, 5), np.float32)})


def test_the_run_time_fallback_warning_points_past_ortplugs_own_frames(demo):
    """Reached through ortplug's own code (the Ray predictor calls run()), the warning points at
    the first frame outside ortplug, as the build's warnings do (a fixed stacklevel pointed at
    ortplug's caller of run)."""
    import ortplug

    inside = str(Path(ortplug.__file__).parent / "integrations" / "_a_caller_of_run.py")
    scope: dict[str, object] = {}
    exec(compile("def call(backend, feed):\n    return backend.run(feed)\n", inside, "exec"), scope)
    backend = OnnxBackend.from_checkpoint(
        demo, plugins=_host("big_batch"), verify=Verification(measure=False)
    )
    big = {"x": np.random.default_rng(0).random((64, 8), np.float32)}
    with pytest.warns(ProviderFallbackWarning, match="failed at run time") as caught:
        scope["call"](backend, big)  # type: ignore[operator]
    assert [w.filename for w in caught if w.category is ProviderFallbackWarning] == [__file__]


def test_the_run_time_fallback_keeps_the_custom_op_libraries_registered_since_the_build(demo):
    """The next verified choice was planned before the library was registered: it is built
    with it (it used to be refused, and the provider's error reached the caller)."""
    import onnxruntime_extensions

    backend = OnnxBackend.from_checkpoint(
        demo, plugins=_host("big_batch"), verify=Verification(measure=False)
    )
    library = onnxruntime_extensions.get_library_path()
    backend.register_custom_op_library(library)
    big = {"x": np.random.default_rng(0).random((64, 8), np.float32)}
    with pytest.warns(ProviderFallbackWarning, match="serving on"):
        out = backend.run(big)
    np.testing.assert_array_equal(out["probs"], _expected(demo, big)["probs"])
    assert backend.providers == CPU
    assert backend.session_options is not None
    assert backend.session_options.custom_op_libraries == (library,)


def test_an_explicit_chain_raises_at_run_time_and_bad_input_never_falls_back(demo):
    explicit = OnnxBackend.from_checkpoint(
        demo, providers=[MisbehavingProvider("big_batch"), "cpu"], plugins=_host("big_batch")
    )
    with pytest.raises(RuntimeError, match="Can't set the input tensor"):
        explicit.run({"x": np.ones((64, 8), np.float32)})
    assert explicit.providers == BAD
    chosen = OnnxBackend.from_checkpoint(
        demo, plugins=_host("big_batch"), verify=Verification(measure=False)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InputValidationError):
            chosen.run({"x": np.ones((16, 5), np.float32)})
    assert chosen.providers == BAD


def test_startup_fallback_serves_the_cpu_then_only_a_verified_choice(demo):
    # raised in the background thread, which may warn before from_checkpoint returns
    with pytest.warns(VerificationWarning):
        off = OnnxBackend.from_checkpoint(
            demo, plugins=_host("off"), startup_fallback=True, verify=Verification(measure=False)
        )
        assert off.providers == CPU  # the reference serves at once
        assert off.wait_ready(60)
    assert off.providers == CPU
    assert [c.chosen for c in off.report.candidates] == [False, True]
    slow = OnnxBackend.from_checkpoint(
        demo,
        plugins=_host("slow"),
        startup_fallback=StartupFallback(real_traffic_checks=0),
        verify=Verification(measure=False),
    )
    assert slow.wait_ready(60) and slow.providers == BAD  # verified, and not measured
    assert slow.report.verification is not None and slow.report.verification.passed


def test_the_static_batch_predictor_is_exact_where_a_provider_returns_stale_bound_outputs():
    from ortplug.selection import DefaultProviderPolicy
    from ortplug_ray import BackendConfig, OnnxPredictor

    policy = DefaultProviderPolicy(_host("stale"))
    with pytest.warns(VerificationWarning, match="stale outputs"):
        predictor = OnnxPredictor(BackendConfig(model=str(demo_static_model()), policy=policy))
    rows = np.random.default_rng(1).random((103, 8), np.float32)
    out = predictor({"x": rows})
    checkpoint = LocalCheckpoint(demo_static_model()).resolve()
    with OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"]) as cpu:
        expected = np.concatenate(
            [cpu.run({"x": rows[i : i + 4]})["probs"] for i in range(0, 100, 4)]
        )
    np.testing.assert_allclose(out["probs"][:100], expected, atol=1e-6)


def test_ortplug_verify_prints_one_fail_line_per_rejected_candidate(capsys, monkeypatch):
    from ortplug.cli.main import main

    monkeypatch.setenv("ORTPLUG_PLUGINS", "cpu")
    assert get_plugin_host().register(MisbehavingPlugin("raises"), name="bad")
    code = main(["verify", str(demo_model())])
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert code == 0 and err == ""  # what would be used (the CPU reference) passes
    assert lines[0].startswith("FAIL      reference (fp32) on [misbehaving, cpu]")
    assert "raised on inputs the CPU reference runs: RuntimeError:" in lines[1]
    assert lines[2].startswith("REFERENCE") and "<- chosen" in lines[2]


def test_ortplug_verify_marks_what_ortplug_run_serves_and_why_not_the_first_pass(
    capsys, monkeypatch
):
    """It marked the first choice that passed verification, which the next run did not serve
    (timed slower than the CPU reference). And (issue 37) the next verify numbered the choices
    in the order the first build recorded ("choice 2 of 2" became "choice 1 of 2")."""
    from ortplug.cli.main import main

    monkeypatch.setenv("ORTPLUG_PLUGINS", "cpu")
    assert get_plugin_host().register(MisbehavingPlugin("slow", delay_s=0.05), name="bad")
    assert main(["verify", str(demo_model())]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "PASS      reference (fp32) on [misbehaving, cpu]"
    assert lines[2] == "REFERENCE reference (fp32) on [cpu]  <- chosen"
    assert lines[4].startswith(
        "chosen: choice 2 of 2, what ortplug run serves here; choice 1 passed verification "
        "first, but ortplug run does not serve it: [misbehaving, cpu] reference weights (fp32): "
    )
    assert lines[4].endswith(" ms, verified, not faster than the CPU reference")
    assert main(["verify", str(demo_model()), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # the numbering is the first run's (the record the first build wrote orders builds, not it)
    assert (report["chosen"], report["served"]["chain"]) == (1, ["cpu"])
    assert main(["verify", str(demo_model())]) == 0
    again = capsys.readouterr().out.splitlines()  # its timings differ, not its numbering
    assert (again[0], again[2]) == (lines[0], lines[2])
    assert again[4].startswith("chosen: choice 2 of 2, what ortplug run serves here; choice 1 ")
    assert main(["run", str(demo_model()), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["realized"] == list(CPU)


def test_verify_true_never_lets_an_ort_error_escape(demo):
    """It crashed with ONNX Runtime's RuntimeException where a candidate could not run the inputs."""
    with pytest.raises(VerificationError, match="raised on inputs the CPU reference runs"):
        OnnxBackend.from_checkpoint(
            demo,
            providers=[MisbehavingProvider("raises"), "cpu"],
            plugins=_host("raises"),
            verify=True,
        )
    with pytest.warns(VerificationWarning):
        chosen = OnnxBackend.from_checkpoint(demo, plugins=_host("raises"), verify=True)
    assert chosen.providers == CPU


@pytest.mark.parametrize(
    "command", [["run", "--json"], ["info", "--model", str(demo_model()), "--json"]]
)
def test_run_and_info_show_every_candidate_in_json(capsys, monkeypatch, command):
    from ortplug.cli.main import main

    monkeypatch.setenv("ORTPLUG_PLUGINS", "cpu")
    assert get_plugin_host().register(MisbehavingPlugin("off"), name="bad")
    assert main(command) == 0
    rows = json.loads(capsys.readouterr().out)["candidates"]
    assert [(row["chain"], row["chosen"]) for row in rows] == [
        (["misbehaving", "cpu"], False),
        (["cpu"], True),
    ]
    assert rows[0]["reason"].startswith("rejected: ") and rows[0]["verdict"]["passed"] is False
