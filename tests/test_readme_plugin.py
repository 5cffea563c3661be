"""The plugin guide's example (docs/plugins.md), copied as written, works on a host without the
vendor SDK."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import tomllib

#: The plugin guide, whose first section is the example.
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def _blocks() -> dict[str, str]:
    """The example's files, by the first line of their block (the JSON block by its language)."""
    section = GUIDE.read_text().split("## A complete plugin", 1)[1]
    found = {}
    for language, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S):
        key = "ortplug.json" if language == "json" else body.splitlines()[0]
        found.setdefault(key, body)
    return found


def _project(site: Path) -> None:
    """Lay the example out as pip installs it: the package with its data file, and a dist-info."""
    blocks = _blocks()
    package = site / "ortplug_acme"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(blocks["# src/ortplug_acme/__init__.py"])
    (package / "ortplug.json").write_text(blocks["ortplug.json"])
    project = tomllib.loads(blocks["# pyproject.toml of ortplug-acme"])["project"]
    lines = [f"{name} = {value}" for name, value in project["entry-points"]["ortplug"].items()]
    dist = site / "ortplug_acme-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ortplug-acme\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[ortplug]\n" + "\n".join(lines) + "\n")
    (site / "tests").mkdir()
    (site / "tests" / "test_acme.py").write_text(blocks["# tests/test_acme.py"])


def test_the_readme_plugin_works_as_written_without_the_sdk(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _project(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORTPLUG_OVERRIDE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env["ORTPLUG_CACHE_DIR"] = str(tmp_path / "cache")

    def python(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-W", "always", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    for _ in range(2):  # the probe runs, then its cached facts rule the plugin out
        run = python("-m", "ortplug.cli.main", "run", "--repeat", "1")
        assert run.returncode == 0, run.stderr
        assert "acme" not in run.stderr, run.stderr
    doctor = python("-m", "ortplug.cli.main", "doctor")
    assert [line for line in doctor.stdout.splitlines() if "acme" in line and "FAIL" in line] == []
    assert "acme" not in doctor.stderr
    plugins = python("-m", "ortplug.cli.main", "plugins")
    (row,) = [line for line in plugins.stdout.splitlines() if line.startswith("acme ")]
    assert "active" in row and "no declaration" not in row
    unimported = python(
        "-c",
        "import sys; from ortplug import OnnxBackend, LocalCheckpoint; "
        "from ortplug.testing import demo_model; "
        "OnnxBackend.from_checkpoint(LocalCheckpoint(demo_model()).resolve()); "
        "print('ortplug_acme' in sys.modules)",
    )
    assert unimported.stdout.split() == ["False"], unimported.stderr
    tests = python("-m", "pytest", "-q", "-p", "no:cacheprovider", str(site / "tests"))
    assert tests.returncode == 0, tests.stdout + tests.stderr
