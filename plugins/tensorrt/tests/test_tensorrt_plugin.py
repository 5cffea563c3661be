"""The tensorrt plugin: options, profile shapes, keyed engine caches, build notices and limits."""

from __future__ import annotations

import logging
from pathlib import Path

import attrs
import hosts
import models
import pytest
from ortplug import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    OnnxBackend,
    SessionOptionsConfig,
    parse_provider,
)
from ortplug_cpu import CpuProvider
from ortplug_tensorrt import TensorrtProvider, engine_cache_key, profiles_from_ranges
from ortplug_tensorrt.probes import detect_tensorrt, tensorrt_library_dirs

HOST = hosts.linux_gpu_tensorrt()


def _dynamic_checkpoint(extra: dict | None = None):
    checkpoint = InMemoryCheckpoint(models.matmul_model()).resolve()  # x: [batch, 4]
    if extra is not None:
        metadata = attrs.evolve(checkpoint.metadata, extra=extra)
        checkpoint = attrs.evolve(checkpoint, metadata=metadata)
    return checkpoint


def test_every_option_has_its_onnxruntime_name_and_string_value() -> None:
    config = TensorrtProvider(
        device_id=1,
        fp16=True,
        bf16=False,
        int8=True,
        int8_calibration_table_name="calib.flatbuffers",
        int8_use_native_calibration_table=False,
        max_workspace_size=4 << 30,
        builder_optimization_level=5,
        min_subgraph_size=3,
        op_types_to_exclude="Loop, NonMaxSuppression",
        engine_cache_path="/c/engines",
        timing_cache_path="/c/timing",
        profile_min_shapes="x:1x4",
        profile_opt_shapes="x:8x4",
        profile_max_shapes="x:32x4",
        dump_ep_context_model=True,
        ep_context_file_path="/c/ctx.onnx",
        ep_context_embed_mode=0,
        cuda_graph=True,
        detailed_build_log=False,
    )
    assert config.to_ort() == (
        "TensorrtExecutionProvider",
        {
            "device_id": "1",
            "trt_fp16_enable": "1",
            "trt_bf16_enable": "0",
            "trt_int8_enable": "1",
            "trt_int8_calibration_table_name": "calib.flatbuffers",
            "trt_int8_use_native_calibration_table": "0",
            "trt_max_workspace_size": str(4 << 30),
            "trt_builder_optimization_level": "5",
            "trt_min_subgraph_size": "3",
            "trt_op_types_to_exclude": "Loop,NonMaxSuppression",
            "trt_engine_cache_enable": "1",
            "trt_engine_cache_path": "/c/engines",
            "trt_timing_cache_enable": "1",
            "trt_timing_cache_path": "/c/timing",
            "trt_profile_min_shapes": "x:1x4",
            "trt_profile_opt_shapes": "x:8x4",
            "trt_profile_max_shapes": "x:32x4",
            "trt_dump_ep_context_model": "1",
            "trt_ep_context_file_path": "/c/ctx.onnx",
            "trt_ep_context_embed_mode": "0",
            "trt_cuda_graph_enable": "1",
            "trt_detailed_build_log": "0",
        },
    )


def test_caches_are_on_by_default_and_can_be_switched_off() -> None:
    assert TensorrtProvider().to_ort()[1] == {
        "device_id": "0",
        "trt_engine_cache_enable": "1",
        "trt_timing_cache_enable": "1",
    }
    off = TensorrtProvider(engine_cache=False, engine_cache_path="/x", timing_cache=False)
    assert off.to_ort()[1] == {
        "device_id": "0",
        "trt_engine_cache_enable": "0",
        "trt_timing_cache_enable": "0",
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"builder_optimization_level": 6}, "builder_optimization_level: expected an integer 0..5"),
        ({"profile_min_shapes": "x:1x4"}, "give all three or none"),
        (
            {
                "profile_min_shapes": "x:1x4",
                "profile_opt_shapes": "x:8x4",
                "profile_max_shapes": "x=32x4",
            },
            "profile_max_shapes: expected 'input:1x3x224x224' items",
        ),
        (
            {
                "profile_min_shapes": "x:9x4",
                "profile_opt_shapes": "x:8x4",
                "profile_max_shapes": "x:32x4",
            },
            "expected min <= opt <= max",
        ),
        (
            {
                "profile_min_shapes": "x:1x4",
                "profile_opt_shapes": "y:8x4",
                "profile_max_shapes": "x:32x4",
            },
            "must list the same inputs",
        ),
        (
            {
                "profile_min_shapes": "x:1",
                "profile_opt_shapes": "x:8x4",
                "profile_max_shapes": "x:32x4",
            },
            "ranks differ",
        ),
        (
            {
                "profile_min_shapes": "x:1x4,x:2x4",
                "profile_opt_shapes": "x:8x4",
                "profile_max_shapes": "x:32x4",
            },
            "listed twice",
        ),
        (
            {"op_types_to_exclude": ["Loop", "not an op"]},
            "op_types_to_exclude: expected ONNX op type names",
        ),
        ({"build_timeout_s": 0}, "build_timeout_s: expected a positive number of seconds"),
        ({"ep_context_embed_mode": 2}, "ep_context_embed_mode: expected an integer 0..1"),
    ],
)
def test_bad_values_are_rejected_naming_the_field(all_plugins, fields, message) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_provider({"kind": "tensorrt", **fields}, plugins=all_plugins)


def test_profiles_come_from_metadata_dim_ranges() -> None:
    shapes = {"x": ("batch", 3, "size", "size"), "mask": ("batch", 77), "scale": (1,)}
    low, mid, high = profiles_from_ranges(shapes, {"batch": [1, 8, 32], "size": [224, 224, 512]})
    assert low == {"x": (1, 3, 224, 224), "mask": (1, 77)}
    assert mid == {"x": (8, 3, 224, 224), "mask": (8, 77)}
    assert high == {"x": (32, 3, 512, 512), "mask": (32, 77)}
    assert profiles_from_ranges(shapes, {"batch": [1, 8, 32]}) is None  # 'size' unknown
    assert profiles_from_ranges({"x": (1, 4)}, {}) is None  # nothing dynamic


def test_prepare_derives_profiles_and_keyed_cache_dirs(all_plugins, _private_cache) -> None:
    checkpoint = _dynamic_checkpoint({"dim_ranges": {"batch": [1, 16, 64]}})
    prepared = all_plugins.prepare_provider(TensorrtProvider(), checkpoint, HOST)
    assert (
        prepared.profile_min_shapes,
        prepared.profile_opt_shapes,
        prepared.profile_max_shapes,
    ) == (
        "x:1x4",
        "x:16x4",
        "x:64x4",
    )
    engines = Path(prepared.engine_cache_path)
    assert engines.is_dir() and engines.parent == _private_cache / "tensorrt" / "engines"
    assert engines.name == engine_cache_key(prepared, checkpoint, HOST)
    assert (
        Path(prepared.timing_cache_path)
        == _private_cache / "tensorrt" / "timing" / "trt10.13.3-sm8.9"
    )
    # the same inputs give the same directory
    assert all_plugins.prepare_provider(TensorrtProvider(), checkpoint, HOST) == prepared


def test_engine_and_timing_folders_describe_themselves_for_ortplug_cache(
    all_plugins, _private_cache
) -> None:
    from ortplug.cache.index import entries

    checkpoint = _dynamic_checkpoint({"dim_ranges": {"batch": [1, 16, 64]}})
    prepared = all_plugins.prepare_provider(TensorrtProvider(), checkpoint, HOST)
    listed = {entry.path: entry for entry in entries(_private_cache)}
    engine = listed[Path(prepared.engine_cache_path)]
    assert (engine.kind, engine.model, engine.ort_version) == (
        "TensorRT engine",
        checkpoint.label,
        HOST.ort_version,
    )
    assert listed[Path(prepared.timing_cache_path)].kind == "TensorRT timing cache"


def test_cache_key_changes_with_model_runtime_tensorrt_gpu_and_options() -> None:
    checkpoint = _dynamic_checkpoint()
    base = engine_cache_key(TensorrtProvider(), checkpoint, HOST)
    assert engine_cache_key(TensorrtProvider(), checkpoint, HOST) == base
    other_model = InMemoryCheckpoint(models.matmul_model(static=True)).resolve()
    newer_ort = attrs.evolve(HOST, ort_version="1.32.0")
    facts = {k: dict(v) for k, v in HOST.facts.items()}
    facts["tensorrt"]["version"] = "10.14.1"
    newer_trt = attrs.evolve(HOST, facts=facts)
    facts = {k: dict(v) for k, v in HOST.facts.items()}
    facts["cuda"]["devices"] = [{**hosts.L4, "compute_capability": "9.0"}]
    hopper = attrs.evolve(HOST, facts=facts)
    variants = {
        engine_cache_key(TensorrtProvider(), other_model, HOST),
        engine_cache_key(TensorrtProvider(), checkpoint, newer_ort),
        engine_cache_key(TensorrtProvider(), checkpoint, newer_trt),
        engine_cache_key(TensorrtProvider(), checkpoint, hopper),
        engine_cache_key(TensorrtProvider(fp16=True), checkpoint, HOST),
    }
    assert base not in variants and len(variants) == 5
    # paths and logging do not change what is built
    assert (
        engine_cache_key(
            TensorrtProvider(engine_cache_path="/elsewhere", detailed_build_log=True),
            checkpoint,
            HOST,
        )
        == base
    )


def test_given_profiles_must_cover_every_dynamic_input(all_plugins) -> None:
    checkpoint = _dynamic_checkpoint()
    incomplete = TensorrtProvider(
        profile_min_shapes="y:1x4", profile_opt_shapes="y:8x4", profile_max_shapes="y:32x4"
    )
    with pytest.raises(ValueError, match=r"missing \['x'\], not inputs \['y'\]"):
        all_plugins.prepare_provider(incomplete, checkpoint, HOST)
    # and the same error reaches a user who builds a backend with it
    with pytest.raises(ValueError, match=r"every dynamic input must be listed"):
        OnnxBackend.from_checkpoint(checkpoint, providers=[incomplete, "cpu"], plugins=all_plugins)


def test_bad_dim_ranges_in_metadata_are_named(all_plugins) -> None:
    checkpoint = _dynamic_checkpoint({"dim_ranges": {"batch": [8, 1, 32]}})
    with pytest.raises(
        ValueError, match=r"extra.dim_ranges\['batch'\]: expected \[min, opt, max\]"
    ):
        all_plugins.prepare_provider(TensorrtProvider(), checkpoint, HOST)


def test_a_cold_engine_build_is_announced(all_plugins, caplog) -> None:
    checkpoint = _dynamic_checkpoint()
    with caplog.at_level(logging.WARNING, logger="ortplug.tensorrt"):
        prepared = all_plugins.prepare_provider(TensorrtProvider(), checkpoint, HOST)
    assert "building TensorRT engine for <model bytes>: this can take minutes" in caplog.text
    (Path(prepared.engine_cache_path) / "TensorrtExecutionProvider_0_sm89.engine").write_bytes(b"x")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ortplug.tensorrt"):
        all_plugins.prepare_provider(TensorrtProvider(), checkpoint, HOST)
    assert "building TensorRT engine" not in caplog.text


def test_build_timeout_becomes_the_session_load_timeout(all_plugins) -> None:
    meta = CheckpointMetadata(input_names=["x"], output_names=["y"])
    chain = [TensorrtProvider(build_timeout_s=600), CpuProvider()]
    options = all_plugins.adjust_session_options(SessionOptionsConfig(), chain, meta, HOST)
    assert options.load_timeout_s == 600
    mine = SessionOptionsConfig(load_timeout_s=30)
    assert all_plugins.adjust_session_options(mine, chain, meta, HOST).load_timeout_s == 30


def test_probe_reports_why_libnvinfer_does_not_load() -> None:
    answer = detect_tensorrt()  # this machine has no TensorRT
    assert answer["library_error"].startswith("TensorRT 10 library not loadable (")
    assert "libnvinfer.so.10" in answer["library_error"]


def test_tensorrt_wheel_folders_are_searched(tmp_path) -> None:
    (tmp_path / "tensorrt_libs").mkdir()
    assert tensorrt_library_dirs([str(tmp_path), str(tmp_path / "none")]) == [
        str(tmp_path / "tensorrt_libs")
    ]


def test_an_unusable_cache_dir_is_reported_before_any_build(
    all_plugins, monkeypatch, tmp_path
) -> None:
    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("")
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(blocker))
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    with pytest.raises(OSError, match=r"set ORTPLUG_CACHE_DIR to a writable directory"):
        OnnxBackend.from_checkpoint(checkpoint, providers=["tensorrt", "cpu"], plugins=all_plugins)
    # the policy itself keeps working: no cached engine can be found there
    host = HOST
    from ortplug import DefaultProviderPolicy

    assert DefaultProviderPolicy(all_plugins).select(checkpoint.metadata, host)[0].kind == "cuda"


def test_a_user_engine_folder_that_does_not_exist_yet_is_a_cold_build(
    all_plugins, caplog, tmp_path
) -> None:
    checkpoint = _dynamic_checkpoint()
    mine = TensorrtProvider(engine_cache_path=str(tmp_path / "engines" / "new"))
    with caplog.at_level(logging.WARNING, logger="ortplug.tensorrt"):
        prepared = all_plugins.prepare_provider(mine, checkpoint, HOST)
    assert prepared.engine_cache_path == str(
        tmp_path / "engines" / "new"
    )  # the user's path is kept
    assert "building TensorRT engine" in caplog.text


def test_fp16_kernels_are_their_own_candidate_on_fp32(all_plugins, monkeypatch) -> None:
    from ortplug import DefaultProviderPolicy
    from ortplug_tensorrt.plugin import FP16_PREFERENCE, PREFERENCE

    monkeypatch.setenv("ORTPLUG_TENSORRT", "1")
    metadata = CheckpointMetadata(input_names=["x"], output_names=["y"], static_shapes=True)
    selection = DefaultProviderPolicy(all_plugins).explain(metadata, HOST)
    assert [c.kind for c in selection.chain] == ["tensorrt", "cuda", "cpu"]
    assert selection.precision is None and "trt_fp16_enable" not in selection.chain[0].to_ort()[1]
    (fp16,) = [a for a in selection.alternatives if a.precision == "fp16"]
    assert [c.kind for c in fp16.chain] == ["tensorrt", "cpu"]
    assert fp16.chain[0].to_ort()[1]["trt_fp16_enable"] == "1"
    assert "fp16 kernels allowed" in fp16.reasons[0] and PREFERENCE > FP16_PREFERENCE
    fp16_weights = attrs.evolve(metadata, precision="fp16")  # fp16 already: no mode to offer
    selection = DefaultProviderPolicy(all_plugins).explain(fp16_weights, HOST)
    assert all(a.precision is None for a in selection.alternatives)
