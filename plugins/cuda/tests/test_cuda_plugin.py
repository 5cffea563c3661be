"""The cuda plugin: exact option serialization, validation, the driver probe, preloading."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ortplug import PluginHost, parse_provider, preload_runtime_libraries
from ortplug_cuda import CudaProvider, nvidia_library_dirs
from ortplug_cuda.probes import detect_cuda

QUERY = Path(sys.modules["ortplug_cuda"].__file__).with_name("_nvquery.py")


def test_defaults_send_only_the_device() -> None:
    assert CudaProvider().to_ort() == ("CUDAExecutionProvider", {"device_id": "0"})


def test_every_option_has_its_onnxruntime_name_and_string_value() -> None:
    config = CudaProvider(
        device_id=1,
        gpu_mem_limit=2 * 1024**3,
        arena_extend_strategy="same_as_requested",
        cudnn_conv_algo_search="heuristic",
        do_copy_in_default_stream=True,
        cudnn_conv_use_max_workspace=False,
        cudnn_conv1d_pad_to_nc1d=True,
        enable_cuda_graph=True,
        use_tf32=False,
        prefer_nhwc=True,
        use_ep_level_unified_stream=False,
        enable_skip_layer_norm_strict_mode=True,
        tunable_op_enable=True,
        tunable_op_tuning_enable=False,
        tunable_op_max_tuning_duration_ms=500,
        user_compute_stream=140234,
    )
    assert config.to_ort() == (
        "CUDAExecutionProvider",
        {
            "device_id": "1",
            "gpu_mem_limit": "2147483648",
            "arena_extend_strategy": "kSameAsRequested",
            "cudnn_conv_algo_search": "HEURISTIC",
            "do_copy_in_default_stream": "1",
            "cudnn_conv_use_max_workspace": "0",
            "cudnn_conv1d_pad_to_nc1d": "1",
            "enable_cuda_graph": "1",
            "use_tf32": "0",
            "prefer_nhwc": "1",
            "use_ep_level_unified_stream": "0",
            "enable_skip_layer_norm_strict_mode": "1",
            "tunable_op_enable": "1",
            "tunable_op_tuning_enable": "0",
            "tunable_op_max_tuning_duration_ms": "500",
            "has_user_compute_stream": "1",
            "user_compute_stream": "140234",
        },
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"cudnn_conv_algo_search": "FAST"},
            "cudnn_conv_algo_search: expected one of EXHAUSTIVE, HEURISTIC, DEFAULT, got 'FAST'",
        ),
        (
            {"arena_extend_strategy": "grow"},
            "arena_extend_strategy: expected one of kNextPowerOfTwo, kSameAsRequested",
        ),
        ({"device_id": -1}, "device_id: expected an integer >= 0"),
        ({"gpu_mem_limit": 0}, "gpu_mem_limit: expected an integer >= 1"),
        ({"use_tf32": "yes"}, "use_tf32: expected true, false or null, got 'yes'"),
        ({"enable_cuda_graph": 1}, "enable_cuda_graph: expected true, false or null"),
    ],
)
def test_bad_values_are_rejected_naming_the_field(all_plugins, fields, message) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_provider({"kind": "cuda", **fields}, plugins=all_plugins)


def test_unknown_options_are_rejected_with_the_allowed_names(all_plugins) -> None:
    with pytest.raises(
        ValueError,
        match=r"provider 'cuda': unknown option\(s\) \['cudnn_algo'\]; allowed: device_id, gpu_mem_limit",
    ):
        parse_provider({"kind": "cuda", "cudnn_algo": "DEFAULT"}, plugins=all_plugins)


def test_gpu_alias_and_ort_name_parse_to_cuda(all_plugins) -> None:
    assert parse_provider("gpu", plugins=all_plugins) == CudaProvider()
    assert parse_provider("CUDAExecutionProvider", plugins=all_plugins) == CudaProvider()


def test_driver_query_reports_a_missing_driver_instead_of_crashing() -> None:
    answer = detect_cuda()  # this machine has no NVIDIA driver
    assert "libcuda.so.1" in answer["driver_error"]
    assert answer["device_count"] == 0
    assert answer["ort_cuda_version"] is None  # the CPU wheel is built without CUDA


def _query(argument: dict) -> dict:
    out = subprocess.run(
        [sys.executable, "-I", str(QUERY), json.dumps(argument)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return json.loads(out.stdout)


def test_library_dirs_are_searched_before_the_system_loader(tmp_path) -> None:
    (tmp_path / "libcudart.so.12").write_bytes(b"not a shared object")
    (tmp_path / "libcudnn.so.9").write_bytes(b"not a shared object")
    answer = _query({"cuda_major": 12, "library_dirs": [str(tmp_path)]})
    assert "CUDA 12 runtime:" in answer["library_error"]
    assert "cuDNN 9:" in answer["library_error"]
    assert str(tmp_path) in answer["library_error"]  # the file in our folder was tried


def test_runtime_library_version_is_read_when_it_loads() -> None:
    # This machine has the CUDA 13 toolkit's libcudart (no driver, no cuDNN).
    answer = _query({"cuda_major": 13, "library_dirs": []})
    if "cuda_runtime_version" in answer:
        assert answer["cuda_runtime_version"].startswith("13.")
        assert answer["libraries"]["cudart"].endswith("libcudart.so.13")
    else:
        assert "CUDA 13 runtime: libcudart.so.13" in answer["library_error"]


def test_nvidia_wheel_folders_are_found_in_the_search_path(tmp_path) -> None:
    for folder in ("nvidia/cudnn/lib", "nvidia/cu13/lib", "nvidia/unrelated/lib"):
        (tmp_path / folder).mkdir(parents=True)
    assert nvidia_library_dirs([str(tmp_path), str(tmp_path / "missing")]) == [
        str(tmp_path / "nvidia/cu13/lib"),
        str(tmp_path / "nvidia/cudnn/lib"),
    ]


def test_preload_runs_once_and_captures_what_onnxruntime_prints(monkeypatch, capsys) -> None:
    import onnxruntime

    calls = []

    def noisy_preload(directory=None):
        calls.append(directory)
        print("Failed to load libcudnn.so.9 (pretend)")

    monkeypatch.setattr(onnxruntime, "preload_dlls", noisy_preload)
    assert "libcudnn.so.9" in preload_runtime_libraries("/opt/pretend")
    assert preload_runtime_libraries("/opt/pretend") == ""  # once per directory
    assert calls == ["/opt/pretend"]
    assert capsys.readouterr().out == ""  # nothing leaked to stdout


def test_preloading_with_the_real_cpu_wheel_is_quiet() -> None:
    assert preload_runtime_libraries("") == ""


def test_prepare_preloads_only_for_cuda_configs(
    monkeypatch, all_plugins: PluginHost, cpu_host
) -> None:
    import models
    from ortplug import InMemoryCheckpoint
    from ortplug_cpu import CpuProvider

    seen = []
    monkeypatch.setattr("ortplug_cuda.plugin.preload_runtime_libraries", seen.append)
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    assert all_plugins.prepare_provider(
        CudaProvider(dll_directory="/d"), checkpoint, cpu_host
    ) == CudaProvider(dll_directory="/d")
    all_plugins.prepare_provider(CudaProvider(preload_dlls=False), checkpoint, cpu_host)
    all_plugins.prepare_provider(CpuProvider(), checkpoint, cpu_host)
    assert seen == ["/d"]
