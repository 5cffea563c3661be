"""Integration of the shipped plugins: the default policy with all four, on simulated hosts.

The only core-side tests that import the GPU plugins (they test them together);
each plugin's own tests live beside it in plugins/<name>/tests.
"""

from __future__ import annotations

import hosts
import models
import pytest
from ortplug import (
    CheckpointMetadata,
    DefaultProviderPolicy,
    InMemoryCheckpoint,
    OnnxBackend,
    ProviderFallbackWarning,
    ProviderNotRealizedError,
)
from ortplug_coreml import CoreMLProvider
from ortplug_cpu import CpuProvider
from ortplug_cuda import CudaProvider
from ortplug_tensorrt import TensorrtProvider
from ortplug_tensorrt.engine_cache import engine_cache_key

FP32_DYNAMIC = CheckpointMetadata(input_names=["x"], output_names=["y"])
FP16_STATIC = CheckpointMetadata(
    input_names=["x"], output_names=["y"], precision="fp16", static_shapes=True
)
INT8 = CheckpointMetadata(
    input_names=["x"], output_names=["y"], precision="int8", static_shapes=True
)
CHECKPOINTS = {"fp32-dynamic": FP32_DYNAMIC, "fp16-static": FP16_STATIC, "int8": INT8}

CUDA_DYNAMIC = CudaProvider(cudnn_conv_algo_search="DEFAULT", use_tf32=False)  # exact fp32
CUDA_STATIC = CudaProvider(use_tf32=False)
COREML = CoreMLProvider(
    model_format="MLProgram", compute_units="CPUAndGPU", require_static_input_shapes=True
)
CPU = CpuProvider()

# host -> checkpoint -> expected chain
TABLE = {
    "cpu-only": (hosts.cpu_only, {"fp32-dynamic": [CPU], "fp16-static": [CPU], "int8": [CPU]}),
    "linux-gpu": (
        hosts.linux_gpu,
        {
            "fp32-dynamic": [CUDA_DYNAMIC, CPU],
            "fp16-static": [CUDA_STATIC, CPU],
            "int8": [CPU],
        },
    ),
    "linux-gpu-no-cudnn": (
        hosts.linux_gpu_without_cudnn,
        {"fp32-dynamic": [CPU], "fp16-static": [CPU], "int8": [CPU]},
    ),
    "linux-gpu-tensorrt": (
        hosts.linux_gpu_tensorrt,
        {
            "fp32-dynamic": [CUDA_DYNAMIC, CPU],
            "fp16-static": [CUDA_STATIC, CPU],
            "int8": [CPU],
        },
    ),
    "macos-arm64": (
        lambda: hosts.mac("arm64"),
        {"fp32-dynamic": [CPU], "fp16-static": [COREML, CPU], "int8": [CPU]},
    ),
    "macos-x86_64": (
        lambda: hosts.mac("x86_64"),
        {"fp32-dynamic": [CPU], "fp16-static": [CPU], "int8": [CPU]},
    ),
}
CASES = [(h, c) for h in TABLE for c in CHECKPOINTS]


@pytest.mark.parametrize(("host_name", "checkpoint"), CASES)
def test_policy_table(all_plugins, host_name: str, checkpoint: str) -> None:
    make_host, expected = TABLE[host_name]
    selection = DefaultProviderPolicy(all_plugins).explain(CHECKPOINTS[checkpoint], make_host())
    assert list(selection.chain) == expected[checkpoint]
    assert selection.chain[-1] == CPU  # CPU always last
    for config in selection.chain:
        assert selection.reason_for(config).endswith(f"[{config.kind}]")
    # every provider plugin that is not in the chain says why
    declined = {d.kind for d in selection.declined}
    assert declined == {"cuda", "tensorrt", "coreml"} - {c.kind for c in selection.chain}


def _reasons(all_plugins, metadata, host) -> dict[str, str]:
    selection = DefaultProviderPolicy(all_plugins).explain(metadata, host)
    reasons = {d.kind: d.reason for d in selection.declined}
    reasons.update({c.kind: selection.reason_for(c) for c in selection.chain})
    return reasons


def test_reasons_name_the_deciding_fact(all_plugins) -> None:
    gpu = _reasons(all_plugins, FP32_DYNAMIC, hosts.linux_gpu())
    assert "NVIDIA L4 (cc 8.9, 22 GiB)" in gpu["cuda"]
    assert "cudnn_conv_algo_search=DEFAULT" in gpu["cuda"]
    assert "CoreML runs on macOS only" in gpu["coreml"]
    assert "has no TensorrtExecutionProvider" in gpu["tensorrt"]
    assert "int8 checkpoint" in _reasons(all_plugins, INT8, hosts.linux_gpu())["cuda"]
    assert "cuDNN 9" in _reasons(all_plugins, FP32_DYNAMIC, hosts.linux_gpu_without_cudnn())["cuda"]
    assert (
        "opt in with ORTPLUG_TENSORRT=1"
        in _reasons(all_plugins, FP16_STATIC, hosts.linux_gpu_tensorrt())["tensorrt"]
    )
    mac = _reasons(all_plugins, FP32_DYNAMIC, hosts.mac("arm64"))
    assert "dynamic input shapes" in mac["coreml"]
    assert "CPUAndGPU" in _reasons(all_plugins, FP16_STATIC, hosts.mac("arm64"))["coreml"]
    assert "Intel Mac" in _reasons(all_plugins, FP16_STATIC, hosts.mac("x86_64"))["coreml"]
    cpu_only = _reasons(all_plugins, FP16_STATIC, hosts.cpu_only())
    assert cpu_only["cuda"].startswith("no usable NVIDIA driver: ")
    assert "libcuda.so.1" in cpu_only["cuda"]
    assert "libcuda.so.1" in cpu_only["tensorrt"]
    cpu_wheel = hosts.linux_gpu()
    cpu_wheel = type(cpu_wheel)(
        **{**cpu_wheel.to_dict(), "available_providers": ["CPUExecutionProvider"]}
    )
    assert "has no CUDAExecutionProvider" in _reasons(all_plugins, FP16_STATIC, cpu_wheel)["cuda"]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"driver_cuda_version": "12.4"}, "update the driver"),
        ({"driver_cuda_version": "12.4"}, "core[cuda12]' "),
        ({"devices": [], "visible_devices": ""}, "CUDA_VISIBLE_DEVICES=''"),
        ({"driver_error": "cuInit failed with CUDA error 100"}, "cuInit failed"),
    ],
)
def test_cuda_declines_with_the_fix(all_plugins, changes, expected) -> None:
    reasons = _reasons(all_plugins, FP32_DYNAMIC, hosts.linux_gpu(**changes))
    assert expected in reasons["cuda"]


def test_cuda_picks_the_device_with_the_most_memory(all_plugins) -> None:
    big = {"index": 1, "name": "NVIDIA H200", "compute_capability": "9.0", "memory_mib": 143771}
    host = hosts.linux_gpu(devices=[hosts.L4, big], device_count=2)
    chain = DefaultProviderPolicy(all_plugins).select(FP16_STATIC, host)
    assert chain[0] == CudaProvider(device_id=1, use_tf32=False)


@pytest.mark.parametrize(
    ("opt_in", "metadata", "expected"),
    [
        ("env", FP32_DYNAMIC, [TensorrtProvider(), CUDA_DYNAMIC, CPU]),
        ("extra", FP16_STATIC, [TensorrtProvider(fp16=True), CUDA_STATIC, CPU]),
        ("env", INT8, [TensorrtProvider(int8=True), CPU]),
    ],
)
def test_tensorrt_only_when_opted_in(all_plugins, monkeypatch, opt_in, metadata, expected) -> None:
    if opt_in == "env":
        monkeypatch.setenv("ORTPLUG_TENSORRT", "1")
    else:
        metadata = CheckpointMetadata.from_dict({**metadata.to_dict(), "extra": {"tensorrt": True}})
    selection = DefaultProviderPolicy(all_plugins).explain(metadata, hosts.linux_gpu_tensorrt())
    assert list(selection.chain) == expected
    assert "opted in: TensorRT 10.13.3 on sm 8.9" in selection.reason_for(selection.chain[0])


def test_tensorrt_is_chosen_when_this_models_engine_is_cached(all_plugins, tmp_path) -> None:
    checkpoint = InMemoryCheckpoint(models.matmul_model(static=True)).resolve()
    host = hosts.linux_gpu_tensorrt()
    policy = DefaultProviderPolicy(all_plugins)
    assert policy.select(checkpoint.metadata, host)[0].kind == "cuda"
    prepared = all_plugins.prepare_provider(TensorrtProvider(), checkpoint, host)
    engine_folder = prepared.engine_cache_path
    (tmp_path / "engine").write_bytes(b"")
    assert engine_folder is not None
    (tmp_path / "engine").rename(f"{engine_folder}/TensorrtExecutionProvider_x_sm89.engine")
    selection = policy.explain(checkpoint.metadata, host, checkpoint)
    assert selection.chain[0] == TensorrtProvider()
    assert "engine for this model is cached" in selection.reason_for(selection.chain[0])
    other = InMemoryCheckpoint(models.matmul_model(static=False)).resolve()
    assert policy.select(other.metadata, host)[0].kind == "cuda"
    assert engine_cache_key(TensorrtProvider(), other, host) != engine_cache_key(
        TensorrtProvider(), checkpoint, host
    )


def test_strict_explicit_cuda_chain_raises_on_this_cpu_machine(all_plugins) -> None:
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    with pytest.raises(ProviderNotRealizedError) as caught:
        OnnxBackend.from_checkpoint(checkpoint, providers=["cuda", "cpu"], plugins=all_plugins)
    error = caught.value
    assert isinstance(error, RuntimeError)
    message = str(error)
    assert "CUDAExecutionProvider" in message
    assert "['CPUExecutionProvider']" in message  # the realized chain
    assert "not in available provider names" in message  # ONNX Runtime's cause


def test_the_same_chain_from_the_policy_only_warns(monkeypatch) -> None:
    # Simulate a GPU host through the documented overrides; the real CPU wheel then lacks CUDA.
    from ortplug.testing import make_plugin_host

    overrides = {
        "ORTPLUG_OVERRIDE_AVAILABLE_PROVIDERS": "CUDAExecutionProvider,CPUExecutionProvider",
        "ORTPLUG_OVERRIDE_CUDA_DRIVER_ERROR": "",
        "ORTPLUG_OVERRIDE_CUDA_LIBRARY_ERROR": "",
        "ORTPLUG_OVERRIDE_CUDA_DEVICES": '[{"index": 0, "name": "NVIDIA L4", "compute_capability": "8.9", "memory_mib": 23034}]',
    }
    plugins = make_plugin_host("cuda", "tensorrt", "coreml", environ=overrides)
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    with pytest.warns(ProviderFallbackWarning, match="no accelerator was realized"):
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=plugins)
    assert backend.requested_providers == ("CUDAExecutionProvider", "CPUExecutionProvider")
    assert backend.providers == ("CPUExecutionProvider",)


def test_tensorrt_declines_gpus_older_than_turing(all_plugins, monkeypatch) -> None:
    monkeypatch.setenv("ORTPLUG_TENSORRT", "1")
    host = hosts.linux_gpu_tensorrt()
    facts = {k: dict(v) for k, v in host.facts.items()}
    facts["cuda"]["devices"] = [{**hosts.L4, "name": "Tesla P4", "compute_capability": "6.1"}]
    import attrs

    reasons = _reasons(all_plugins, FP32_DYNAMIC, attrs.evolve(host, facts=facts))
    assert reasons["tensorrt"] == "GPU compute capability 6.1 is below TensorRT 10's minimum 7.5"
