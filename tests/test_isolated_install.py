"""Each provider plugin installs on its own next to the core, in a fresh venv, and is discovered.

Real installs from this tree (pip builds the wheels), then a real uninstall:
what users do, with nothing else in the environment.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from venvs import ROOT, fresh_venv, pip_in, python_in

KINDS = (
    "import json, sys; from ortplug import PluginHost; "
    "kinds = PluginHost().provider_registry().kinds(); "
    "print(json.dumps([kinds, sorted(m for m in sys.modules if m.startswith('ortplug_'))]))"
)


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the core (no runtime, no plugin)."""
    return fresh_venv(tmp_path_factory.mktemp("isolated") / "venv", str(ROOT / "core"))


def _kinds(root: Path) -> list[str]:
    """The kinds the installed plugins provide; listing them imports no plugin (declared ones)."""
    out = subprocess.run([python_in(root), "-c", KINDS], check=True, capture_output=True, text=True)
    kinds, imported = json.loads(out.stdout)
    assert imported == [], "the installed wheel carries no declaration (ortplug.json)"
    return list(kinds)


@pytest.mark.parametrize("plugin", ["cuda", "tensorrt", "coreml", "webgpu"])
def test_plugin_installs_alone_is_discovered_and_leaves_with_uninstall(core_venv, plugin) -> None:
    assert _kinds(core_venv) == []
    pip_in(core_venv, "install", "--quiet", "--no-deps", str(ROOT / "plugins" / plugin))
    assert _kinds(core_venv) == [plugin]
    pip_in(core_venv, "uninstall", "--yes", "--quiet", f"ortplug-{plugin}")
    assert _kinds(core_venv) == []


#: What the serving add-on's tests need besides it: the core, the CPU plugin and a runtime (what
#: ``pip install 'ortplug[cpu,serve]'`` brings), the models' builder and pytest.
_SERVE_TESTS_NEED = (
    "onnxruntime", "onnx==1.23.2", "pytest>=8", "pytest-timeout>=2.3",
    str(ROOT / "tests" / "plugin_dists" / "ortplug-misbehaving"),  # the tests' own providers
)  # fmt: skip
_SERVING_CONFIG = (
    "from ortplug.errors import AddonNotInstalledError\n"
    "try:\n    from ortplug import ServingConfig\n"
    "except AddonNotInstalledError as exc:\n    print(exc)\n"
    "else:\n    print(ServingConfig.__module__)"
)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_serving_addon_installs_alone_on_the_core_and_cpu_plugin_and_its_tests_pass(
    tmp_path: Path,
) -> None:
    """A fresh venv with the core and the CPU plugin: ``ortplug.ServingConfig`` names the package
    to install; with ``addons/serve`` installed (nothing else) it is the add-on's, and the
    add-on's own tests pass there."""
    root = fresh_venv(
        tmp_path / "venv", str(ROOT / "core"), str(ROOT / "plugins" / "cpu"), *_SERVE_TESTS_NEED
    )
    before = subprocess.run([python_in(root), "-c", _SERVING_CONFIG], capture_output=True,
                            text=True, check=True)  # fmt: skip
    assert "needs the serving add-on (ortplug-serve), which is not installed" in before.stdout
    pip_in(root, "install", "--quiet", str(ROOT / "addons" / "serve"))
    after = subprocess.run([python_in(root), "-c", _SERVING_CONFIG], capture_output=True,
                           text=True, check=True)  # fmt: skip
    assert after.stdout.strip() == "ortplug_serve.config"
    tests = subprocess.run(
        [python_in(root), "-m", "pytest", "-q", "-p", "no:cacheprovider", "addons/serve/tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout.splitlines()[-1]
