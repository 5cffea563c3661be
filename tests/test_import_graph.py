"""The core's import graph (issue 29): no circle, no reach into another package's privates,
and the plugin author's SDK (:mod:`ortplug.plugins`) free of the runtime.

A module imported across packages is public (no leading underscore), so a reader tells a
package's surface from its insides by the names alone; a circle means two modules cannot
be read one after the other. Imports inside functions and under ``TYPE_CHECKING`` count.
"""

from __future__ import annotations

import ast
from pathlib import Path

_SRC = Path(__file__).resolve().parents[1] / "core" / "src"
#: What the SDK may use: the values hooks take and return, and their lower layers.
_SDK_MAY_IMPORT = ("cache", "checkpoint", "errors", "host", "plugins", "providers", "settings")


def _name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(_SRC).with_suffix("").parts)
    package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if package else parts), package


def _target(node: ast.ImportFrom, module: str, package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _modules() -> dict[str, list[tuple[str, tuple[str, ...], int]]]:
    """Each core module's imports of ortplug: ``(module, names, line)``, a name that is a
    submodule counted as an import of that submodule."""
    paths = sorted((_SRC / "ortplug").rglob("*.py"))
    known = {_name(path)[0] for path in paths}
    found: dict[str, list[tuple[str, tuple[str, ...], int]]] = {}
    for path in paths:
        module, package = _name(path)
        rows = found.setdefault(module, [])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                target = _target(node, module, package)
                if not target.startswith("ortplug"):
                    continue
                names = tuple(alias.name for alias in node.names)
                subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in known]
                rows += [(sub, (), node.lineno) for sub in subs]
                rest = tuple(n for n in names if f"{target}.{n}" not in known)
                if rest:
                    rows.append((target, rest, node.lineno))
            elif isinstance(node, ast.Import):
                rows += [
                    (a.name, (), node.lineno) for a in node.names if a.name.startswith("ortplug")
                ]
    return found


def _package(module: str) -> str:
    """``ortplug.session.plan`` -> ``ortplug.session``; a top-level module is its own package."""
    return ".".join(module.split(".")[:2])


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def test_no_module_imports_a_private_module_or_name_of_another_package() -> None:
    reaching = [
        f"{module}:{line} imports {target} {' '.join(names)}".rstrip()
        for module, rows in _modules().items()
        for target, names, line in rows
        if _package(target) != _package(module)
        and (any(map(_private, target.split(".")[1:])) or any(map(_private, names)))
    ]
    assert not reaching, "another package's private module or name imported:\n" + "\n".join(
        reaching
    )


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for next_node in graph[node]:
            if next_node not in index:
                visit(next_node)
                low[node] = min(low[node], low[next_node])
            elif next_node in stack:
                low[node] = min(low[node], index[next_node])
        if low[node] == index[node]:
            group = [stack.pop()]
            while group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                circles.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return circles


def test_the_core_has_no_import_circle() -> None:
    modules = _modules()
    graph = {m: {t for t, _, _ in rows if t in modules and t != m} for m, rows in modules.items()}
    assert _circles(graph) == []


def test_the_plugin_sdk_imports_nothing_of_the_runtime() -> None:
    """``ortplug.plugins`` (hook specs, records, option fields, the EP-package adapter, the
    declaration format) is what a plugin builds on; the host that runs plugins lives apart."""
    sdk = {m: rows for m, rows in _modules().items() if _package(m) == "ortplug.plugins"}
    allowed = tuple(f"ortplug.{name}" for name in _SDK_MAY_IMPORT)
    runtime = [
        f"{module}:{line} imports {target}"
        for module, rows in sdk.items()
        for target, _, line in rows
        if not any(target == a or target.startswith(f"{a}.") for a in allowed)
    ]
    assert not runtime, "the SDK imports the runtime:\n" + "\n".join(runtime)


def _defined_privates() -> dict[str, set[str]]:
    """Each private attribute name ortplug's classes define (``self._x = ...``, a ``_x`` method
    or class attribute) -> the packages that define one by that name."""
    defined: dict[str, set[str]] = {}
    for path in sorted((_SRC / "ortplug").rglob("*.py")):
        package = _package(_name(path)[0])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names = [inner.name]
                elif isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Store):
                    names = [inner.attr] if ast.unparse(inner.value) == "self" else []
                elif isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
                    names = [inner.target.id]
                else:
                    continue
                for name in filter(_private, names):
                    defined.setdefault(name, set()).add(package)
    return defined


def test_no_module_reaches_into_another_package_s_private_attributes() -> None:
    """``obj._x`` where only another package's classes define ``_x``: a seam to name, not a
    reach (``self``/``cls`` and names no ortplug class defines, like ``sys._getframe``, pass)."""
    defined = _defined_privates()
    reaching = []
    for path in sorted((_SRC / "ortplug").rglob("*.py")):
        module = _name(path)[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        foreign = {  # modules of other projects imported here: their privates are theirs
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
            if not alias.name.startswith("ortplug")
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not _private(node.attr):
                continue
            owner = ast.unparse(node.value)
            owners = defined.get(node.attr)
            if owner in ("self", "cls", *foreign) or not owners or _package(module) in owners:
                continue
            reaching.append(f"{module}:{node.lineno} reaches {owner}.{node.attr}")
    assert not reaching, "another package's private attribute read:\n" + "\n".join(reaching)
