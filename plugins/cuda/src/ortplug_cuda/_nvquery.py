"""Ask the NVIDIA driver and the CUDA libraries what they offer, through ctypes only.

Run in a child interpreter by ``probes.py`` (``python -I _nvquery.py '<json>'``)
because loading a driver can hang or crash; prints one JSON object. The
argument names ``cuda_major`` (the CUDA major the ONNX Runtime build needs, or
null) and ``library_dirs`` (absolute folders of the nvidia-* wheels, searched first;
relative ones are ignored; ``run_probe_script`` drops relative ``LD_LIBRARY_PATH`` entries).
Standard library only: this file is not imported as part of the package.
"""

import ctypes
import json
import os
import sys
from typing import Any

_CC_MAJOR, _CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
_WINDOWS = sys.platform == "win32"


def _load(
    linux_name: str, windows_name: str, dirs: list[str]
) -> tuple[Any, str | None, str | None]:
    """The library, from ``dirs`` first then the system loader: (lib, path, errors).

    Only absolute folders are tried: a relative one would resolve against the current directory.
    """
    name = windows_name if _WINDOWS else linux_name
    errors = []
    for folder in [*(d for d in dirs if os.path.isabs(d)), None]:
        path = os.path.join(folder, name) if folder else name
        if folder and not os.path.isfile(path):
            continue
        try:
            return ctypes.CDLL(path), path, None
        except OSError as exc:
            errors.append(str(exc))
    return None, None, " / ".join(errors) or f"{name} not found"


def _driver() -> dict[str, Any]:
    lib, _, error = _load("libcuda.so.1", "nvcuda.dll", [])
    if lib is None:
        return {"driver_error": f"NVIDIA driver library not loadable ({error})"}
    status = lib.cuInit(0)
    if status != 0:
        meaning = {100: "no CUDA-capable device", 999: "unknown error"}.get(status, "see cuda.h")
        return {"driver_error": f"cuInit failed with CUDA error {status} ({meaning})"}
    version, count = ctypes.c_int(), ctypes.c_int()
    lib.cuDriverGetVersion(ctypes.byref(version))
    lib.cuDeviceGetCount(ctypes.byref(count))
    devices = []
    for index in range(count.value):
        device, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        lib.cuDeviceGet(ctypes.byref(device), index)
        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name, 256, device)
        lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, device)
        lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, device)
        memory = ctypes.c_size_t()
        lib.cuDeviceTotalMem_v2(ctypes.byref(memory), device)
        devices.append(
            {
                "index": index,
                "name": name.value.decode(errors="replace"),
                "compute_capability": f"{major.value}.{minor.value}",
                "memory_mib": memory.value // (1 << 20),
            }
        )
    v = version.value
    return {
        "driver_cuda_version": f"{v // 1000}.{v % 1000 // 10}",
        "device_count": count.value,
        "devices": devices,
        "driver_version": _nvml_driver_version(),
    }


def _nvml_driver_version() -> str | None:
    lib, _, _ = _load("libnvidia-ml.so.1", "nvml.dll", [])
    if lib is None or lib.nvmlInit_v2() != 0:
        return None
    buffer = ctypes.create_string_buffer(96)
    ok = lib.nvmlSystemGetDriverVersion(buffer, 96) == 0
    lib.nvmlShutdown()
    return buffer.value.decode() if ok else None


def _libraries(cuda_major: int, dirs: list[str]) -> dict[str, Any]:
    libraries: dict[str, str | None] = {}
    facts: dict[str, Any] = {"libraries": libraries}
    problems = []
    runtime, path, error = _load(f"libcudart.so.{cuda_major}", f"cudart64_{cuda_major}.dll", dirs)
    if runtime is None:
        problems.append(f"CUDA {cuda_major} runtime: {error}")
    else:
        version = ctypes.c_int()
        runtime.cudaRuntimeGetVersion(ctypes.byref(version))
        facts["cuda_runtime_version"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
        libraries["cudart"] = path
    cudnn, path, error = _load("libcudnn.so.9", "cudnn64_9.dll", dirs)
    if cudnn is None:
        problems.append(f"cuDNN 9: {error}")
    else:
        cudnn.cudnnGetVersion.restype = ctypes.c_size_t
        v = cudnn.cudnnGetVersion()
        facts["cudnn_version"] = f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
        libraries["cudnn"] = path
    if problems:
        facts["library_error"] = "; ".join(problems)
    return facts


def main(argument: dict[str, Any]) -> dict[str, Any]:
    facts = _driver()
    if argument.get("cuda_major"):
        facts.update(_libraries(argument["cuda_major"], argument.get("library_dirs", [])))
    return facts


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
