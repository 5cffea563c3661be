"""The serving add-on plugs into the core's public names only, as a third party's would: every
``ortplug`` module it imports is public and every name it takes from one is in that module's
``__all__``; it reads no private attribute of anything but its own objects."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

_SRC = Path(__file__).resolve().parents[1] / "src" / "ortplug_serve"


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _trees() -> list[tuple[str, ast.Module]]:
    paths = sorted(_SRC.glob("*.py"))
    assert paths, f"no sources under {_SRC}"
    return [(path.name, ast.parse(path.read_text(encoding="utf-8"))) for path in paths]


def test_every_core_name_it_imports_is_public() -> None:
    taken = []
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                if node.module.split(".")[0] == "ortplug":
                    taken += [(name, node.lineno, node.module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] == "ortplug" for a in node.names), name
    assert taken
    wrong = []
    for file, line, module, imported in taken:
        if any(map(_private, module.split("."))):
            wrong.append(f"{file}:{line} imports the private module {module}")
            continue
        public = getattr(importlib.import_module(module), "__all__", ())
        if imported not in public:
            wrong.append(f"{file}:{line} imports {module}.{imported}, not in its __all__")
    assert not wrong, "\n".join(wrong)


def test_it_reads_no_private_attribute_but_its_own() -> None:
    reaching = [
        f"{name}:{node.lineno} reads {ast.unparse(node.value)}.{node.attr}"
        for name, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and _private(node.attr)
        and ast.unparse(node.value) not in ("self", "cls")
        and node.attr != "_getframe"
    ]
    assert not reaching, "\n".join(reaching)
