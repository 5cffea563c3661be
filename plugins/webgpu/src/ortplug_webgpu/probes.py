"""The ``webgpu`` host probe: the adapters Dawn can see, and whether Dawn really runs on one.

Two child interpreters (``_adapterquery.py``) with timeouts, so a broken
driver cannot hang or crash the host process: the first lists the Vulkan
physical devices (on Linux, what Dawn's Vulkan backend enumerates: vendor,
type, driver), the second registers the WebGPU EP with software adapters
allowed (in the child only) and builds and runs a one-node session, the only
place Dawn reveals whether an adapter works. The second is skipped for a
software adapter without the opt-in (the policy declines it anyway). Answers
are kept per process, driver environment (``VK_*``, ``LD_LIBRARY_PATH``) and
opt-in, and across processes by the core, keyed by the identity the package's
``ortplug.json`` declares (ICD files, loaders, driver variables, opt-in, the EP wheel).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ortplug.plugins import pip_install, run_probe_script

from .shader_cache import ep_version, shader_cache_path

__all__ = [
    "ALLOW_SOFTWARE_ENV",
    "ORT_SOFTWARE_ENV",
    "PROBE_TIMEOUT_S",
    "WEBGPU_FACTS",
    "apply_software_opt_in",
    "chosen_adapter",
    "describe_adapter",
    "detect_webgpu",
    "software_allowed",
]

#: ortplug's opt-in for software adapters (lavapipe, SwiftShader, WARP).
ALLOW_SOFTWARE_ENV = "ORTPLUG_WEBGPU_ALLOW_SOFTWARE"
#: The EP's own switch: without it, it offers an ORT device only for GPU-type hardware.
ORT_SOFTWARE_ENV = "ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER"

WEBGPU_FACTS = (
    "backend",
    "vulkan_loader",
    "adapters",
    "adapter",
    "software",
    "usable",
    "error",
    "ep_version",
    "ort_devices",
)
_SCRIPT = Path(__file__).with_name("_adapterquery.py")
_VULKAN_TIMEOUT_S = 15.0
#: A cold first session compiles a shader (lavapipe: well under a second) after Dawn starts.
_DAWN_TIMEOUT_S = 45.0
#: The probe's deadline: both children, with room to spare.
PROBE_TIMEOUT_S = _VULKAN_TIMEOUT_S + _DAWN_TIMEOUT_S + 5
_BACKENDS = {"darwin": "Metal", "win32": "D3D12"}
#: Dawn's order for a high-performance adapter; software last.
_RANK = {"discrete": 0, "integrated": 1, "virtual": 2, "gpu": 2, "other": 3, "cpu": 4}
_TYPE_WORDS = {
    "discrete": "discrete GPU",
    "integrated": "integrated GPU",
    "virtual": "virtual GPU",
    "gpu": "GPU",
    "cpu": "CPU, software",
    "other": "other",
}
#: What decides which Vulkan driver a child sees.
_DRIVER_ENV = (
    "VK_DRIVER_FILES",
    "VK_ICD_FILENAMES",
    "VK_ADD_DRIVER_FILES",
    "VK_LOADER_DRIVERS_SELECT",
    "VK_LOADER_DRIVERS_DISABLE",
    "LD_LIBRARY_PATH",
    "DYLD_LIBRARY_PATH",
)

_lock = threading.Lock()
_answers: dict[tuple[object, ...], dict[str, Any]] = {}


def software_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the user opted in to software adapters (``ORTPLUG_WEBGPU_ALLOW_SOFTWARE=1``)."""
    env = os.environ if environ is None else environ
    return env.get(ALLOW_SOFTWARE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def apply_software_opt_in() -> bool:
    """With the opt-in, set the EP's own switch for this process; whether it is set.

    The EP reads it when its library is registered (once per process), so
    this runs before ortplug registers the library.
    """
    if software_allowed():
        os.environ[ORT_SOFTWARE_ENV] = "1"
    return os.environ.get(ORT_SOFTWARE_ENV) == "1"


def describe_adapter(adapter: Mapping[str, Any] | None) -> str:
    """``llvmpipe (LLVM 15.0.6, 256 bits) (CPU, software; Mesa 25.0.7) on Vulkan``."""
    if not adapter:
        return "no adapter"
    kind = _TYPE_WORDS.get(str(adapter.get("type")), str(adapter.get("type")))
    details = [kind, str(adapter.get("driver_info") or adapter.get("vendor") or "")]
    name = adapter.get("name") or f"{adapter.get('vendor', 'unknown')} adapter"
    return f"{name} ({'; '.join(d for d in details if d)}) on {adapter.get('backend', '?')}"


def chosen_adapter(adapters: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The adapter Dawn picks by default (high-performance): discrete, integrated, ..., software."""
    if not adapters:
        return None
    return min(adapters, key=lambda a: _RANK.get(str(a.get("type")), 3))


def _missing_package() -> str | None:
    for module, distribution in (
        ("onnxruntime", "onnxruntime"),
        ("onnxruntime_ep_webgpu", "onnxruntime-ep-webgpu"),
    ):
        if importlib.util.find_spec(module) is None:
            return f"{distribution} is not installed; {pip_install('ortplug[webgpu]')}"
    return None


def _vulkan_facts(facts: dict[str, Any]) -> bool:
    """Fill the Vulkan facts; whether Dawn has an adapter to try."""
    answer = run_probe_script(_SCRIPT, {"phase": "vulkan"}, timeout=_VULKAN_TIMEOUT_S)
    if "error" in answer:
        facts["error"] = f"the Vulkan query failed: {answer['error']}"
        return False
    facts["vulkan_loader"] = answer.get("vulkan_loader")
    facts["adapters"] = list(answer.get("adapters") or [])
    if facts["vulkan_loader"] is None:
        facts["error"] = str(answer.get("vulkan_error") or "no Vulkan loader")
        return False
    if not facts["adapters"]:
        detail = answer.get("vulkan_error") or "no physical device"
        facts["error"] = f"the Vulkan loader lists no adapter: {detail}"
        return False
    return True


def _ort_adapters(devices: list[dict[str, Any]], backend: str) -> list[dict[str, Any]]:
    """Adapters as the EP's ORT devices describe them (macOS, Windows: no Vulkan query)."""
    adapters = []
    for device in devices:
        is_cpu = device.get("type") == "CPU"
        apple = device.get("vendor") == "Apple" or device.get("vendor_id") == 0x106B
        kind = "cpu" if is_cpu else "integrated" if apple else "gpu"
        adapters.append(
            {
                "name": "",
                "vendor": device.get("vendor"),
                "vendor_id": device.get("vendor_id"),
                "type": kind,
                "backend": backend,
            }
        )
    return adapters


def _query(check_dawn: bool | None) -> dict[str, Any]:
    backend = _BACKENDS.get(sys.platform, "Vulkan")
    facts: dict[str, Any] = dict.fromkeys(WEBGPU_FACTS)
    facts.update(backend=backend, adapters=[], usable=False, software=False)
    missing = _missing_package()
    if missing:
        facts["error"] = missing
        return facts
    facts["ep_version"] = ep_version()
    if backend == "Vulkan":
        if not _vulkan_facts(facts):
            return facts
        facts["adapter"] = chosen_adapter(facts["adapters"])
        facts["software"] = facts["adapter"].get("type") == "cpu"
        if check_dawn is False or (
            check_dawn is None and facts["software"] and not software_allowed()
        ):
            facts["usable"] = None  # not asked: the policy skips a software adapter anyway
            return facts
    _dawn_facts(facts)
    return facts


def _dawn_facts(facts: dict[str, Any]) -> None:
    """Fill what the one-node session in a child says: the EP's devices, whether Dawn ran."""
    argument = {"phase": "dawn", "shader_cache_dir": str(shader_cache_path())}
    answer = run_probe_script(_SCRIPT, argument, timeout=_DAWN_TIMEOUT_S)
    if "error" in answer:
        facts["error"] = f"the WebGPU check failed: {answer['error']}"
        return
    facts["ep_version"] = answer.get("ep_version") or facts["ep_version"]
    facts["ort_devices"] = list(answer.get("ort_devices") or [])
    if facts["backend"] != "Vulkan":
        facts["adapters"] = _ort_adapters(facts["ort_devices"], facts["backend"])
    adapter = chosen_adapter(facts["adapters"])
    facts["adapter"] = adapter
    facts["software"] = adapter is not None and adapter.get("type") == "cpu"
    error = answer.get("session_error")
    facts["usable"] = adapter is not None and error is None
    if error:
        facts["error"] = f"Dawn could not use {describe_adapter(adapter)}: {error}"
    elif adapter is None:
        facts["error"] = "the WebGPU EP offers no device"


def detect_webgpu(check_dawn: bool | None = None) -> dict[str, Any]:
    """The ``webgpu`` facts (once per process, driver environment and opt-in).

    ``check_dawn``: build the one-node session (True), never (False), or only
    where the policy could offer the adapter (None: not for a software
    adapter without the opt-in, which saves a second child per process).
    """
    apply_software_opt_in()
    key = (check_dawn, software_allowed(), *(os.environ.get(name) for name in _DRIVER_ENV))
    with _lock:
        known = _answers.get(key)
    if known is None:
        known = _query(check_dawn)
        with _lock:
            _answers[key] = known
    return copy.deepcopy(known)
