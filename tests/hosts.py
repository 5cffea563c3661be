"""Simulated hosts for policy tests: the facts each plugin's probe would report there."""

from __future__ import annotations

from typing import Any

from ortplug import HostCapabilities

CPU_EP, CUDA_EP, TRT_EP, COREML_EP = (
    "CPUExecutionProvider",
    "CUDAExecutionProvider",
    "TensorrtExecutionProvider",
    "CoreMLExecutionProvider",
)
_CPU_FACTS = {"logical_cpus": 16, "usable_cpus": 16, "isa_flags": ["avx2"]}
_NO_DRIVER = {"driver_error": "NVIDIA driver library not loadable (libcuda.so.1: not found)"}
_NO_TRT = {"library_error": "TensorRT 10 library not loadable (libnvinfer.so.10: not found)"}
_NOT_MAC = {"macos_version": None, "apple_silicon": False, "neural_engine": False}
L4 = {"index": 0, "name": "NVIDIA L4", "compute_capability": "8.9", "memory_mib": 23034}


def cuda_facts(**changes: Any) -> dict[str, Any]:
    """A working CUDA 13 host with one L4 (cc 8.9), then ``changes``."""
    facts: dict[str, Any] = {
        "driver_version": "580.65.06",
        "driver_cuda_version": "13.0",
        "device_count": 1,
        "devices": [L4],
        "visible_devices": None,
        "ort_cuda_version": "13.0",
        "cuda_runtime_version": "13.0",
        "cudnn_version": "9.13.0",
        "libraries": {"cudart": "libcudart.so.13", "cudnn": "libcudnn.so.9"},
        "driver_error": None,
        "library_error": None,
    }
    facts.update(changes)
    return facts


def _host(
    platform: str, machine: str, providers: tuple[str, ...], **facts: Any
) -> HostCapabilities:
    return HostCapabilities(
        platform=platform,
        machine=machine,
        ort_version="1.31.1",
        available_providers=providers,
        facts={"cpu": _CPU_FACTS, **facts},
    )


def cpu_only() -> HostCapabilities:
    return _host("linux", "x86_64", (CPU_EP,), cuda=_NO_DRIVER, tensorrt=_NO_TRT, coreml=_NOT_MAC)


def linux_gpu(**cuda_changes: Any) -> HostCapabilities:
    return _host(
        "linux",
        "x86_64",
        (CUDA_EP, CPU_EP),
        cuda=cuda_facts(**cuda_changes),
        tensorrt=_NO_TRT,
        coreml=_NOT_MAC,
    )


def linux_gpu_without_cudnn() -> HostCapabilities:
    return linux_gpu(
        cudnn_version=None,
        library_error="cuDNN 9: libcudnn.so.9: cannot open shared object file",
    )


def linux_gpu_tensorrt() -> HostCapabilities:
    return _host(
        "linux",
        "x86_64",
        (TRT_EP, CUDA_EP, CPU_EP),
        cuda=cuda_facts(),
        tensorrt={"version": "10.13.3", "library": "libnvinfer.so.10", "library_error": None},
        coreml=_NOT_MAC,
    )


def mac(machine: str) -> HostCapabilities:
    arm = machine == "arm64"
    return _host(
        "darwin",
        machine,
        (COREML_EP, CPU_EP),
        cuda=_NO_DRIVER,
        tensorrt=_NO_TRT,
        coreml={
            "macos_version": "14.5" if arm else "13.6",
            "apple_silicon": arm,
            "neural_engine": arm,
        },
    )
