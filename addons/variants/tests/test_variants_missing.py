"""Without the variants add-on, ``ortplug variants`` and each name of
``ortplug.verification.precision_variants`` (its spelling before the add-on) is one line naming
what to install; with it, a ``DeprecationWarning`` names the new spelling (the real fresh venv:
``test_variants_installs_alone.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import ortplug_variants
import pytest
from ortplug.addons import VARIANTS

NAMES = tuple(ortplug_variants.__all__)
OLD = "ortplug.verification.precision_variants"

#: Run first in each process: no ``ortplug_variants`` package, no entry point of it.
_HIDDEN = """
import sys, importlib.metadata as metadata
sys.modules["ortplug_variants"] = None
_listed = metadata.entry_points
def _entry_points(**params):
    return metadata.EntryPoints(p for p in _listed(**params) if not p.value.startswith("ortplug_variants"))
metadata.entry_points = _entry_points
"""

_NAMES = (
    "import json\n"
    "import ortplug.verification.precision_variants as old\n"
    "from ortplug.errors import AddonNotInstalledError\n"
    "said = []\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        getattr(old, name)\n"
    "    except AddonNotInstalledError as exc:\n"
    "        said.append([name, str(exc)])\n"
    "print(json.dumps(said))\n"
)

HINT = (
    "needs the variants add-on (ortplug-variants), which is not installed; install it with: "
    f"{VARIANTS.install_line()}"
)


def _hidden(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _HIDDEN + code, *args], capture_output=True, text=True, timeout=120
    )


def test_each_old_name_without_the_add_on_is_the_one_line_install_hint() -> None:
    done = _hidden(_NAMES, *NAMES)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[name, f"{OLD}.{name} {HINT}"] for name in NAMES]


def test_the_command_without_the_add_on_is_the_one_line_install_hint(tmp_path) -> None:
    code = "from ortplug.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    done = _hidden(code, "variants", str(tmp_path / "m.onnx"), "--int8")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"ortplug variants: error: ortplug variants {HINT}\n"


@pytest.mark.parametrize("name", NAMES)
def test_each_old_name_with_the_add_on_is_the_add_ons_and_names_the_new_spelling(name) -> None:
    import ortplug.verification.precision_variants as old

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(old, name)
    assert value is getattr(ortplug_variants, name)
    assert [(w.category, str(w.message), w.filename) for w in caught] == [
        (
            DeprecationWarning,
            f"{OLD}.{name} moved to the variants add-on: write `from ortplug_variants "
            f"import {name}` (the old spelling goes in the next release)",
            __file__,
        )
    ]


def test_the_shim_lists_every_public_name_of_the_add_on() -> None:
    import ortplug.verification.precision_variants as old
    from ortplug_variants import writing

    assert sorted(old.__all__) == sorted(ortplug_variants.__all__) == sorted(writing.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'Variant'"):
        old.Variant  # noqa: B018


def test_parsing_the_command_imports_neither_onnx_nor_numpy() -> None:
    code = (
        "import sys\n"
        "from ortplug_variants.command import COMMAND\n"
        "print(sorted({'onnx', 'numpy', 'onnxruntime'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr
