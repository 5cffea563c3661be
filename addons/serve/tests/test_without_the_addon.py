"""Without ortplug-serve, each of its public names in the core's spelling, each throughput hint and
each serving command says in one line what to install; the latency path needs none of it.

Each check runs in a fresh process where the add-on is hidden: its package cannot be imported
and its entry points are not listed (as in an environment that never installed it; the fresh
venv of ``tests/test_isolated_install.py`` is the same check for real).
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import files

import pytest

DEMO = str(files("ortplug.data") / "demo.onnx")

#: Run first in each process: no ``ortplug_serve`` package, no entry point of it.
_HIDDEN = """
import sys, importlib.metadata as metadata
sys.modules["ortplug_serve"] = None
_listed = metadata.entry_points
def _entry_points(**params):
    return metadata.EntryPoints(p for p in _listed(**params) if not p.value.startswith("ortplug_serve"))
metadata.entry_points = _entry_points
"""

#: The core's public spellings of the add-on's names.
NAMES = [
    ("ortplug", "ServingConfig"),
    ("ortplug.backend", "ServingConfig"),
    ("ortplug.backend", "ServingReport"),
    ("ortplug.backend", "DeviceServing"),
    ("ortplug.backend", "Layout"),
    ("ortplug.backend", "Trial"),
    ("ortplug.backend", "recorded_serving"),
]


def _hidden(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _HIDDEN + code], capture_output=True, text=True, timeout=300
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return _hidden(f"from ortplug.cli.main import main\nsys.exit(main({list(args)!r}))")


def _says_install(line: str) -> None:
    assert "the serving add-on (ortplug-serve), which is not installed" in line, line
    assert "install it with: pip install" in line and "[serve]" in line, line


@pytest.mark.parametrize(("module", "name"), NAMES, ids=[f"{m}.{n}" for m, n in NAMES])
def test_each_public_name_names_the_package_to_install(module: str, name: str) -> None:
    code = (
        "from ortplug.errors import AddonNotInstalledError\n"
        "import importlib\n"
        f"try:\n    getattr(importlib.import_module({module!r}), {name!r})\n"
        "except AddonNotInstalledError as exc:\n    print(exc)\n"
        f"try:\n    exec('from {module} import {name}')\n"
        "except AddonNotInstalledError as exc:\n    print(exc)\n"
    )
    done = _hidden(code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1]
    assert lines[0].startswith(f"{module}.{name} needs the serving add-on"), lines[0]
    _says_install(lines[0])


@pytest.mark.parametrize("hint", ["throughput", "cumulative_throughput"])
def test_a_throughput_hint_names_the_package_and_the_latency_hint_serves(hint: str) -> None:
    code = (
        "from ortplug import LocalCheckpoint, OnnxBackend\n"
        "from ortplug.errors import AddonNotInstalledError\n"
        "import numpy as np\n"
        f"checkpoint = LocalCheckpoint({DEMO!r}).resolve()\n"
        "with OnnxBackend.from_checkpoint(checkpoint) as backend:\n"
        "    print(backend.run({'x': np.ones((1, 8), np.float32)})['probs'].shape)\n"
        f"try:\n    OnnxBackend.from_checkpoint(checkpoint, performance_hint={hint!r})\n"
        "except AddonNotInstalledError as exc:\n    print(exc)\n"
    )
    done = _hidden(code)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # the add-on's import beside the session's build failed silently
    served, missing = done.stdout.splitlines()
    assert served.startswith("(1, ")
    assert missing.startswith(f"performance_hint={hint!r} needs the serving add-on"), missing
    _says_install(missing)


@pytest.mark.parametrize(
    "args",
    [("bench", DEMO, "--callers", "1"), ("bench", DEMO, "--hint", "throughput"),
     ("run", DEMO, "--hint", "throughput")],
    ids=["bench --callers", "bench --hint", "run --hint"],
)  # fmt: skip
def test_a_serving_command_is_one_line_naming_the_package(args: tuple[str, ...]) -> None:
    done = _cli(*args)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"ortplug {args[0]}: error: "), line
    _says_install(line)


def test_the_bench_callers_command_names_the_package_and_help_works() -> None:
    done = _cli("bench-callers", DEMO)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("ortplug bench-callers: error: ortplug bench-callers needs the serving")
    helped = _cli("--help")
    assert helped.returncode == 0 and "bench" in helped.stdout, helped.stderr
    assert "bench-callers" not in helped.stdout


def test_info_says_the_serving_layouts_need_the_package() -> None:
    done = _cli("info", "--model", DEMO)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("serving")]
    assert line.startswith("serving      not available: performance_hint='throughput' needs")
    _says_install(line)
    data = json.loads(_cli("info", "--model", DEMO, "--json").stdout)
    assert data["serving"] is None
