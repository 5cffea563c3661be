"""One namespace for plugin authors: ``ortplug.plugins``; ``ortplug.testing`` without pytest."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import onnx
import ortplug.plugins
import pytest
from ortplug.testing import demo_model, demo_static_model

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_SOURCES = sorted([*ROOT.glob("plugins/*/src/**/*.py"), *ROOT.glob("examples/*/src/**/*.py")])


@pytest.mark.parametrize("name", ortplug.plugins.__all__)
def test_every_name_of_the_namespace_resolves(name: str) -> None:
    assert getattr(ortplug.plugins, name) is not None


@pytest.mark.parametrize("path", PLUGIN_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_shipped_plugins_import_ortplug_only_from_the_namespace(path: Path) -> None:
    modules = {
        node.module
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ortplug")
    }
    core = {m for m in modules if m == "ortplug" or m.startswith("ortplug.")}
    assert core <= {"ortplug.plugins"}, core


def test_ortplug_testing_imports_without_pytest() -> None:
    code = (
        "import sys\n"
        "sys.modules['pytest'] = None  # as if pytest were not installed\n"
        "from ortplug.testing import demo_model, make_host, make_plugin_host\n"
        "print(demo_model().name, make_host().fact('cpu', 'usable_cpus'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout.split()) == (0, ["demo.onnx", "8"]), done.stderr


@pytest.mark.parametrize(
    ("model", "shape", "documented"),
    [(demo_model, ["batch", 8], "[batch, 8]"), (demo_static_model, [4, 8], "[4, 8]")],
)
def test_the_demo_models_are_as_documented(model, shape, documented) -> None:  # type: ignore[no-untyped-def]
    (given,) = onnx.load(model()).graph.input
    dims = [d.dim_param or d.dim_value for d in given.type.tensor_type.shape.dim]
    assert (given.name, dims) == ("x", shape)
    assert "``x``" in model.__doc__ and f"``{documented}``" in model.__doc__
