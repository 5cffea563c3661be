"""The add-ons (addons/*/src) use only the core's public names, as a provider plugin does: no
``ortplug.x._private`` module, no ``_private`` name of the core, and the core never imports an
add-on by a static import (it finds them through ``ortplug.addons``)."""

from __future__ import annotations

import ast
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
_ADDONS = sorted((_ROOT / "addons").glob("*/src/ortplug_*"))


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _core_imports(path: Path) -> list[tuple[str, tuple[str, ...], int]]:
    """``(module, names, line)`` for each import of ``ortplug`` (the core) in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == "ortplug" or node.module.startswith("ortplug."):
                found.append((node.module, tuple(a.name for a in node.names), node.lineno))
        elif isinstance(node, ast.Import):
            found += [
                (a.name, (), node.lineno)
                for a in node.names
                if a.name == "ortplug" or a.name.startswith("ortplug.")
            ]
    return found


def test_there_are_add_ons_to_check() -> None:
    assert [path.name for path in _ADDONS] == [
        "ortplug_dropin",
        "ortplug_ray",
        "ortplug_serve",
        "ortplug_variants",
    ]


def test_an_add_on_imports_only_the_cores_public_modules_and_names() -> None:
    reaching = [
        f"{path.relative_to(_ROOT)}:{line} imports {module} {' '.join(names)}".rstrip()
        for addon in _ADDONS
        for path in sorted(addon.rglob("*.py"))
        for module, names, line in _core_imports(path)
        if any(map(_private, module.split("."))) or any(map(_private, names))
    ]
    assert not reaching, "an add-on reaches into the core's privates:\n" + "\n".join(reaching)


def test_the_core_imports_no_add_on() -> None:
    packages = {addon.name for addon in _ADDONS}
    importing = []
    for path in sorted((_ROOT / "core" / "src" / "ortplug").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            importing += [
                f"{path.relative_to(_ROOT)}:{node.lineno} imports {name}"
                for name in names
                if name.split(".")[0] in packages
            ]
    assert not importing, "the core imports an add-on:\n" + "\n".join(importing)
