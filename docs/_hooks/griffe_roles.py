"""Griffe extension: the Sphinx roles of ortplug's docstrings (:class:`X`, :meth:`~a.b.c`) become
cross-references of the site.

A role whose target resolves in the code (from the docstring's own scope outwards, as Sphinx
looks it up; failing that, by importing it) becomes an optional reference: a link where that object has a page here, its name
in code otherwise. A role whose target resolves nowhere stays a required reference, which
``mkdocs build --strict`` reports, so a docstring naming something that is not there fails CI.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import griffe

#: ``:role:`target``` and ``:role:`title <target>```; ``~`` shows only the last part.
_ROLE = re.compile(r":(?:py:)?(class|func|meth|attr|mod|data|exc|obj|const):`([^`]+)`")


def _module_exists(name: str) -> bool:
    """A module Griffe does not load (a namespace package's, ``ortplug/fit/``) that imports."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _at_run_time(name: str) -> str | None:
    """The path of what ``name`` is once imported (a name a module gives on first use, PEP 562,
    which Griffe reads no definition of: ``ortplug.patch`` is the drop-in add-on's)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                found = getattr(found, attribute)
        except AttributeError:
            return None
        module, qualname = getattr(found, "__module__", None), getattr(found, "__qualname__", None)
        return f"{module}.{qualname}" if module and qualname else name
    return None


def _target(obj: griffe.Object, loader: griffe.GriffeLoader, name: str, role: str) -> str | None:
    """The full path ``name`` stands for in ``obj``'s docstring, or ``None`` when nothing is."""
    collection = loader.modules_collection
    if name.startswith("."):  # relative to the module, then to its package
        module = obj.module
        scopes = [module.path, *([module.parent.path] if module.parent else [])]
        candidates = [f"{scope}.{name.lstrip('.')}" for scope in scopes]
    else:
        head, _, rest = name.partition(".")
        candidates = []
        try:
            resolved = obj.resolve(head)
            candidates.append(f"{resolved}.{rest}" if rest else resolved)
        except griffe.NameResolutionError:
            pass
        candidates.append(name)
    for candidate in candidates:
        try:
            collection.get_member(candidate)
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            continue
        return candidate
    if role == "mod":
        return next((c for c in candidates if _module_exists(c)), None)
    return next(filter(None, map(_at_run_time, candidates)), None)


def _rewrite(obj: griffe.Object, loader: griffe.GriffeLoader) -> None:
    if obj.docstring is not None and ":" in obj.docstring.value:

        def reference(found: re.Match[str]) -> str:
            text = found.group(2).strip()
            title, _, explicit = text.partition(" <")
            name = explicit.rstrip(">") if explicit else title
            short = name.startswith("~")
            name = name.lstrip("~")
            shown = name.rsplit(".", 1)[-1] if short else (title.lstrip("~") if explicit else name)
            path = _target(obj, loader, name, found.group(1))
            if path is None:
                return f'<autoref identifier="{name}"><code>{shown}</code></autoref>'
            return f'<autoref identifier="{path}" optional><code>{shown}</code></autoref>'

        obj.docstring.value = _ROLE.sub(reference, obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias:
            _rewrite(member, loader)  # type: ignore[arg-type]


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring of a package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **_: Any) -> None:
        _rewrite(pkg, loader)
