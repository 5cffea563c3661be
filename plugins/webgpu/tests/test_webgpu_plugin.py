"""The webgpu plugin without a GPU: options, offers and declines, doctor, shader cache, probe protocol.

Hosts are built by hand (``make_host(webgpu={...})``); nothing here needs a
Vulkan driver. Real sessions on lavapipe are in ``test_webgpu_lavapipe.py``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import onnx
import pytest
from ortplug import CheckpointMetadata, InMemoryCheckpoint, OptionError, PluginHost
from ortplug.plugins import EpLibrary
from ortplug.plugins.declaration import read_declaration
from ortplug.testing import make_host, make_plugin_host
from ortplug_webgpu import WebGpuProvider, plugin
from ortplug_webgpu import probes as probes_module
from ortplug_webgpu.probes import (
    ALLOW_SOFTWARE_ENV,
    ORT_SOFTWARE_ENV,
    apply_software_opt_in,
    chosen_adapter,
    describe_adapter,
)
from ortplug_webgpu.shader_cache import MESA_CACHE_ENV, shader_cache_key, use_shader_cache

QUERY = Path(sys.modules["ortplug_webgpu"].__file__ or "").with_name("_adapterquery.py")

LAVAPIPE = {
    "name": "llvmpipe (LLVM 15.0.6, 256 bits)",
    "vendor": "Mesa",
    "vendor_id": 0x10005,
    "device_id": 0,
    "type": "cpu",
    "backend": "Vulkan",
    "api_version": "1.4.305",
    "driver": "llvmpipe",
    "driver_info": "Mesa 25.0.7-2~bpo12+1 (LLVM 15.0.6)",
}
RTX = {
    "name": "NVIDIA GeForce RTX 4090",
    "vendor": "NVIDIA",
    "vendor_id": 0x10DE,
    "device_id": 0x2684,
    "type": "discrete",
    "backend": "Vulkan",
    "api_version": "1.3.277",
    "driver": "NVIDIA",
    "driver_info": "550.54.14",
}


def _facts(adapters: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    adapter = chosen_adapter(adapters)
    facts = {
        "backend": "Vulkan",
        "vulkan_loader": "libvulkan.so.1",
        "adapters": adapters,
        "adapter": adapter,
        "software": bool(adapter and adapter["type"] == "cpu"),
        "usable": bool(adapters),
        "error": None,
        "ep_version": "0.4.0",
        "ort_devices": [{"type": "CPU", "vendor": "AMD", "vendor_id": 4130}],
    }
    return {**facts, **changes}


def _metadata(**fields: Any) -> CheckpointMetadata:
    return CheckpointMetadata(input_names=("x",), output_names=("y",), **fields)


def _offers(precision: str = "fp32", static: bool = True, **facts: Any) -> list[Any]:
    metadata = _metadata(precision=precision, static_shapes=static)
    host = make_host(webgpu=_facts(**facts))
    return list(plugin.ortplug_offer_providers(metadata=metadata, host=host))


# --- options -------------------------------------------------------------------------------


def test_defaults_send_nothing() -> None:
    assert WebGpuProvider().to_ort() == ("WebGpuExecutionProvider", {})


def test_every_option_has_the_eps_name_and_string_value() -> None:
    config = WebGpuProvider(
        preferred_layout="nchw",
        enable_graph_capture=True,
        validation_mode="wgpu_only",
        storage_buffer_cache_mode="bucket",
        uniform_buffer_cache_mode="lazy_release",
        query_resolve_buffer_cache_mode="disabled",
        default_buffer_cache_mode="SIMPLE",
        power_preference="low_power",
        dawn_backend_type="vulkan",
        enable_int64=False,
        enable_robustness=True,
        preserve_device=True,
        enable_pix_capture=False,
        force_cpu_node_names=["Sum_1", "Softmax_0"],
        max_num_pending_dispatches=64,
        max_storage_buffer_binding_size=1 << 30,
        session_buffer_pool_generations=0,
    )
    assert config.to_ort() == (
        "WebGpuExecutionProvider",
        {
            "preferredLayout": "NCHW",
            "enableGraphCapture": "1",
            "validationMode": "wgpuOnly",
            "storageBufferCacheMode": "bucket",
            "uniformBufferCacheMode": "lazyRelease",
            "queryResolveBufferCacheMode": "disabled",
            "defaultBufferCacheMode": "simple",
            "powerPreference": "low-power",
            "dawnBackendType": "Vulkan",
            "enableInt64": "0",
            "enableRobustness": "1",
            "preserveDevice": "1",
            "enablePIXCapture": "0",
            "forceCpuNodeNames": "Sum_1\nSoftmax_0",
            "maxNumPendingDispatches": "64",
            "maxStorageBufferBindingSize": "1073741824",
            "sessionBufferPoolGenerations": "0",
        },
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"preferred_layout": "NCWH"}, "preferred_layout: expected one of NCHW, NHWC, got 'NCWH'"),
        ({"validation_mode": "strict"}, "validation_mode: expected one of disabled, wgpuOnly"),
        ({"storage_buffer_cache_mode": "lru"}, "storage_buffer_cache_mode: expected one of"),
        ({"power_preference": "fast"}, "power_preference: expected one of high-performance"),
        ({"dawn_backend_type": "Metal"}, "dawn_backend_type: expected one of Vulkan, D3D12"),
        ({"enable_graph_capture": "yes"}, "enable_graph_capture: expected true, false or null"),
        (
            {"max_num_pending_dispatches": 0},
            "max_num_pending_dispatches: expected an integer 1..4096",
        ),
        (
            {"max_num_pending_dispatches": 5000},
            "max_num_pending_dispatches: expected an integer 1..4096 or null, got 5000",
        ),
        (
            {"session_buffer_pool_generations": -1},
            "session_buffer_pool_generations: expected an integer >= 0",
        ),
        ({"force_cpu_node_names": ["a\nb"]}, "force_cpu_node_names: expected non-empty node names"),
        ({"force_cpu_node_names": 3}, "force_cpu_node_names: expected a list of node names, got 3"),
    ],
)
def test_bad_options_name_the_field_and_what_it_accepts(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        WebGpuProvider(**fields)


def test_a_dict_parses_through_the_registry(webgpu_host: PluginHost) -> None:
    registry = webgpu_host.provider_registry()
    config = registry.parse({"kind": "webgpu", "preferred_layout": "nhwc", "enable_int64": True})
    assert config == WebGpuProvider(preferred_layout="NHWC", enable_int64=True)
    assert registry.parse("WebGpuExecutionProvider") == WebGpuProvider()
    assert registry.library_of("webgpu") == _LIBRARY  # as ortplug.json declares it


_LIBRARY = EpLibrary(
    "ortplug.webgpu", ("WebGpuExecutionProvider",), package="onnxruntime_ep_webgpu"
)


# --- offers and declines ---------------------------------------------------------------------


def test_a_discrete_gpu_gets_an_offer_between_cpu_and_coreml() -> None:
    (offer,) = _offers(adapters=[LAVAPIPE, RTX])
    assert offer.config == WebGpuProvider()
    assert offer.preference == plugin.PREFERENCE
    # between CoreML and the CPU: the order the manifests declare, not a number kept in step
    order = make_plugin_host("cuda", "coreml", "webgpu").provider_registry().order()
    assert order.index("coreml") < order.index("webgpu") < order.index("cpu")
    assert offer.reason.startswith("Dawn runs on NVIDIA GeForce RTX 4090 (discrete GPU; 550.54.14)")


def test_a_software_adapter_is_declined_without_the_opt_in() -> None:
    (decline,) = _offers(adapters=[LAVAPIPE])
    assert decline.kind == "webgpu"
    assert decline.reason.startswith("only a software adapter: llvmpipe (LLVM 15.0.6, 256 bits)")
    assert "40-50x slower than the CPU provider" in decline.reason
    assert decline.reason.endswith(
        f"set {ALLOW_SOFTWARE_ENV}=1 to use it anyway (CI hosts without a GPU)"
    )


def test_the_opt_in_offers_the_software_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")
    (offer,) = _offers(precision="fp16", adapters=[LAVAPIPE])
    assert offer.preference == plugin.PREFERENCE
    assert "software adapter, opted in with ORTPLUG_WEBGPU_ALLOW_SOFTWARE=1" in offer.reason


@pytest.mark.parametrize(
    ("facts", "problem", "fix"),
    [
        (
            {
                "adapters": [],
                "vulkan_loader": None,
                "error": "no Vulkan loader (libvulkan.so.1: cannot open shared object file)",
            },
            "no Vulkan loader: no Vulkan loader (libvulkan.so.1",
            "apt-get install libvulkan1 mesa-vulkan-drivers",
        ),
        (
            {
                "adapters": [],
                "error": "the Vulkan loader lists no adapter: vkCreateInstance "
                "failed: VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver found)",
            },
            "no Vulkan adapter for Dawn: the Vulkan loader lists no adapter",
            "setup_lavapipe.sh",
        ),
        (
            {
                "adapters": [{**LAVAPIPE, "driver_info": "Mesa 22.3.6 (LLVM 15.0.6)"}],
                "usable": False,
                "error": "Dawn could not use llvmpipe: EP_FAIL: Failed to get a WebGPU adapter: "
                "No supported adapters",
            },
            "Dawn could not use llvmpipe: EP_FAIL: Failed to get a WebGPU adapter",
            "bookworm-backports' Mesa 25 works",
        ),
    ],
)
def test_declines_say_why_and_how_to_fix(
    monkeypatch: pytest.MonkeyPatch, facts: dict[str, Any], problem: str, fix: str
) -> None:
    monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")
    (decline,) = _offers(**facts)
    assert decline.reason.startswith(problem)
    assert fix in decline.reason


@pytest.mark.parametrize(
    ("precision", "why"),
    [("int8", "int8 checkpoint: the WebGPU provider has few integer kernels"), ("bf16", "bf16")],
)
def test_int8_and_bf16_checkpoints_are_declined(precision: str, why: str) -> None:
    (decline,) = _offers(precision=precision, adapters=[RTX])
    assert decline.reason.startswith(why)


def test_facts_of_a_probe_that_never_answered_decline() -> None:
    metadata = _metadata()
    host = make_host()  # no webgpu facts at all
    (decline,) = plugin.ortplug_offer_providers(metadata=metadata, host=host)
    assert "webgpu probe did not run" in decline.reason


def test_dawn_picks_discrete_then_integrated_then_software() -> None:
    integrated = {**RTX, "name": "Intel Iris Xe", "type": "integrated"}
    assert chosen_adapter([LAVAPIPE, integrated, RTX]) == RTX
    assert chosen_adapter([LAVAPIPE, integrated]) == integrated
    assert chosen_adapter([]) is None
    assert describe_adapter(LAVAPIPE) == (
        "llvmpipe (LLVM 15.0.6, 256 bits) (CPU, software; Mesa 25.0.7-2~bpo12+1 (LLVM 15.0.6)) "
        "on Vulkan"
    )


# --- doctor ------------------------------------------------------------------------------------


def _doctor(**facts: Any) -> dict[str, Any]:
    host = make_host(webgpu=_facts(**facts))
    return {check.name: check for check in plugin.ortplug_doctor_checks(host=host)}


def test_doctor_on_a_gpu_host_is_all_ok() -> None:
    checks = _doctor(adapters=[RTX])
    assert list(checks) == ["webgpu vulkan loader", "webgpu adapter", "webgpu shader cache"]
    assert all(check.ok for check in checks.values())
    assert checks["webgpu adapter"].detail.startswith("Dawn runs on NVIDIA GeForce RTX 4090")


def test_doctor_names_the_missing_loader_with_its_fix() -> None:
    checks = _doctor(adapters=[], vulkan_loader=None, error="no Vulkan loader (not found)")
    (loader,) = checks.values()
    assert not loader.ok
    assert loader.fix.startswith(
        "install the Vulkan loader and a driver: apt-get install libvulkan1"
    )


def test_doctor_says_a_software_adapter_needs_the_opt_in() -> None:
    checks = _doctor(adapters=[LAVAPIPE])
    assert checks["webgpu adapter"].ok
    assert f"the policy skips it unless {ALLOW_SOFTWARE_ENV}=1" in checks["webgpu adapter"].detail


def test_doctor_flags_an_unusable_adapter_and_an_unwritable_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.delenv(MESA_CACHE_ENV, raising=False)
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(blocker))
    monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")
    checks = _doctor(adapters=[LAVAPIPE], usable=False, error="EP_FAIL: No supported adapters")
    assert not checks["webgpu adapter"].ok
    assert checks["webgpu adapter"].fix.startswith("update the Vulkan driver")
    cache = checks["webgpu shader cache"]
    assert not cache.ok and str(blocker) in cache.detail
    assert cache.fix.startswith("set ORTPLUG_CACHE_DIR (or MESA_SHADER_CACHE_DIR)")
    assert os.environ.get(MESA_CACHE_ENV) is None  # the doctor sets nothing


def test_the_doctor_neither_records_nor_evicts_cache_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A diagnosis changes nothing: with a cap of 0 the shader-cache check once emptied the cache."""
    monkeypatch.delenv(MESA_CACHE_ENV, raising=False)
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ORTPLUG_CACHE_MAX_MB", "0")
    engine = tmp_path / "tensorrt" / "engines" / "old"
    engine.mkdir(parents=True)
    (engine / "ortplug-entry.json").write_text('{"kind": "TensorRT engine"}')
    for path in [*engine.iterdir(), engine]:
        os.utime(path, (1.0, 1.0))
    checks = _doctor(adapters=[RTX])
    assert checks["webgpu shader cache"].ok
    assert engine.exists()
    assert not list((tmp_path / "webgpu").rglob("ortplug-entry.json"))


# --- prepare: shader cache, opt-in, graph capture ---------------------------------------------


def _checkpoint(static: bool) -> Any:
    from ortplug.testing import demo_model, demo_static_model

    data = (demo_static_model() if static else demo_model()).read_bytes()
    return InMemoryCheckpoint(data).resolve()


def test_prepare_points_mesas_cache_at_a_keyed_folder(
    ortplug_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MESA_CACHE_ENV, raising=False)
    monkeypatch.delenv("MESA_GLSL_CACHE_DIR", raising=False)
    assert plugin.ortplug_prepare_provider(WebGpuProvider(), _checkpoint(True)) is None
    expected = ortplug_cache / "webgpu" / "shaders" / shader_cache_key()
    assert os.environ[MESA_CACHE_ENV] == str(expected)
    assert expected.is_dir()


def test_a_users_shader_cache_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MESA_CACHE_ENV, str(tmp_path / "mine"))
    assert use_shader_cache() == tmp_path / "mine"
    assert os.environ[MESA_CACHE_ENV] == str(tmp_path / "mine")


def test_graph_capture_needs_static_shapes() -> None:
    config = WebGpuProvider(enable_graph_capture=True)
    with pytest.raises(
        OptionError, match="^enable_graph_capture: expected a checkpoint with static"
    ):
        plugin.ortplug_prepare_provider(config, _checkpoint(False))
    assert plugin.ortplug_prepare_provider(config, _checkpoint(True)) is None


def test_the_opt_in_sets_the_eps_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ORT_SOFTWARE_ENV)
    assert apply_software_opt_in() is False
    assert ORT_SOFTWARE_ENV not in os.environ
    monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "true")
    assert apply_software_opt_in() is True
    assert os.environ[ORT_SOFTWARE_ENV] == "1"


_REGISTER = (
    "from ortplug.host.ep_libraries import EpLibrary, ensure_library; "
    "library = EpLibrary('ortplug.webgpu', ('WebGpuExecutionProvider',), "
    "package='onnxruntime_ep_webgpu'); print(ensure_library(library).error)"
)


@pytest.mark.parametrize("debug", [False, True])
def test_registering_the_library_opted_in_writes_onnxruntimes_notice_only_when_debugging(
    debug: bool,
) -> None:
    """With the switch on, the EP logs a warning as ortplug registers it: ortplug's log keeps it
    (issue 31, item 12), ``ORTPLUG_DEBUG=1`` shows it."""
    env = {k: v for k, v in os.environ.items() if k != "ORTPLUG_DEBUG"}
    env.update({ORT_SOFTWARE_ENV: "1", **({"ORTPLUG_DEBUG": "1"} if debug else {})})
    done = subprocess.run(
        [sys.executable, "-c", _REGISTER], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.stdout == "None\n", done.stderr  # registered
    assert ("CreateEpFactories" in done.stderr) is debug, done.stderr


# --- the probe ---------------------------------------------------------------------------------


def test_the_childs_model_is_valid_onnx() -> None:
    namespace: dict[str, Any] = {"__name__": "query"}
    exec(compile(QUERY.read_text(), str(QUERY), "exec"), namespace)
    model = onnx.load_from_string(namespace["_relu_model"]())
    onnx.checker.check_model(model, full_check=True)
    assert [node.op_type for node in model.graph.node] == ["Relu"]
    error = RuntimeError(
        "[ONNXRuntimeError] : 11 : EP_FAIL : /src/webgpu_context.cc:136 lambda adapter_result."
        "status == wgpu::RequestAdapterStatus::Success was false. Failed to get a WebGPU adapter: "
        "No supported adapters\nmore"
    )
    assert namespace["_short_error"](error) == (
        "EP_FAIL: Failed to get a WebGPU adapter: No supported adapters"
    )


def test_a_failing_child_becomes_an_error_fact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes_module, "_answers", {})
    monkeypatch.setattr(
        probes_module, "run_probe_script", lambda *a, **k: {"error": "x.py crashed (SIGSEGV)"}
    )
    facts = probes_module.detect_webgpu()
    assert facts["usable"] is False
    assert facts["error"] in (
        "the Vulkan query failed: x.py crashed (SIGSEGV)",  # Linux
        "the WebGPU check failed: x.py crashed (SIGSEGV)",  # macOS, Windows
    )


def test_the_session_check_is_skipped_for_a_software_adapter_without_the_opt_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def answer(script: Path, argument: dict[str, Any], timeout: float) -> dict[str, Any]:
        calls.append(argument["phase"])
        if argument["phase"] == "vulkan":
            return {"vulkan_loader": "libvulkan.so.1", "adapters": [LAVAPIPE]}
        return {"ep_version": "0.4.0", "ort_devices": [{"type": "CPU"}]}

    monkeypatch.setattr(probes_module, "_answers", {})
    monkeypatch.setattr(probes_module, "run_probe_script", answer)
    monkeypatch.setattr(probes_module, "_BACKENDS", {})  # Vulkan on every platform
    facts = probes_module.detect_webgpu()
    assert calls == ["vulkan"]
    assert facts["adapter"] == LAVAPIPE and facts["software"] is True and facts["usable"] is None
    monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")
    facts = probes_module.detect_webgpu()
    assert calls == ["vulkan", "vulkan", "dawn"]
    assert facts["usable"] is True and facts["error"] is None
    (decline,) = _offers(adapters=[LAVAPIPE], usable=None)
    assert decline.reason.startswith("not checked whether Dawn runs on llvmpipe")


def _identity() -> dict[str, object]:
    """The identity the package's declaration gives the probe (what the core caches facts by)."""
    declaration = read_declaration("webgpu", "ortplug_webgpu.plugin")
    assert declaration is not None and declaration.probes[0].identity is not None
    return declaration.probes[0].identity()


def test_the_identity_follows_the_driver_environment_and_the_opt_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    icd = tmp_path / "icd.json"
    monkeypatch.setenv("VK_DRIVER_FILES", str(icd))
    missing = _identity()
    assert [str(icd)] in missing["files"]  # type: ignore[operator]
    icd.write_text("{}")
    present = _identity()
    stat = icd.stat()
    assert present != missing and [str(icd), stat.st_mtime_ns, stat.st_size] in present["files"]  # type: ignore[operator]
    monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")
    assert _identity() != present


def test_the_identity_follows_the_ep_wheel_by_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "onnxruntime_ep_webgpu"
    package.mkdir()
    (package / "__init__.py").write_text("__version__ = '0.4.0'\n")
    found = importlib.util.find_spec

    def find_spec(name: str, package_name: str | None = None) -> ModuleSpec | None:
        if name == "onnxruntime_ep_webgpu":
            return ModuleSpec(name, None, origin=str(package / "__init__.py"))
        return found(name, package_name)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    before = _identity()
    os.utime(package / "__init__.py", ns=(1, 1))  # what an upgrade that rewrites the file does
    assert _identity()["packages"] != before["packages"]


def test_the_identity_costs_no_distribution_scan() -> None:
    # importlib.metadata alone costs ~15 ms, more than every other start-up step of the plugin
    code = (
        "import sys\nfrom ortplug.plugins.declaration import read_declaration\n"
        "read_declaration('webgpu', 'ortplug_webgpu.plugin').probes[0].identity()\n"
        "print('importlib.metadata' in sys.modules, 'ortplug_webgpu.plugin' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "False False"), done.stderr


def test_overrides_force_probe_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes_module, "detect_webgpu", lambda: _facts(adapters=[RTX]))
    environ = {"ORTPLUG_OVERRIDE_WEBGPU_USABLE": "false", "ORTPLUG_OVERRIDE_WEBGPU_ERROR": "forced"}
    host = make_plugin_host(("webgpu", plugin), environ=environ).host_capabilities()
    assert host.fact("webgpu", "adapter") == RTX
    assert host.fact("webgpu", "usable") is False
    assert host.fact("webgpu", "error") == "forced"


# --- packaging ---------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]


def _project(path: Path) -> dict[str, Any]:
    import tomllib

    project: dict[str, Any] = tomllib.loads(path.read_text())["project"]
    return project


def test_the_plugin_depends_on_the_ep_library_and_never_on_a_runtime_wheel() -> None:
    project = _project(ROOT / "plugins" / "webgpu" / "pyproject.toml")
    names = sorted(re.split(r"[<>=\[ ]", dep)[0] for dep in project["dependencies"])
    assert names == ["attrs", "onnxruntime-ep-webgpu", "ortplug"]
    assert project["entry-points"]["ortplug"] == {"webgpu": "ortplug_webgpu.plugin"}


def test_the_webgpu_extra_brings_one_runtime_wheel_and_the_cpu_and_webgpu_plugins() -> None:
    extra = _project(ROOT / "core" / "pyproject.toml")["optional-dependencies"]["webgpu"]
    runtimes = [r for r in extra if re.match(r"onnxruntime(-gpu)?\b", r) and "-ep-" not in r]
    assert runtimes == ["onnxruntime>=1.24.4"]  # the EP library's own minimum
    assert {r.split("==")[0] for r in extra if r.startswith("ortplug-")} == {
        "ortplug-cpu",
        "ortplug-webgpu",
    }
