"""Ask Vulkan which adapters Dawn can see, and Dawn (through the WebGPU EP) whether one works.

Run in a child interpreter by ``probes.py`` (``python -I _adapterquery.py '<json>'``)
because a broken GPU driver can hang or crash the process that loads it;
prints one JSON object. The argument's ``phase`` is either

* ``"vulkan"`` — load the Vulkan loader with ctypes and list its physical
  devices (what Dawn's Vulkan backend enumerates on Linux): name, vendor,
  type (discrete, integrated, virtual, cpu), API version, driver name/info;
* ``"dawn"`` — register the ``onnxruntime-ep-webgpu`` library with software
  adapters allowed (in this child only), list the devices it offers, then
  build and run a one-node session, which is where Dawn picks its adapter and
  fails when no adapter works (``EP_FAIL ... No supported adapters``).
  ``shader_cache_dir`` (optional) becomes ``MESA_SHADER_CACHE_DIR`` unless set.

Standard library only, plus onnxruntime in the ``dawn`` phase: this file is
not imported as part of the package.
"""

import ctypes
import json
import os
import sys
from typing import Any

_VK_SUCCESS = 0
_VK_INCOMPLETE = 5
_VK_RESULTS = {
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
    -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED",
    -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver found)",
}
_TYPES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
_VENDORS = {
    0x1002: "AMD",
    0x1010: "ImgTec",
    0x106B: "Apple",
    0x10DE: "NVIDIA",
    0x13B5: "ARM",
    0x14E4: "Broadcom",
    0x1AE0: "Google",
    0x5143: "Qualcomm",
    0x8086: "Intel",
    0x10005: "Mesa",
}
_STYPE_PROPERTIES_2 = 1000059001
_STYPE_DRIVER_PROPERTIES = 1000196000


class _AppInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_uint32),
        ("pNext", ctypes.c_void_p),
        ("pApplicationName", ctypes.c_char_p),
        ("applicationVersion", ctypes.c_uint32),
        ("pEngineName", ctypes.c_char_p),
        ("engineVersion", ctypes.c_uint32),
        ("apiVersion", ctypes.c_uint32),
    ]


class _InstanceInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_uint32),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.POINTER(_AppInfo)),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.c_void_p),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.c_void_p),
    ]


class _Properties(ctypes.Structure):
    """The head of VkPhysicalDeviceProperties, padded past its full size (824 bytes)."""

    _fields_ = [
        ("apiVersion", ctypes.c_uint32),
        ("driverVersion", ctypes.c_uint32),
        ("vendorID", ctypes.c_uint32),
        ("deviceID", ctypes.c_uint32),
        ("deviceType", ctypes.c_int32),
        ("deviceName", ctypes.c_char * 256),
        ("rest", ctypes.c_uint8 * 1024),
    ]


class _DriverProperties(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_uint32),
        ("pNext", ctypes.c_void_p),
        ("driverID", ctypes.c_uint32),
        ("driverName", ctypes.c_char * 256),
        ("driverInfo", ctypes.c_char * 256),
        ("conformanceVersion", ctypes.c_uint8 * 4),
    ]


class _Properties2(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_uint32),
        ("pNext", ctypes.c_void_p),
        ("properties", _Properties),
    ]


def _version(packed: int) -> str:
    return f"{(packed >> 22) & 0x7F}.{(packed >> 12) & 0x3FF}.{packed & 0xFFF}"


def _make_version(major: int, minor: int) -> int:
    return (major << 22) | (minor << 12)


def _loader() -> tuple[Any, str | None, str | None]:
    names = {
        "win32": ["vulkan-1.dll"],
        "darwin": ["libvulkan.1.dylib", "libMoltenVK.dylib"],
    }.get(sys.platform, ["libvulkan.so.1", "libvulkan.so"])
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name), name, None
        except OSError as exc:
            errors.append(str(exc))
    return None, None, " / ".join(errors)


def _driver_properties(lib: Any, device: ctypes.c_void_p) -> dict[str, str]:
    query = getattr(lib, "vkGetPhysicalDeviceProperties2", None)
    if query is None:
        return {}
    driver = _DriverProperties(sType=_STYPE_DRIVER_PROPERTIES)
    both = _Properties2(sType=_STYPE_PROPERTIES_2, pNext=ctypes.addressof(driver))
    query.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Properties2)]
    query(device, ctypes.byref(both))
    return {
        "driver": driver.driverName.decode(errors="replace"),
        "driver_info": driver.driverInfo.decode(errors="replace"),
    }


def _vulkan() -> dict[str, Any]:
    lib, name, error = _loader()
    if lib is None:
        return {"vulkan_loader": None, "vulkan_error": f"no Vulkan loader ({error})"}
    api = _make_version(1, 0)
    enumerate_version = getattr(lib, "vkEnumerateInstanceVersion", None)
    if enumerate_version is not None:
        supported = ctypes.c_uint32()
        if enumerate_version(ctypes.byref(supported)) == _VK_SUCCESS:
            api = min(supported.value, _make_version(1, 2))
    app = _AppInfo(sType=0, pApplicationName=b"ortplug-webgpu-probe", apiVersion=api)
    info = _InstanceInfo(sType=1, pApplicationInfo=ctypes.pointer(app))
    instance = ctypes.c_void_p()
    lib.vkCreateInstance.argtypes = [
        ctypes.POINTER(_InstanceInfo),
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p),
    ]
    status = lib.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance))
    facts: dict[str, Any] = {"vulkan_loader": name, "vulkan_api": _version(api), "adapters": []}
    if status != _VK_SUCCESS:
        facts["vulkan_error"] = f"vkCreateInstance failed: {_VK_RESULTS.get(status, status)}"
        return facts
    try:
        lib.vkEnumeratePhysicalDevices.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_uint32),
            ctypes.c_void_p,
        ]
        count = ctypes.c_uint32()
        lib.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        devices = (ctypes.c_void_p * count.value)()
        status = lib.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), devices)
        if status not in (_VK_SUCCESS, _VK_INCOMPLETE):
            facts["vulkan_error"] = (
                f"vkEnumeratePhysicalDevices failed: {_VK_RESULTS.get(status, status)}"
            )
        lib.vkGetPhysicalDeviceProperties.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Properties)]
        for device in list(devices)[: count.value]:
            props = _Properties()
            lib.vkGetPhysicalDeviceProperties(device, ctypes.byref(props))
            adapter = {
                "name": props.deviceName.decode(errors="replace"),
                "vendor": _VENDORS.get(props.vendorID, f"0x{props.vendorID:04x}"),
                "vendor_id": props.vendorID,
                "device_id": props.deviceID,
                "type": _TYPES.get(props.deviceType, "other"),
                "backend": "Vulkan",
                "api_version": _version(props.apiVersion),
            }
            if api >= _make_version(1, 1) and props.apiVersion >= _make_version(1, 2):
                adapter.update(_driver_properties(lib, device))
            facts["adapters"].append(adapter)
    finally:
        lib.vkDestroyInstance.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.vkDestroyInstance(instance, None)
    return facts


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _relu_model() -> bytes:
    """ONNX bytes of ``Y = Relu(X)``, X float[4] (opset 17), hand-encoded: no onnx package here."""

    def value_info(name: bytes) -> bytes:
        shape = _field(2, _field(1, _field(1, 4)))  # TensorShapeProto{dim{dim_value: 4}}
        tensor = _field(1, 1) + _field(2, shape)  # elem_type FLOAT, shape
        return _field(1, name) + _field(2, _field(1, tensor))

    node = _field(1, b"X") + _field(2, b"Y") + _field(4, b"Relu")
    graph = _field(1, node) + _field(2, b"probe") + _field(11, value_info(b"X"))
    graph += _field(12, value_info(b"Y"))
    opset = _field(1, b"") + _field(2, 17)
    return _field(1, 8) + _field(7, graph) + _field(8, opset)


def _short_error(exc: Exception) -> str:
    """ONNX Runtime's first error line without its source locations (``EP_FAIL: Failed to ...``)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    code = next((c for c in ("EP_FAIL", "FAIL", "INVALID_ARGUMENT") if f" {c} " in text), None)
    if " was false. " in text:
        text = text.rsplit(" was false. ", 1)[1]
    return f"{code}: {text}"[:400] if code else text[:400]


def _dawn(argument: dict[str, Any]) -> dict[str, Any]:
    os.environ["ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER"] = "1"  # this child only
    cache = argument.get("shader_cache_dir")
    if cache and not os.environ.get("MESA_SHADER_CACHE_DIR"):
        try:
            os.makedirs(cache, exist_ok=True)
            os.environ["MESA_SHADER_CACHE_DIR"] = cache
        except OSError:
            pass  # no cache: Mesa compiles again, nothing worse
    import onnxruntime as ort
    import onnxruntime_ep_webgpu as webgpu

    ort.set_default_logger_severity(3)
    ep_name = webgpu.get_ep_name()
    facts: dict[str, Any] = {"ep_name": ep_name, "ort_version": ort.__version__}
    try:
        ort.register_execution_provider_library("ortplug.webgpu.probe", webgpu.get_library_path())
    except Exception as exc:
        facts["session_error"] = f"the WebGPU EP library does not load: {exc}"
        return facts
    devices = [d for d in ort.get_ep_devices() if d.ep_name == ep_name]
    facts["ort_devices"] = [
        {
            "type": str(d.device.type).rpartition(".")[2],
            "vendor": str(d.device.vendor),
            "vendor_id": int(d.device.vendor_id),
        }
        for d in devices
    ]
    if devices:
        facts["ep_version"] = dict(devices[0].ep_metadata).get("version")
    else:
        facts["session_error"] = f"{ep_name} offers no device even with software adapters allowed"
        return facts
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.add_provider_for_devices(devices[:1], {})
    try:
        session = ort.InferenceSession(_relu_model(), sess_options=options)
        import numpy as np

        given = np.array([-1.0, 2.0, -3.0, 4.0], np.float32)
        (result,) = session.run(None, {"X": given})
    except Exception as exc:
        facts["session_error"] = _short_error(exc)
        return facts
    if session.get_providers()[0] != ep_name or result.tolist() != [0.0, 2.0, 0.0, 4.0]:
        facts["session_error"] = f"a one-node session did not run on {ep_name}: {result.tolist()}"
    return facts


def main(argument: dict[str, Any]) -> dict[str, Any]:
    if argument.get("phase") == "dawn":
        return _dawn(argument)
    return _vulkan()


if __name__ == "__main__":
    # Native code (Dawn, drivers) may write to fd 1: keep it on stderr so the answer is the
    # last line of stdout.
    sys.stdout.flush()
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    answer = main(json.loads(sys.argv[1]))
    os.write(answer_fd, (json.dumps(answer) + "\n").encode())
