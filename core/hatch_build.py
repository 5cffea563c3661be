"""Build hook: the core's wheel carries this repository's plugin declarations.

Each ``plugins/*/src/<package>/ortplug.json`` goes to ``ortplug/plugin_host/manifests/<package>.json``
and each ``examples/*/src/<package>/ortplug.json`` to ``.../manifests/examples/``: the core
knows this project's kinds (names, distributions, install lines, catalog fields, device
classes) when their plugins are not installed, from the plugins' own files, with no copy in
the core's source. An sdist carries them under ``src/`` so a wheel built from it has them too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

_FOLDERS = {"plugins": "", "examples": "examples/"}


class FirstPartyManifests(BuildHookInterface):  # type: ignore[type-arg]
    """Adds the repository's ``ortplug.json`` files (none when built outside the checkout)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        repository = Path(self.root).resolve().parent
        prefix = "src/ortplug" if self.target_name == "sdist" else "ortplug"
        for folder, under in _FOLDERS.items():
            for path in sorted(repository.glob(f"{folder}/*/src/*/ortplug.json")):
                target = f"{prefix}/plugin_host/manifests/{under}{path.parent.name}.json"
                build_data["force_include"][str(path)] = target
