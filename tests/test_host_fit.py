"""Host fit: the catalog against fake hosts' hardware and hand-made environments."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import fake_roots
import pytest
from ortplug.errors import OptionError
from ortplug.fit.catalog import CATALOG_ENV, load_catalog
from ortplug.fit.hardware import Hardware, detect_hardware
from ortplug.fit.planner import FitPlan, Installed, plan_fit
from ortplug.host.requirement import Requirement
from ortplug.host.runtime import RuntimeDistribution

REPOSITORY = Path(__file__).resolve().parents[1]
_LINUX = {"ORTPLUG_OVERRIDE_PLATFORM": "linux", "ORTPLUG_OVERRIDE_MACHINE": "x86_64"}
_MAC = {"ORTPLUG_OVERRIDE_PLATFORM": "darwin", "ORTPLUG_OVERRIDE_MACHINE": "arm64"}
#: What the core's extras bring, as its metadata says (a subset: the plugins and runtimes).
_EXTRAS = {
    "cpu": frozenset({"onnxruntime", "ortplug-cpu"}),
    "cuda": frozenset({"onnxruntime-gpu", "ortplug-cpu", "ortplug-cuda"}),
    "cuda12": frozenset({"onnxruntime-gpu", "ortplug-cpu", "ortplug-cuda"}),
    "webgpu": frozenset({"onnxruntime", "ortplug-cpu", "ortplug-webgpu"}),
    "coreml": frozenset({"onnxruntime", "ortplug-cpu", "ortplug-coreml"}),
    "tensorrt": frozenset({"onnxruntime-gpu", "ortplug-cpu", "ortplug-cuda", "ortplug-tensorrt"}),
}


def _env(*runtimes: tuple[str, str], tree: Path | None = None, **dists: str) -> Installed:
    """An environment with the core, these runtime wheels and these distributions."""
    found = {
        "ortplug": "0.1.0",
        **dict(runtimes),
        **{k.replace("_", "-"): v for k, v in dists.items()},
    }
    return Installed(found, tuple(RuntimeDistribution(*r) for r in runtimes), _EXTRAS, tree)


_CPU_ENV = _env(("onnxruntime", "1.32.0"), ortplug_cpu="0.1.0")  # README's first command


def _hw(root: Path, env: dict[str, str] = _LINUX) -> Hardware:
    return detect_hardware(root, env)


def _plan(hw: Hardware, installed: Installed = _CPU_ENV, catalog: str | None = None) -> FitPlan:
    environ = {CATALOG_ENV: catalog} if catalog else {}
    return plan_fit(hw, load_catalog(environ, installed=False), installed)


def _lines(plan: FitPlan, ok: bool | None = None) -> list[str]:
    return [f.line() for f in plan.findings if ok is None or f.ok is ok]


# --- what each kind of host calls for ----------------------------------------------------------


def test_the_readme_cpu_install_on_a_cpu_host_has_nothing_to_do(tmp_path: Path) -> None:
    for make in (fake_roots.bare_cpu, fake_roots.mesa_without_gpu):  # ICDs without a GPU: no
        plan = _plan(_hw(make(tmp_path / make.__name__)))
        assert plan.applies == ("cpu",) and plan.steps == ()
        assert _lines(plan) == ["onnxruntime 1.32.0: the runtime this host needs"]


def test_an_nvidia_host_with_a_cuda13_driver_gets_the_cuda_extra(tmp_path: Path) -> None:
    plan = _plan(_hw(fake_roots.nvidia(tmp_path)))
    assert plan.applies == ("tensorrt", "cuda", "cpu")
    assert plan.steps == (("uninstall", "-y", "onnxruntime"), ("install", "ortplug[cuda]"))
    missing = [f.line() for f in plan.findings if f.kind == "missing"]
    assert missing == [
        "NVIDIA H200 (NVIDIA driver 580.65.06) seen; install ortplug-cuda with: "
        "pip uninstall -y onnxruntime && pip install 'ortplug[cuda]'"
    ]
    (optional,) = [f for f in plan.findings if f.kind == "optional"]
    assert optional.ok and optional.command == (
        "pip install --extra-index-url https://pypi.nvidia.com 'ortplug[tensorrt]'"
    )


def test_a_cuda12_driver_gets_the_cuda12_build_and_no_tensorrt(tmp_path: Path) -> None:
    plan = _plan(_hw(fake_roots.nvidia(tmp_path, driver="535.104.05")))
    assert plan.steps[-1] == ("install", "ortplug[cuda12]")
    driver = [f for f in plan.findings if f.kind == "driver"]
    assert [(f.ok, f.detail) for f in driver] == [(
        True,
        "NVIDIA H200 (NVIDIA driver 535.104.05) seen; ortplug-tensorrt needs NVIDIA driver 580 "
        "or newer: update the NVIDIA driver",
    )]  # fmt: skip


def test_a_driver_too_old_for_any_build_says_to_update_it(tmp_path: Path) -> None:
    plan = _plan(_hw(fake_roots.nvidia(tmp_path, driver="470.199.02")))
    assert plan.applies == ("cpu",) and plan.steps == ()
    cuda = [f for f in plan.findings if "ortplug-cuda needs" in f.detail]
    assert [f.ok for f in cuda] == [False]
    assert cuda[0].detail.endswith("needs NVIDIA driver 525 or newer: update the NVIDIA driver")


def test_an_nvidia_gpu_without_a_driver_says_to_install_it_first(tmp_path: Path) -> None:
    plan = _plan(_hw(fake_roots.nvidia(tmp_path, driver=None)))
    (missing,) = [f for f in plan.findings if f.kind == "missing"]
    assert missing.detail == (
        "NVIDIA GPU 0x2335 seen; install ortplug-cuda (no NVIDIA driver seen: install it first)"
    )
    assert plan.steps[-1] == ("install", "ortplug[cuda]")


def test_an_amd_gpu_with_vulkan_gets_webgpu_beside_the_cpu_runtime(tmp_path: Path) -> None:
    plan = _plan(_hw(fake_roots.amd_gpu(tmp_path)))
    assert plan.applies == ("webgpu", "cpu")
    assert plan.steps == (("install", "ortplug[webgpu]"),)  # onnxruntime 1.32 fits >=1.24.4
    assert (
        "AMD GPU 0x744c with a Vulkan loader seen; install ortplug-webgpu with: "
        in _lines(plan, ok=False)[0]
    )


def test_an_intel_gpu_gets_webgpu_and_openvino_as_an_option(tmp_path: Path) -> None:
    plan = _plan(_hw(fake_roots.intel_gpu(tmp_path)))
    assert plan.applies == ("webgpu", "openvino", "cpu")
    assert plan.steps == (("install", "ortplug[webgpu]"),)
    (optional,) = [f for f in plan.findings if f.kind == "optional"]
    assert optional.line().startswith("Intel GPU 0x7d55 seen; optional: ortplug-openvino (Intel")
    assert optional.command == "pip install ortplug-openvino"


def test_apple_silicon_gets_coreml(tmp_path: Path) -> None:
    plan = _plan(_hw(fake_roots.apple_silicon(tmp_path, "14.5"), _MAC))
    assert plan.applies == ("coreml", "cpu")
    assert plan.steps == (("install", "ortplug[coreml]"),)
    assert _lines(plan, ok=False) == [
        "macOS 14.5 on arm64 seen; install ortplug-coreml with: pip install 'ortplug[coreml]'"
    ]


def test_an_old_macos_or_an_intel_mac_gets_no_coreml(tmp_path: Path) -> None:
    old = _plan(_hw(fake_roots.apple_silicon(tmp_path / "old", "11.7"), _MAC))
    intel = _plan(
        _hw(
            fake_roots.apple_silicon(tmp_path / "x86"),
            {**_MAC, "ORTPLUG_OVERRIDE_MACHINE": "x86_64"},
        )
    )
    assert old.applies == intel.applies == ("cpu",)


def test_a_vulkan_only_host_gets_webgpu(tmp_path: Path) -> None:
    plan = _plan(_hw(fake_roots.vulkan_only(tmp_path)))
    assert plan.applies == ("webgpu", "cpu")
    assert _lines(plan, ok=False)[0].startswith("GPU (renderD128) with a Vulkan loader seen;")


# --- runtimes and installed plugins ------------------------------------------------------------


def test_two_runtime_wheels_keep_the_one_the_host_needs_and_repair_it(tmp_path: Path) -> None:
    both = _env(("onnxruntime", "1.32.0"), ("onnxruntime-gpu", "1.32.0"), ortplug_cpu="0.1.0")
    plan = _plan(_hw(fake_roots.bare_cpu(tmp_path)), both)
    assert plan.steps == (
        ("uninstall", "-y", "onnxruntime-gpu"),
        ("install", "--force-reinstall", "--no-deps", "onnxruntime==1.32.0"),
    )
    assert _lines(plan, ok=False) == [
        "onnxruntime 1.32.0 and onnxruntime-gpu 1.32.0 installed; they share the onnxruntime "
        "module; this host needs onnxruntime>=1.22 (for ortplug-cpu); fix it with: pip uninstall -y "
        "onnxruntime-gpu && pip install --force-reinstall --no-deps onnxruntime==1.32.0"
    ]


def test_a_cuda13_runtime_on_a_cuda12_driver_is_replaced(tmp_path: Path) -> None:
    gpu = _env(("onnxruntime-gpu", "1.31.1"), ortplug_cpu="0.1.0", ortplug_cuda="0.1.0")
    plan = _plan(_hw(fake_roots.nvidia(tmp_path, driver="550.54.15")), gpu)
    assert plan.steps == (("install", "ortplug[cuda12]"),)  # pip moves it to ==1.26.0
    assert _lines(plan, ok=False)[0].startswith(
        "onnxruntime-gpu 1.31.1 installed; this host needs onnxruntime-gpu[cuda,cudnn]==1.26.0"
    )


def test_a_fitting_gpu_install_has_nothing_to_do(tmp_path: Path) -> None:
    gpu = _env(("onnxruntime-gpu", "1.31.1"), ortplug_cpu="0.1.0", ortplug_cuda="0.1.0")
    plan = _plan(_hw(fake_roots.nvidia(tmp_path)), gpu)
    assert plan.steps == () and _lines(plan, ok=False) == []


def test_a_plugin_for_absent_hardware_is_named_useless(tmp_path: Path) -> None:
    env = _env(("onnxruntime", "1.32.0"), ortplug_cpu="0.1.0", ortplug_cuda="0.1.0")
    plan = _plan(_hw(fake_roots.bare_cpu(tmp_path)), env)
    assert plan.steps == ()  # removing it is the user's call: it only costs disk
    assert _lines(plan, ok=False) == [
        "ortplug-cuda 0.1.0 is installed but useless here: no NVIDIA GPUs seen; remove it with: "
        "pip uninstall -y ortplug-cuda"
    ]


def test_no_runtime_and_no_plugin_install_both(tmp_path: Path) -> None:
    plan = _plan(_hw(fake_roots.bare_cpu(tmp_path)), _env())
    assert plan.steps == (("install", "ortplug[cpu]"),)
    assert _lines(plan, ok=False)[0].startswith("no runtime installed; this host needs onnxruntime")


def test_from_a_checkout_the_commands_name_its_folders(tmp_path: Path) -> None:
    both = _env(("onnxruntime", "1.32.0"), ("onnxruntime-gpu", "1.32.0"), tree=REPOSITORY)
    plan = _plan(_hw(fake_roots.nvidia(tmp_path)), both)
    assert plan.steps == (
        ("uninstall", "-y", "onnxruntime"),  # 1.32.0 is not ==1.31.1: the extra's pin moves it
        ("install", f"{REPOSITORY}/core[cuda]", f"{REPOSITORY}/plugins/cpu", f"{REPOSITORY}/plugins/cuda"),
    )  # fmt: skip


# --- the catalog itself ------------------------------------------------------------------------


def test_the_builtin_catalog_is_each_plugins_own_declaration() -> None:
    """The built-in entries come from the plugins' own ortplug.json files (carried in the core's
    wheel): every declared kind with a ``detect``, with its install line, nothing else."""
    files = sorted(REPOSITORY.glob("plugins/*/src/*/ortplug.json"))
    files += sorted(REPOSITORY.glob("examples/*/src/*/ortplug.json"))
    own = {
        kind["kind"]: (plugin["distribution"], kind["install"])
        for path in files
        for plugin in json.loads(path.read_text())["plugins"].values()
        for kind in plugin["kinds"]
        if "detect" in kind
    }
    entries = load_catalog({}, installed=False)
    assert {e.name: (e.distribution, e.installs[0].install) for e in entries} == own
    assert {"cpu", "cuda", "tensorrt", "coreml", "webgpu", "openvino"} <= set(own)
    assert entries[-1].name == "cpu"  # for every host: after the kinds that decide a runtime


def test_the_builtin_runtime_rules_are_the_core_extras() -> None:
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((REPOSITORY / "core/pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for entry in load_catalog({}, installed=False):
        for install in entry.installs:
            requirement = Requirement.parse(install.install)
            if requirement.name == "ortplug" and install.runtime:
                (extra,) = requirement.extras
                assert install.runtime in extras[extra], (entry.name, extra)


def _catalog_file(tmp_path: Path, plugins: object, name: str = "catalog.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"ortplug": 1, "plugins": plugins}))
    return str(path)


def test_a_users_catalog_pins_and_indexes_replace_the_builtin_kind(tmp_path: Path) -> None:
    own = _catalog_file(tmp_path, {"cuda": {
        "distribution": "ortplug-cuda", "hooks": [],
        "kinds": [{
            "kind": "cuda", "ort_name": "CUDAExecutionProvider", "hardware": "our H200s",
            "detect": [{"fact": "cuda.driver_version"}], "install": "ortplug[cuda]",
            "runtime": "onnxruntime-gpu==1.31.1", "index_url": "https://pypi.internal/simple",
        }],
    }})  # fmt: skip
    plan = _plan(_hw(fake_roots.nvidia(tmp_path)), catalog=own)
    assert plan.applies == ("tensorrt", "cuda", "cpu")  # in the built-in one's place
    assert plan.steps[-1] == (
        "install", "--extra-index-url", "https://pypi.internal/simple", "ortplug[cuda]"
    )  # fmt: skip


def test_a_new_kind_in_a_users_catalog_goes_first(tmp_path: Path) -> None:
    own = _catalog_file(tmp_path, {"acme": {
        "distribution": "ortplug-acme", "hooks": [],
        "kinds": [{"kind": "acme", "ort_name": "AcmeExecutionProvider", "hardware": "Acme NPUs",
                   "detect": [{"pci_vendor": "0x1e52"}], "install": "ortplug-acme>=2"}],
    }})  # fmt: skip
    fake_roots.pci(tmp_path, "0000:05:00.0", 0x1E52, 0x0001, 0x120000)
    plan = _plan(_hw(fake_roots.bare_cpu(tmp_path)), catalog=own)
    assert plan.applies == ("acme", "cpu")
    assert plan.steps == (("install", "ortplug-acme>=2"),)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, r"ORTPLUG_CATALOG=\S+absent.json: cannot read the catalog \(No such file"),
        ("{", r"ORTPLUG_CATALOG=\S+: expected a JSON catalog, got invalid JSON"),
        ({"ortplug": 2, "plugins": {}}, r"expected \"ortplug\": 1 \(the format version\), got 2"),
        ({"cuda": {"hooks": [], "kinds": [{"kind": "cuda", "ort_name": "C", "detect": [{"pci_vendr": "0x10de"}]}]}},
         r"plugins\.cuda\.kinds\[0\]\.detect\[0\]: unknown field\(s\) \['pci_vendr'\]"),
        ({"cuda": {"hooks": [], "kinds": [{"kind": "cuda", "ort_name": "C", "detect": [{"pci_vendor": "nvidia"}]}]}},
         r"\.detect\[0\]\.pci_vendor: expected a hex id like '0x10de', got 'nvidia'"),
        ({"cuda": {"hooks": [], "kinds": [{"kind": "cuda", "ort_name": "C", "runtime": "onnxruntime~=1.2"}]}},
         r"\.runtime: expected version rules like '>=1.22' or '==1.31.1' in 'onnxruntime~=1.2', got '~=1.2'"),
        ({"cuda": {"hooks": [], "kinds": [{"kind": "cuda", "ort_name": "C", "detect": [{}]}]}},
         r"plugins\.cuda: declares a kind with 'detect', so expected the plugin's 'distribution'"),
    ],
)  # fmt: skip
def test_a_bad_catalog_file_is_one_line_naming_the_file_and_field(
    tmp_path: Path, content: object, message: str
) -> None:
    path = tmp_path / "absent.json"
    if isinstance(content, str):
        path.write_text(content)
    elif isinstance(content, dict):
        data = content if "ortplug" in content else {"ortplug": 1, "plugins": content}
        path.write_text(json.dumps(data))
    with pytest.raises(OptionError) as caught:
        load_catalog({CATALOG_ENV: str(path)}, installed=False)
    text = str(caught.value)
    assert "\n" not in text and re.search(message, text), text
    assert f"ORTPLUG_CATALOG={path}" in text


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _too_big(path: Path) -> Path:
    path.write_text(json.dumps({"ortplug": 1, "plugins": {}, "pad": "x" * (1 << 20)}))
    return path


def _deep(path: Path) -> Path:
    path.write_text("[" * 200_000 + "]" * 200_000)
    return path


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX's")
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_fifo, "cannot read the catalog: it is a FIFO, expected a regular file"),
        (lambda _: Path("/dev/zero"), "cannot read the catalog: it is a character device, expected a regular file"),
        (_too_big, r"cannot read the catalog: it has \d+ bytes, expected at most 1048576"),
        (_deep, "expected a JSON catalog, got JSON nested too deeply"),
    ],
    ids=["fifo", "dev-zero", "too-big", "deep"],
)  # fmt: skip
def test_a_catalog_that_is_no_plain_bounded_file_is_one_line_naming_it(
    tmp_path: Path, make: Callable[[Path], Path], message: str
) -> None:
    """Regression (issue 37, T12): ``ORTPLUG_CATALOG`` naming a FIFO hung ``info`` and ``doctor``,
    ``/dev/zero`` ran out of memory, and JSON nested past the stack raised a bare
    ``RecursionError`` naming no file: plain files only, bounded, the file named."""
    path = make(tmp_path / "catalog.json")
    with pytest.raises(OptionError) as caught:
        load_catalog({CATALOG_ENV: str(path)}, installed=False)
    text = str(caught.value)
    expected = f"ORTPLUG_CATALOG={re.escape(str(path))}: {message}"
    assert "\n" not in text and re.fullmatch(expected, text), text


_BUILD = """
import json, sys
from importlib.resources import files
import numpy as np
from ortplug import LocalCheckpoint, OnnxBackend
backend = OnnxBackend.from_checkpoint(LocalCheckpoint(str(files("ortplug.data") / "demo.onnx")).resolve())
backend.run({"x": np.zeros((1, 8), np.float32)})
print(json.dumps(sorted(m for m in sys.modules if m in MODULES)))
"""


def test_a_build_imports_neither_the_catalog_nor_the_hardware_scan() -> None:
    modules = ["ortplug.fit.catalog", "ortplug.fit.planner", "ortplug.fit.hardware"]
    script = _BUILD.replace("MODULES", repr(modules))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
    # and the same process does import them when asked, so the check can fail
    check = script.replace("print(", "import ortplug.fit.planner\nprint(")
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120
    )
    assert json.loads(done.stdout.splitlines()[-1]) == sorted(modules)


def _rocm_catalog(tmp_path: Path) -> str:
    """A third party's driver rule, ROCm's, in the generic terms: a probe's fact read from a
    file and installs that need it at a minimum (no core release needed for it)."""
    return _catalog_file(tmp_path, {"rocm": {
        "distribution": "ortplug-rocm", "hooks": [],
        "kinds": [{
            "kind": "rocm", "ort_name": "ROCMExecutionProvider", "hardware": "AMD Instinct GPUs",
            "detect": [{"pci_vendor": "0x1002", "fact": "rocm.driver", "min": "5"}],
            "install": "ortplug-rocm[rocm6]", "needs": {"fact": "rocm.driver", "min": "6.1"},
            "alternatives": [{"install": "ortplug-rocm[rocm5]",
                              "needs": {"fact": "rocm.driver", "min": "5"}}],
        }],
        "probes": [{"name": "rocm", "facts": ["driver"], "read": {"driver": {
            "paths": ["/sys/module/amdgpu/version"], "pattern": r"^(\d+(?:\.\d+)*)",
            "label": "amdgpu driver"}}}],
    }}, name="rocm.json")  # fmt: skip


@pytest.mark.parametrize(
    ("version", "applies", "said"),
    [("6.3.2", True, "ortplug-rocm[rocm6]"), ("5.7.1", True, "ortplug-rocm[rocm5]"),
     ("4.0", False, None)],
)  # fmt: skip
def test_a_third_partys_driver_rule_is_a_fact_and_a_minimum(
    tmp_path: Path, version: str, applies: bool, said: str | None
) -> None:
    from ortplug.fit.catalog import catalog_fact_reads

    root = fake_roots.amd_gpu(tmp_path / "root")
    (root / "sys/module/amdgpu").mkdir(parents=True)
    (root / "sys/module/amdgpu/version").write_text(f"{version}\n")
    catalog = _rocm_catalog(tmp_path)
    environ = {CATALOG_ENV: catalog}
    hw = detect_hardware(root, _LINUX, reads=catalog_fact_reads(environ, installed=False))
    assert hw.fact("rocm.driver") == version
    plan = plan_fit(hw, load_catalog(environ, installed=False), _CPU_ENV)
    assert ("rocm" in plan.applies) is applies
    if said is not None:
        (missing,) = [f for f in plan.findings if f.subject == "rocm"]
        assert missing.detail.startswith(f"AMD GPU 0x744c amdgpu driver {version} seen; install ")
        assert plan.steps[-1][-1] == said  # the install the driver's version allows


def test_the_generic_schema_names_no_vendors_driver() -> None:
    """nvidia_driver, vulkan_loader and cuda_min were the format's own fields: a driver rule of
    another vendor needed a core release."""
    from ortplug.plugins.declaration import schema_text

    text = schema_text()
    assert not re.search(r"nvidia|vulkan|cuda", text, re.IGNORECASE)
    assert '"fact"' in text and '"min"' in text and '"needs"' in text and '"read"' in text
