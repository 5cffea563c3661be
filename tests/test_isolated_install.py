"""Each provider plugin installs on its own next to the core, in a fresh venv, and is discovered.

Real installs from this tree (pip builds the wheels), then a real uninstall:
what users do, with nothing else in the environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KINDS = (
    "import json, sys; from ortplug import PluginHost; "
    "kinds = PluginHost().provider_registry().kinds(); "
    "print(json.dumps([kinds, sorted(m for m in sys.modules if m.startswith('ortplug_'))]))"
)


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the core (no runtime, no plugin)."""
    root = tmp_path_factory.mktemp("isolated") / "venv"
    venv.EnvBuilder(with_pip=True).create(root)
    _pip(root, "install", "--quiet", str(ROOT / "core"))
    return root


def _python(root: Path) -> str:
    return str(root / ("Scripts" if sys.platform == "win32" else "bin") / "python")


def _pip(root: Path, *args: str) -> None:
    subprocess.run(
        [_python(root), "-m", "pip", *args], check=True, capture_output=True, timeout=600
    )


def _kinds(root: Path) -> list[str]:
    """The kinds the installed plugins provide; listing them imports no plugin (declared ones)."""
    out = subprocess.run([_python(root), "-c", KINDS], check=True, capture_output=True, text=True)
    kinds, imported = json.loads(out.stdout)
    assert imported == [], "the installed wheel carries no declaration (ortplug.json)"
    return list(kinds)


@pytest.mark.parametrize("plugin", ["cuda", "tensorrt", "coreml", "webgpu"])
def test_plugin_installs_alone_is_discovered_and_leaves_with_uninstall(core_venv, plugin) -> None:
    assert _kinds(core_venv) == []
    _pip(core_venv, "install", "--quiet", "--no-deps", str(ROOT / "plugins" / plugin))
    assert _kinds(core_venv) == [plugin]
    _pip(core_venv, "uninstall", "--yes", "--quiet", f"ortplug-{plugin}")
    assert _kinds(core_venv) == []
