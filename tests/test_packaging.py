"""One ONNX Runtime wheel per environment: the extras, the plugins' dependencies, the clash check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
from ortplug import RuntimeDistribution, installed_runtimes
from ortplug.host.runtime import duplicate_runtime_problem

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ("cpu", "cuda", "tensorrt", "coreml")


def _project(path: Path) -> dict:
    return tomllib.loads(path.read_text())["project"]


def _runtime_requirements(requirements: list[str]) -> list[str]:
    return [r for r in requirements if re.match(r"onnxruntime(-gpu)?\b", r) and "-ep-" not in r]


@pytest.mark.parametrize("extra", ["cpu", "cuda", "cuda12", "tensorrt", "coreml"])
def test_each_extra_brings_exactly_one_runtime_wheel_and_its_plugins(extra: str) -> None:
    requirements = _project(ROOT / "core" / "pyproject.toml")["optional-dependencies"][extra]
    assert len(_runtime_requirements(requirements)) == 1, requirements
    plugins = {r.split("==")[0] for r in requirements if r.startswith("ortplug-")}
    assert "ortplug-cpu" in plugins  # CPU is the fallback of every chain
    kind = {"cuda12": "cuda"}.get(extra, extra)
    assert f"ortplug-{kind}" in plugins


def test_gpu_runtime_wheels_are_pinned_with_their_library_wheels() -> None:
    extras = _project(ROOT / "core" / "pyproject.toml")["optional-dependencies"]
    for extra in ("cuda", "cuda12", "tensorrt"):
        (runtime,) = _runtime_requirements(extras[extra])
        assert re.fullmatch(r"onnxruntime-gpu\[cuda,cudnn\]==\d+\.\d+\.\d+", runtime), runtime


def test_the_ray_extra_brings_no_runtime_wheel() -> None:
    requirements = _project(ROOT / "core" / "pyproject.toml")["optional-dependencies"]["ray"]
    assert _runtime_requirements(requirements) == [] and requirements[0].startswith("ray[data]")


@pytest.mark.parametrize("plugin", PLUGINS)
def test_plugins_depend_on_the_core_only(plugin: str) -> None:
    project = _project(ROOT / "plugins" / plugin / "pyproject.toml")
    names = sorted(re.split(r"[<>=\[ ]", dep)[0] for dep in project["dependencies"])
    assert names == ["attrs", "ortplug"]
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
    problem = duplicate_runtime_problem(found)
    assert problem is not None
    assert "onnxruntime 1.32.0 and onnxruntime-gpu 1.31.1 are installed side by side" in problem
    assert problem.endswith(  # the README's install, from the checkout the core came from
        "pip uninstall -y onnxruntime onnxruntime-gpu && pip install "
        f"'{ROOT}/core[cuda]' {ROOT}/plugins/cpu {ROOT}/plugins/cuda"
    )


def test_this_environment_has_exactly_one_runtime() -> None:
    runtimes = installed_runtimes()
    assert [r.name for r in runtimes] == ["onnxruntime"]
    assert duplicate_runtime_problem(runtimes) is None
