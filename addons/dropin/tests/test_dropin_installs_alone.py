"""ortplug-dropin installs alone on the core and the CPU plugin in a fresh venv: before it, each
of its public names and ``ortplug exec`` is one line naming the install; after it, its tests pass
there (all but ``test_dropin_libraries.py``, which needs the libraries it runs)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from venvs import ROOT, fresh_venv, pip_in, python_in, refused_names

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def core_and_cpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the core, the CPU plugin, this ONNX Runtime and the test tools."""
    return fresh_venv(
        tmp_path_factory.mktemp("dropin-alone") / "venv",
        str(ROOT / "core"),
        str(ROOT / "plugins" / "cpu"),
        f"onnxruntime=={ort.__version__}",
        f"onnx=={onnx.__version__}",
        "pytest>=8",
        "pytest-timeout>=2.3",
        str(ROOT / "tests" / "plugin_dists" / "ortplug-misbehaving"),
        str(ROOT / "addons" / "variants"),  # the tests' int8 variants are written with it
    )


def test_the_drop_in_installs_alone_and_its_tests_pass_there(core_and_cpu: Path) -> None:
    python = python_in(core_and_cpu)
    install = subprocess.run(
        [python, "-c", "from ortplug.addons import DROPIN; print(DROPIN.install_line())"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    hint = f"needs the drop-in add-on (ortplug-dropin), which is not installed; install it with: {install}"
    names = ("InferenceSession", "Patch", "patch", "unpatch")
    assert refused_names(python, "ortplug", names) == [f"ortplug.{name} {hint}" for name in names]
    command = [python, "-m", "ortplug.cli.main", "exec", "--", python, "-V"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"ortplug exec: error: ortplug exec {hint}\n"

    pip_in(core_and_cpu, "install", "--quiet", "--no-deps", str(ROOT / "addons" / "dropin"))
    tests = ROOT / "addons" / "dropin" / "tests"
    run = subprocess.run(
        [python, "-m", "pytest", str(tests), "-q", "-m", "not slow", "-p", "no:cacheprovider",
         f"--ignore={tests / 'test_dropin_libraries.py'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1] and "failed" not in run.stdout.splitlines()[-1]
