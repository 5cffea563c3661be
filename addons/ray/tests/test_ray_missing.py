"""Without the Ray add-on, each name of ``ortplug.integrations.ray`` (its spelling before the
add-on) is one line naming what to install; with it, a ``DeprecationWarning`` names the new
spelling (``ortplug batch`` without the add-on: ``test_ray_installs_alone.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import ortplug_ray
import pytest
from ortplug.addons import RAY

NAMES = tuple(ortplug_ray.__all__)

_WITHOUT = (
    "import json, sys\n"
    "sys.modules['ortplug_ray'] = None\n"  # as in an environment without ortplug-ray
    "import ortplug.integrations.ray as old\n"
    "from ortplug.errors import AddonNotInstalledError\n"
    "said = []\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        getattr(old, name)\n"
    "    except AddonNotInstalledError as exc:\n"
    "        said.append([name, str(exc)])\n"
    "try:\n"
    "    from ortplug.integrations.ray import predict\n"
    "except ImportError as exc:\n"
    "    said.append(['from-import', str(exc)])\n"
    "print(json.dumps(said))\n"
)


def test_each_old_name_without_the_add_on_is_the_one_line_install_hint() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT, *NAMES], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    hint = (
        "needs the Ray add-on (ortplug-ray), which is not installed; install it with: "
        f"{RAY.install_line()}"
    )
    assert json.loads(done.stdout) == [
        *([name, f"ortplug.integrations.ray.{name} {hint}"] for name in NAMES),
        ["from-import", f"ortplug.integrations.ray.predict {hint}"],
    ]


@pytest.mark.parametrize("name", NAMES)
def test_each_old_name_with_the_add_on_is_the_add_ons_and_names_the_new_spelling(name) -> None:
    import ortplug.integrations.ray as old

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(old, name)
    assert value is getattr(ortplug_ray, name)
    assert [(w.category, str(w.message), w.filename) for w in caught] == [
        (
            DeprecationWarning,
            f"ortplug.integrations.ray.{name} moved to the Ray add-on: write `from ortplug_ray "
            f"import {name}` (the old spelling goes in the next release)",
            __file__,
        )
    ]


def test_the_shim_lists_every_public_name_of_the_add_on() -> None:
    import ortplug.integrations.ray as old

    assert sorted(old.__all__) == sorted(ortplug_ray.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'OnnxBackend'"):
        old.OnnxBackend  # noqa: B018
