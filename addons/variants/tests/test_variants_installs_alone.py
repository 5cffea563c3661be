"""ortplug-variants installs alone on the core and the CPU plugin in a fresh venv: before it,
``ortplug variants`` and each old name is one line naming the install; after it, the add-on's own
tests pass there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import onnxruntime as ort
import ortplug_variants
import pytest
from venvs import ROOT, fresh_venv, pip_in, python_in, refused_names

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


#: ``ortplug --help`` in the venv, then what of argparse and attrs it imported.
_HELP = (
    "import sys\nfrom ortplug.cli.main import main\nmain(['--help'])\n"
    "print(sorted({'argparse', 'attr'} & set(sys.modules)))\n"
)


def _help_shipped(python: str) -> bool:
    """Whether ``ortplug --help`` printed the parser's page, read from the page shipped for the
    add-on commands installed (neither argparse nor attrs imported)."""
    shipped = subprocess.run([python, "-c", _HELP], capture_output=True, text=True, check=True)
    parsed = [python, "-m", "ortplug.cli.main", "-h", "-h"]  # two flags: argparse answers
    rendered = subprocess.run(parsed, capture_output=True, text=True, check=True)
    return shipped.stdout == f"{rendered.stdout}[]\n"


#: What the add-on's tests need besides it: the models' builder and pytest.
_TESTS_NEED = ("onnx==1.23.2", "pytest>=8", "pytest-timeout>=2.3")


@pytest.fixture(scope="module")
def core_and_cpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the core, the CPU plugin, this ONNX Runtime and the tests' tools."""
    return fresh_venv(
        tmp_path_factory.mktemp("variants-alone") / "venv",
        str(ROOT / "core"),
        str(ROOT / "plugins" / "cpu"),
        f"onnxruntime=={ort.__version__}",
        *_TESTS_NEED,
    )


def test_the_variants_add_on_installs_alone_and_its_tests_pass_there(core_and_cpu, tmp_path):
    python = python_in(core_and_cpu)
    install = subprocess.run(
        [python, "-c", "from ortplug.addons import VARIANTS; print(VARIANTS.install_line())"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    hint = (
        f"needs the variants add-on (ortplug-variants), which is not installed; install it with: "
        f"{install}"
    )
    names = list(ortplug_variants.__all__)
    old = "ortplug.verification.precision_variants"
    assert refused_names(python, old, names) == [f"{old}.{n} {hint}" for n in names]
    command = [python, "-m", "ortplug.cli.main", "variants", str(tmp_path / "m.onnx"), "--int8"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"ortplug variants: error: ortplug variants {hint}\n"
    assert _help_shipped(python)  # no add-on command

    pip_in(core_and_cpu, "install", "--quiet", str(ROOT / "addons" / "variants"))
    assert _help_shipped(python)  # the variants command alone
    tests = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
         "addons/variants/tests"],
        cwd=ROOT, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout.splitlines()[-1]
