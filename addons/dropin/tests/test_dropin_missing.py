"""Without the drop-in add-on, each of the core's spellings of its names is one line naming what
to install (``tests/test_isolated_install.py``-style venvs check ``ortplug exec`` for real:
``test_dropin_installs_alone.py``)."""

from __future__ import annotations

import json
import subprocess
import sys

from ortplug.addons import DROPIN

NAMES = ("InferenceSession", "Patch", "patch", "unpatch")

#: Python as in an environment without ortplug-dropin: its package cannot be imported.
_WITHOUT = (
    "import json, sys\n"
    "sys.modules['ortplug_dropin'] = None\n"
    "import ortplug\n"
    "from ortplug.errors import AddonNotInstalledError\n"
    "said = []\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        getattr(ortplug, name)\n"
    "    except AddonNotInstalledError as exc:\n"
    "        said.append([name, str(exc), isinstance(exc, ImportError)])\n"
    "try:\n"
    "    from ortplug import InferenceSession\n"
    "except ImportError as exc:\n"
    "    said.append(['from-import', str(exc), True])\n"
    "print(json.dumps(said))\n"
)


def test_each_public_name_without_the_add_on_is_the_one_line_install_hint() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT, *NAMES], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    hint = (
        "needs the drop-in add-on (ortplug-dropin), which is not installed; install it with: "
        f"{DROPIN.install_line()}"
    )
    assert json.loads(done.stdout) == [
        *([name, f"ortplug.{name} {hint}", True] for name in NAMES),
        ["from-import", f"ortplug.InferenceSession {hint}", True],
    ]
