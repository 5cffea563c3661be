"""One ONNX Runtime wheel per environment: the extras, the plugins' dependencies, the clash check.

The provider facts (runtime pins, which plugins an install brings) are the plugins' manifests';
the core's extras are checked against them, and the plugin list is the tree's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import tomllib
from ortplug import RuntimeDistribution, installed_runtimes
from ortplug.host.runtime import duplicate_runtime_problem
from ortplug.plugin_host.first_party import runtime_install
from ortplug.plugins.declaration import KindDeclaration, parse_declarations

ROOT = Path(__file__).resolve().parents[1]
#: The provider plugins of this repository: every folder under plugins/ with a pyproject.toml.
PLUGINS = tuple(sorted(p.parent.name for p in ROOT.glob("plugins/*/pyproject.toml")))


def _project(path: Path) -> dict:
    return tomllib.loads(path.read_text())["project"]


def _runtime_requirements(requirements: list[str]) -> list[str]:
    return [r for r in requirements if re.match(r"onnxruntime(-gpu)?\b", r) and "-ep-" not in r]


def _manifests() -> dict[str, tuple[str, KindDeclaration]]:
    """Each kind of the tree's plugins, by kind, with its distribution."""
    found = {}
    for path in sorted(ROOT.glob("plugins/*/src/*/ortplug.json")):
        for declaration in parse_declarations(json.loads(path.read_text()), str(path)).values():
            for kind in declaration.kinds:
                found[kind.kind] = (declaration.distribution, kind)
    return found


def _extras() -> dict[str, list[str]]:
    return _project(ROOT / "core" / "pyproject.toml")["optional-dependencies"]


def _installs() -> list[tuple[str, str, KindDeclaration, dict]]:
    """``(extra, distribution, kind, install)`` for each manifest install that is a core extra."""
    rows = []
    for distribution, kind in _manifests().values():
        for install in kind.installs():
            match = re.fullmatch(r"ortplug\[(\w+)\]", install["install"])
            if match:
                rows.append((match.group(1), distribution, kind, install))
    return rows


def test_the_plugin_list_is_the_trees() -> None:
    """Every plugin folder is checked, each with its manifest (the hard-coded list lost webgpu)."""
    assert "webgpu" in PLUGINS and "cpu" in PLUGINS
    assert set(PLUGINS) == set(_manifests())
    assert set(PLUGINS) == {p.name for p in (ROOT / "plugins").iterdir() if (p / "src").is_dir()}


@pytest.mark.parametrize("extra", sorted({row[0] for row in _installs()}))
def test_each_extra_brings_the_runtime_and_plugins_its_manifest_declares(extra: str) -> None:
    """An extra a manifest installs brings exactly its ``runtime`` (one wheel) and the plugins:
    the kind's, those of the probes it requires and the CPU plugin (the fallback), pinned at
    their versions."""
    (row,) = [row for row in _installs() if row[0] == extra]
    _, distribution, kind, install = row
    requirements = _extras()[extra]
    assert _runtime_requirements(requirements) == [install["runtime"]], requirements
    owners = {k.kind: d for d, k in _manifests().values()}
    wanted = {"ortplug-cpu", distribution} | {owners[p] for p in kind.required_probes()}
    versions = {
        _project(ROOT / "plugins" / p / "pyproject.toml")["name"]: _project(
            ROOT / "plugins" / p / "pyproject.toml"
        )["version"]
        for p in PLUGINS
    }
    plugins = sorted(r for r in requirements if r.startswith("ortplug-"))
    assert plugins == sorted(f"{name}=={versions[name]}" for name in wanted)


def test_every_core_extra_with_a_runtime_is_a_manifests_install() -> None:
    """No extra pins a runtime that no plugin declares (the core holds no provider facts)."""
    declared = {row[0] for row in _installs()}
    with_runtime = {name for name, reqs in _extras().items() if _runtime_requirements(reqs)}
    assert with_runtime == declared


def test_gpu_runtime_wheels_are_pinned_with_their_library_wheels() -> None:
    for extra, reqs in _extras().items():
        for runtime in _runtime_requirements(reqs):
            if runtime.startswith("onnxruntime-gpu"):
                assert re.fullmatch(r"onnxruntime-gpu\[cuda,cudnn\]==\d+\.\d+\.\d+", runtime), extra
    assert {"cuda", "cuda12", "tensorrt"} <= {
        extra for extra, reqs in _extras().items() if "onnxruntime-gpu" in str(reqs)
    }


def test_the_ray_extra_brings_no_runtime_wheel() -> None:
    """The extra is the Ray add-on, which brings Ray Data and no runtime wheel either."""
    assert _extras()["ray"] == ["ortplug-ray==0.1.0"]
    add_on = tomllib.loads((ROOT / "addons" / "ray" / "pyproject.toml").read_text())
    needs = add_on["project"]["dependencies"]
    assert _runtime_requirements(needs) == [] and any(n.startswith("ray[data]") for n in needs)


@pytest.mark.parametrize("plugin", PLUGINS)
def test_plugins_depend_on_the_core_only(plugin: str) -> None:
    """The core, attrs and the plugin-EP library packages its manifest names; never a runtime."""
    project = _project(ROOT / "plugins" / plugin / "pyproject.toml")
    names = sorted(re.split(r"[<>=\[ ]", dep)[0] for dep in project["dependencies"])
    _, kind = _manifests()[plugin]
    libraries = [kind.library.package.replace("_", "-")] if kind.library is not None else []
    assert names == sorted(["attrs", "ortplug", *[p for p in libraries if p]])
    assert project["entry-points"]["ortplug"] == {plugin: f"ortplug_{plugin}.plugin"}


def _fake_dist(site: Path, name: str, version: str, files: list[str]) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def test_two_runtime_wheels_side_by_side_are_found_with_the_fix(tmp_path) -> None:
    _fake_dist(tmp_path, "onnxruntime", "1.32.0", ["onnxruntime/__init__.py"])
    _fake_dist(tmp_path, "onnxruntime-gpu", "1.31.1", ["onnxruntime/__init__.py"])
    _fake_dist(
        tmp_path, "onnxruntime-ep-openvino", "1.8.1", ["onnxruntime_ep_openvino/__init__.py"]
    )
    found = installed_runtimes([str(tmp_path)])
    assert found == (
        RuntimeDistribution("onnxruntime", "1.32.0"),
        RuntimeDistribution("onnxruntime-gpu", "1.31.1"),
    )
    problem = duplicate_runtime_problem(found, runtime_install)
    assert problem is not None
    assert "onnxruntime 1.32.0 and onnxruntime-gpu 1.31.1 are installed side by side" in problem
    assert problem.endswith(  # the README's install, from the checkout the core came from
        "pip uninstall -y onnxruntime onnxruntime-gpu && pip install "
        f"'{ROOT}/core[cuda]' {ROOT}/plugins/cpu {ROOT}/plugins/cuda"
    )


def test_this_environment_has_exactly_one_runtime() -> None:
    runtimes = installed_runtimes()
    assert [r.name for r in runtimes] == ["onnxruntime"]
    assert duplicate_runtime_problem(runtimes, runtime_install) is None


def _declarations(*kinds: dict) -> list:
    plugins = {
        str(k["kind"]): {"distribution": f"ortplug-{k['kind']}", "kinds": [k], "hooks": []}
        for k in kinds
    }
    return list(parse_declarations({"ortplug": 1, "plugins": plugins}, "test").values())


def test_the_clash_fix_is_the_install_a_manifest_declares_for_the_runtime() -> None:
    """A third party's runtime (ROCm) names its own install: no core release needed."""
    cpu = {
        "kind": "cpu",
        "ort_name": "CPUExecutionProvider",
        "config": "a:B",
        "detect": [{}],
        "install": "ortplug[cpu]",
        "runtime": "onnxruntime>=1.22",
    }
    mac = {
        "kind": "coreml",
        "ort_name": "CoreMLExecutionProvider",
        "config": "a:C",
        "detect": [{"platform": ["darwin"]}],
        "install": "ortplug[coreml]",
        "runtime": "onnxruntime>=1.22",
    }
    rocm = {
        "kind": "rocm",
        "ort_name": "ROCMExecutionProvider",
        "config": "a:D",
        "detect": [{"pci_vendor": "0x1002"}],
        "install": "ortplug-rocm[all]",
        "runtime": "onnxruntime-rocm==1.22.1",
    }
    given = _declarations(mac, cpu, rocm)
    assert runtime_install(["onnxruntime", "onnxruntime-rocm"], given) == "ortplug-rocm[all]"
    assert runtime_install(["onnxruntime", "onnxruntime-directml"], given) == "ortplug[cpu]"
    assert runtime_install(["onnxruntime-openvino", "onnxruntime-directml"], given) == (
        "ortplug[cpu]"
    )


def test_the_shipped_clash_fix_keeps_the_gpu_wheel_as_the_cuda_manifest_says() -> None:
    (cuda_install, *_) = [i for i in _manifests()["cuda"][1].installs()]
    assert runtime_install(["onnxruntime", "onnxruntime-gpu"]) == cuda_install["install"]
    assert runtime_install(["onnxruntime", "onnxruntime-directml"]) == (
        _manifests()["cpu"][1].install
    )
