"""Verification and precision variants: real int8/fp16 variants of an MLP, real ONNX Runtime sessions.

The CPU's ISA flags are set on the plugin host (``ORTPLUG_OVERRIDE_CPU_ISA_FLAGS``) so the
policy's choice does not depend on the machine running the tests; the int8 kernels run
whatever the flags say.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import attrs
import models
import numpy as np
import pytest
from ortplug import (
    CheckpointMetadata,
    DefaultProviderPolicy,
    LocalCheckpoint,
    OnnxBackend,
    PluginHost,
    ProviderOffer,
    SessionOptionsConfig,
    Tolerance,
    VerificationError,
    VerificationWarning,
    hookimpl,
)
from ortplug.checkpoint import Variant, select_variant
from ortplug.errors import (
    CheckpointError,
    MissingFileError,
    OptionError,
    OrtplugCacheWarning,
    OrtplugPluginWarning,
)
from ortplug.testing import make_host, make_plugin_host
from ortplug.verification.comparison import OutputRule, compare_outputs
from ortplug_cpu import CpuProvider
from variant_models import INT8_ACCEPTED, broken_int8, mlp_model, mlp_with_variants, set_tolerance

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
VNNI = {"ORTPLUG_OVERRIDE_CPU_ISA_FLAGS": '["avx2", "avx512_vnni"]'}
AVX2 = {"ORTPLUG_OVERRIDE_CPU_ISA_FLAGS": '["avx2"]'}


@pytest.fixture(autouse=True)
def _first_verified_choice_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about verification: the first verified choice serves, nothing is timed
    (the measured choice is tests/test_proven_choice.py's)."""
    monkeypatch.setenv("ORTPLUG_MEASURE", "0")


@pytest.fixture
def vnni() -> PluginHost:
    return make_plugin_host(environ=VNNI)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLP with int8 and fp16 variants, built once for the module (quantizing takes a moment)."""
    folder = tmp_path_factory.mktemp("mlp")
    mlp_with_variants(folder, "int8", "fp16")
    return folder


@pytest.fixture
def checkpoint(built: Path, tmp_path: Path):
    """A fresh copy of the built checkpoint (tests may break a variant)."""
    folder = tmp_path / "model"
    shutil.copytree(built, folder)
    return LocalCheckpoint(folder / "mlp.onnx").resolve()


@pytest.fixture
def accepted(checkpoint):
    """The checkpoint with the int8 tolerance a user who accepts its error on logits sets."""
    set_tolerance(checkpoint.weights_path.parent, "int8", INT8_ACCEPTED)
    return LocalCheckpoint(checkpoint.weights_path).resolve()


# -- the manifest ---------------------------------------------------------------------------------


def test_a_checkpoint_without_variants_serializes_as_before() -> None:
    metadata = CheckpointMetadata.from_model(mlp_model())
    assert metadata.variants == () and "variants" not in metadata.to_dict()
    assert CheckpointMetadata.from_json(metadata.to_json()) == metadata


def test_variants_round_trip_and_name_what_is_wrong(checkpoint) -> None:
    metadata = checkpoint.metadata
    assert [(v.name, v.file, v.precision) for v in metadata.variants] == [
        ("int8", "mlp.int8.onnx", "int8"),
        ("fp16", "mlp.fp16.onnx", "fp16"),
    ]
    assert CheckpointMetadata.from_json(metadata.to_json()) == metadata
    assert metadata.variants_for("CPUExecutionProvider", "int8")[0].name == "int8"
    entry = {"name": "int8", "file": "m.int8.onnx", "precision": "int4"}
    with pytest.raises(
        OptionError, match=r"variants\[0\]: variant precision: expected one of .* got 'int4'"
    ):
        attrs.evolve(metadata, variants=[entry])
    with pytest.raises(OptionError, match=r"names must be unique, \['a'\] repeat"):
        attrs.evolve(metadata, variants=[Variant(name="a", file="x", precision="fp16")] * 2)
    with pytest.raises(OptionError, match="tolerance rtol: expected a finite number >= 0, got -1"):
        Tolerance(-1, 0)


def test_a_missing_variant_file_names_the_variant(checkpoint) -> None:
    assert checkpoint.weights_path is not None
    (checkpoint.weights_path.parent / "mlp.fp16.onnx").unlink()
    resolved = LocalCheckpoint(checkpoint.weights_path).resolve()  # read when chosen, not before
    with pytest.raises(MissingFileError, match="variant 'fp16' of .*mlp.onnx: file not found"):
        select_variant(resolved, "fp16")


def test_a_variant_must_have_the_reference_interface(checkpoint) -> None:
    assert checkpoint.weights_path is not None
    (checkpoint.weights_path.parent / "mlp.fp16.onnx").write_bytes(models.add_model())
    with pytest.raises(OptionError, match=r"variant 'fp16' .*input_names \['x'\] not in the model"):
        select_variant(checkpoint, "fp16")
    with pytest.raises(OptionError, match="expected one of the variants .*int8, fp16.*got 'bf16'"):
        select_variant(checkpoint, "bf16")


# -- ONNX Runtime's model-package layout -----------------------------------------------------------


def _package(
    root: Path, variants: dict[str, dict], files: dict[str, bytes], manifest: bool = True
) -> Path:
    component = root / "models" / "mlp"
    for name, data in files.items():
        (component / name).mkdir(parents=True, exist_ok=True)
        (component / name / "model.onnx").write_bytes(data)
    (component / "metadata.json").write_text(
        json.dumps({"component_name": "mlp", "variants": variants})
    )
    if manifest:
        (root / "manifest.json").write_text(
            json.dumps({"schema_version": 1, "components": ["mlp"]})
        )
    return root


def test_an_ort_model_package_is_read_unchanged(tmp_path: Path, checkpoint) -> None:
    assert checkpoint.weights_path is not None
    folder = checkpoint.weights_path.parent
    files = {
        "cpu": (folder / "mlp.onnx").read_bytes(),
        "gpu": (folder / "mlp.fp16.onnx").read_bytes(),
    }
    variants = {
        "gpu": {"ep": "WebGpuExecutionProvider", "device": "gpu"},
        "cpu": {"ep": "CPUExecutionProvider", "device": "cpu"},
    }
    package = _package(tmp_path / "pkg", variants, files)
    resolved = LocalCheckpoint(package).resolve()
    assert resolved.weights_path == package / "models" / "mlp" / "cpu" / "model.onnx"
    (variant,) = resolved.metadata.variants
    assert (variant.name, variant.precision, variant.ep) == (
        "gpu",
        "fp16",
        "WebGpuExecutionProvider",
    )
    assert select_variant(resolved, "gpu").metadata.precision == "fp16"  # inferred from the graph
    assert resolved.metadata.variants_for("CPUExecutionProvider", "fp16") == ()


def test_earlier_package_drafts_and_consumer_metadata(tmp_path: Path, checkpoint) -> None:
    assert checkpoint.weights_path is not None
    data = checkpoint.weights_path.read_bytes()
    variants = {"ref": {"ep_compatibility": [{"ep": "CPUExecutionProvider"}]}, "alt": {}}
    package = _package(tmp_path / "pkg", variants, {"ref": data, "alt": data}, manifest=False)
    component = package / "models" / "mlp"
    descriptor = {
        "files": [{"filename": "model.onnx"}],
        "consumer_metadata": {
            "ortplug": {"precision": "fp16", "tolerance": {"rtol": 0.5, "atol": 0}}
        },
    }
    (component / "alt" / "variant.json").write_text(json.dumps(descriptor))
    resolved = LocalCheckpoint(component).resolve()  # a component folder alone
    (alt,) = resolved.metadata.variants
    assert (alt.precision, alt.tolerance, alt.ep) == ("fp16", Tolerance(0.5, 0), None)


def test_a_package_without_a_cpu_variant_says_so(tmp_path: Path) -> None:
    variants = {"npu": {"ep": "QNNExecutionProvider"}}
    package = _package(tmp_path / "pkg", variants, {"npu": mlp_model()})
    with pytest.raises(
        CheckpointError,
        match=r"no variant the CPU provider runs \(variants: npu \[QNNExecutionProvider\]\)",
    ):
        LocalCheckpoint(package).resolve()


# -- comparing outputs ----------------------------------------------------------------------------


def test_compare_outputs_judges_elements_and_each_rows_top1() -> None:
    reference = {"logits": np.array([[1.0, 0.0, -1.0], [0.5, 0.45, 0.0]], np.float32)}
    flipped = {"logits": np.array([[1.0, 0.0, -1.0], [0.45, 0.5, 0.0]], np.float32)}
    (check,) = compare_outputs(reference, flipped, Tolerance(0.2, 0))
    assert math.isclose(check.max_abs, 0.05, rel_tol=1e-5) and check.scale == 1.0
    assert check.problem() is None and check.rows == 2  # the flip is within the noise allowed
    (strict,) = compare_outputs(reference, flipped, Tolerance(0.01, 0))
    assert "row 1: top-1 is class 1, reference class 0" in str(strict.problem())
    row = compare_outputs(
        {"y": reference["logits"][1]}, {"y": flipped["logits"][1]}, Tolerance(0.01, 0)
    )
    assert "at [1]: 0.5, reference 0.45: diff 0.05 exceeds 0.0045" in str(row[0].problem())
    nan = compare_outputs(
        reference, {"logits": np.full((2, 3), np.nan, np.float32)}, Tolerance(9, 9)
    )
    assert "non-finite values must match exactly" in str(nan[0].problem())
    shape = compare_outputs(reference, {"logits": np.zeros((2, 4), np.float32)}, Tolerance(1, 1))[0]
    assert shape.problem() == (
        "output 'logits': shape (2, 4), reference (2, 3); the shape must match exactly"
    )
    assert "missing" in str(compare_outputs(reference, {}, Tolerance(1, 1))[0].problem())


def test_a_top1_flip_beyond_the_noise_fails_and_a_topk_rule_judges_rows_only() -> None:
    reference = {"p": np.array([[0.9, 0.1], [0.2, 0.8]], np.float32)}
    swapped = {"p": np.array([[0.1, 0.9], [0.2, 0.8]], np.float32)}
    (check,) = compare_outputs(reference, swapped, Tolerance(0, 0.3))
    assert "row 0: top-1 is class 1, reference class 0 (which leads by 0.8" in str(check.problem())
    assert (check.rows, check.topk_agree) == (2, 2)  # both classes are each row's top-2
    top1 = {"p": OutputRule("topk", k=1)}
    (rows,) = compare_outputs(reference, swapped, Tolerance(0, 0), top1)
    assert "row 0: top-1 [1], reference [0] (top-1 sets differ in 1 of 2 rows)" in str(
        rows.problem()
    )
    shifted = {"p": np.array([[0.6, 0.1], [0.2, 0.5]], np.float32)}  # far off, same order
    assert compare_outputs(reference, shifted, Tolerance(0, 0), top1)[0].problem() is None


# -- the policy picks provider and variant together ------------------------------------------------


def test_the_cpu_offers_int8_only_where_the_isa_has_int8_dot_products(checkpoint) -> None:
    for facts, expected in (
        ({"isa_flags": ["avx2", "avx512_vnni"]}, "int8"),
        ({"isa_flags": ["amx", "amx_int8"]}, "int8"),
        ({"isa_flags": ["avx2"]}, None),
    ):
        host = make_host(cpu={"usable_cpus": 8, "logical_cpus": 8, **facts})
        selection = DefaultProviderPolicy(make_plugin_host()).explain(
            checkpoint.metadata, host, checkpoint
        )
        assert selection.variant == expected
        assert selection.chain == (CpuProvider(),)
    assert [(a.variant, a.chain) for a in selection.alternatives] == []


def test_variant_choices_rank_with_the_reference_and_keep_it_as_the_last_fallback(
    vnni, checkpoint
) -> None:
    selection = DefaultProviderPolicy(vnni).explain(
        checkpoint.metadata, vnni.host_capabilities(), checkpoint
    )
    assert (
        selection.variant == "int8"
        and "int8 dot products (avx512_vnni) [cpu]" in selection.reasons[0]
    )
    assert [(a.variant, [c.kind for c in a.chain]) for a in selection.alternatives] == [
        (None, ["cpu"])
    ]


class _UnknownVariant:
    @hookimpl
    def ortplug_offer_providers(self):
        yield ProviderOffer(CpuProvider(threads=1), 9, "typo", variant="int4")


def test_an_offer_of_a_variant_the_checkpoint_lacks_is_ignored_with_a_warning(
    vnni, checkpoint
) -> None:
    assert vnni.register(_UnknownVariant(), name="typo")
    with pytest.warns(
        OrtplugPluginWarning,
        match="'typo' offered cpu with variant 'int4', which the checkpoint does not have \\(int8, fp16\\)",
    ):
        selection = DefaultProviderPolicy(vnni).explain(
            checkpoint.metadata, vnni.host_capabilities(), checkpoint
        )
    assert selection.variant == "int8"


# -- building verified backends --------------------------------------------------------------------


def test_the_policy_picks_a_verified_int8_variant_and_caches_the_verdict(
    vnni, accepted, monkeypatch
) -> None:
    monkeypatch.setenv("ORTPLUG_REAL_TRAFFIC_CHECKS", "0")  # served once verified
    checkpoint = accepted
    with OnnxBackend.from_checkpoint(checkpoint, plugins=vnni) as backend:
        verdict = backend.report.verification
        assert backend.metadata.precision == "int8" and backend.providers == (
            "CPUExecutionProvider",
        )
        assert verdict is not None and verdict.passed and not verdict.cached
        assert (verdict.variant, verdict.inputs, verdict.tolerance) == (
            "int8",
            "generated",
            Tolerance(0.05, 2.0),
        )
        (check,) = verdict.checks
        assert check.name == "logits" and 0 < check.max_abs < 0.5 and check.rows >= 1
        assert {"batch 2", "batch 8", "run_async", "the first feed after 10 runs"} <= set(
            verdict.covered
        )
        assert backend.report.to_dict()["verification"]["passed"] is True
        assert any(
            line.startswith("verdict    verified variant int8") for line in backend.report.lines()
        )
        outputs = backend.run({"x": np.ones((2, 64), np.float32)})["logits"]
    reference = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"]).run(
        {"x": np.ones((2, 64), np.float32)}
    )
    assert np.allclose(outputs, reference["logits"], rtol=0.05, atol=0.15)
    with OnnxBackend.from_checkpoint(checkpoint, plugins=vnni) as again:
        cached = again.report.verification
        assert cached is not None and cached.cached and cached.checks == verdict.checks


def test_a_variant_on_one_intra_op_thread_passes_its_run_async_check(
    vnni, accepted, monkeypatch
) -> None:
    """ONNX Runtime refuses run_async without an intra-op pool: verification checks run_async as a
    caller's runs (on ortplug's thread there), so a one-thread session is not rejected for it."""
    monkeypatch.setenv("ORTPLUG_REAL_TRAFFIC_CHECKS", "0")
    one = SessionOptionsConfig(intra_op_num_threads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", VerificationWarning)
        backend = OnnxBackend.from_checkpoint(accepted, plugins=vnni, session_options=one)
    with backend:
        verdict = backend.report.verification
        assert backend.metadata.precision == "int8"
        assert verdict is not None and verdict.passed and "run_async" in verdict.covered


def test_a_broken_int8_variant_is_rejected_with_the_diff_and_the_reference_serves(
    vnni, checkpoint
) -> None:
    broken_int8(checkpoint)
    with pytest.warns(VerificationWarning) as caught:
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=vnni)
    (warning,) = caught
    message = str(warning.message)
    assert (
        "variant int8 (int8) on CPUExecutionProvider failed verification: output 'logits': "
        in message
    )
    assert "rtol=0.05 atol=0.05" in message and message.endswith(
        "taking the next choice: the reference weights on [cpu]"
    )
    assert backend.metadata.precision == "fp32" and backend.report.verification is None
    with pytest.raises(
        VerificationError, match="variant int8 .* failed verification: output 'logits'"
    ) as raised:
        OnnxBackend.from_checkpoint(
            select_variant(checkpoint, "int8"), providers=["cpu"], verify=True
        )
    assert raised.value.verdict is not None and not raised.value.verdict.passed


def test_verify_false_keeps_the_policy_on_the_reference_weights(vnni, checkpoint) -> None:
    with OnnxBackend.from_checkpoint(checkpoint, plugins=vnni, verify=False) as backend:
        assert backend.metadata.precision == "fp32" and backend.report.verification is None
    with OnnxBackend.from_checkpoint(checkpoint, plugins=make_plugin_host(environ=AVX2)) as plain:
        assert plain.metadata.precision == "fp32" and plain.report.verification is None


def test_a_given_tolerance_applies_to_every_choice(vnni, checkpoint) -> None:
    with pytest.warns(VerificationWarning, match=r"exceeds .* \(rtol=1e-06 atol=0, "):
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=vnni, verify=Tolerance(1e-6, 0))
    assert backend.metadata.precision == "fp32"
    with pytest.raises(VerificationError, match="failed verification"):
        OnnxBackend.from_checkpoint(
            select_variant(checkpoint, "fp16"), providers=["cpu"], verify=Tolerance(1e-9, 0)
        )
    fp16 = OnnxBackend.from_checkpoint(
        select_variant(checkpoint, "fp16"), providers=["cpu"], verify=True
    )
    assert fp16.report.verification is not None and fp16.report.verification.passed


def test_a_manifest_tolerance_overrides_the_precision_default(vnni, checkpoint) -> None:
    tight = [attrs.evolve(v, tolerance=Tolerance(1e-6, 0)) for v in checkpoint.metadata.variants]
    strict = attrs.evolve(checkpoint, metadata=attrs.evolve(checkpoint.metadata, variants=tight))
    with pytest.warns(
        VerificationWarning, match=r"\(rtol=1e-06 atol=0, .*; taking the next choice"
    ):
        backend = OnnxBackend.from_checkpoint(strict, plugins=vnni)
    assert backend.metadata.precision == "fp32"


def test_carried_samples_are_the_verification_inputs(vnni, accepted) -> None:
    checkpoint = accepted
    assert checkpoint.weights_path is not None
    samples = checkpoint.weights_path.parent / "samples"
    samples.mkdir()
    np.save(samples / "x.npy", np.random.default_rng(5).standard_normal((4, 64)).astype(np.float32))
    with OnnxBackend.from_checkpoint(checkpoint, plugins=vnni) as backend:
        verdict = backend.report.verification
        assert (
            verdict is not None
            and verdict.inputs == "carried"
            and verdict.covered[0] == "the first feed (x (4, 64))"
        )


def test_a_corrupt_verdict_record_is_ignored_and_measured_again(
    vnni, accepted, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("ORTPLUG_REAL_TRAFFIC_CHECKS", "0")  # served once verified
    checkpoint = accepted
    OnnxBackend.from_checkpoint(checkpoint, plugins=vnni).close()
    (record,) = Path(os.environ["ORTPLUG_CACHE_DIR"], "verify").glob("*.json")
    record.write_text('{"schema": 1, "checks": [{"name": 1}]}')
    with pytest.warns(OrtplugCacheWarning, match=f"ignoring verification record {record}"):
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=vnni)
    assert backend.report.verification is not None and not backend.report.verification.cached
    assert json.loads(record.read_text())["variant"] == "int8"  # measured again, written again


def test_the_verdict_cache_keeps_variants_apart(accepted) -> None:
    checkpoint = accepted
    int8 = OnnxBackend.from_checkpoint(
        select_variant(checkpoint, "int8"), providers=["cpu"], verify=True
    )
    fp16 = OnnxBackend.from_checkpoint(
        select_variant(checkpoint, "fp16"), providers=["cpu"], verify=True
    )
    first, second = int8.report.verification, fp16.report.verification
    assert first is not None and second is not None and not second.cached
    assert first.checks != second.checks


def test_verify_takes_a_bool_none_or_a_tolerance(checkpoint) -> None:
    with pytest.raises(TypeError, match="verify: expected True, False, None or a Tolerance"):
        OnnxBackend.from_checkpoint(checkpoint, verify="yes")  # type: ignore[arg-type]


# -- the command line ------------------------------------------------------------------------------


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "ORTPLUG_PLUGINS": "cpu", **(env or {})}
    return subprocess.run([ORTPLUG, *args], capture_output=True, text=True, env=environment)


def test_cli_variants_verify_run_and_inspect(tmp_path: Path) -> None:
    model = models.write(tmp_path, "mlp.onnx", mlp_model())
    built = _cli("variants", str(model), "--int8", "--fp16", "--json")
    assert built.returncode == 0, built.stderr
    listed = json.loads(built.stdout)
    assert [v["name"] for v in listed["variants"]] == ["int8", "fp16"]
    assert (tmp_path / "mlp.int8.onnx").is_file() and listed["manifest"].endswith(
        "mlp.metadata.json"
    )

    default = json.loads(_cli("verify", str(model), "--json", env=VNNI).stdout)
    assert [(c["variant"], c["status"]) for c in default["choices"]] == [
        ("int8", "fail"),
        (None, "reference"),
    ]
    set_tolerance(tmp_path, "int8", INT8_ACCEPTED)
    checked = _cli("verify", str(model), "--json", env=VNNI)
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert [(c["variant"], c["status"]) for c in report["choices"]] == [
        ("int8", "pass"),
        (None, "reference"),
    ]
    # what `ortplug run` serves: the CPU reference, while the int8 variant (lossy, verified on
    # generated inputs) shadows it on real requests; with the checks off, the variant at once
    assert report["chosen"] == 1
    at_once = _cli("verify", str(model), "--json", env={**VNNI, "ORTPLUG_REAL_TRAFFIC_CHECKS": "0"})
    assert json.loads(at_once.stdout)["chosen"] == 0

    strict = _cli("verify", str(model), "--providers", "cpu", "--tolerance", "1e-9,0")
    assert strict.returncode == 1
    assert (
        strict.stdout.count("FAIL") == 2 and "REFERENCE reference (fp32) on [cpu]" in strict.stdout
    )

    served_once_verified = {**VNNI, "ORTPLUG_REAL_TRAFFIC_CHECKS": "0"}
    run = _cli("run", str(model), "--verify", "--repeat", "2", env=served_once_verified)
    assert run.returncode == 0, run.stderr
    assert "verdict   verified variant int8 (int8) on CPUExecutionProvider" in run.stdout
    inspected = _cli("inspect", str(model))
    assert "variant    int8: mlp.int8.onnx (int8, rtol=0.05 atol=2)" in inspected.stdout


def test_cli_usage_errors_of_verify(tmp_path: Path) -> None:
    model = models.write(tmp_path, "mlp.onnx", mlp_model())
    bad = _cli("verify", str(model), "--tolerance", "0.1")
    assert bad.returncode == 2 and "expected RTOL,ATOL" in bad.stderr
    lone = _cli("verify", str(model), "--variant", "int8")
    assert lone.returncode == 2 and "--variant: expected with --providers" in lone.stderr


def test_no_warning_without_variants(vnni) -> None:
    """A checkpoint without variants builds as before: nothing verified, nothing warned."""
    from ortplug import InMemoryCheckpoint

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backend = OnnxBackend.from_checkpoint(
            InMemoryCheckpoint(mlp_model()).resolve(), plugins=vnni
        )
    assert backend.report.verification is None and backend.metadata.variants == ()
