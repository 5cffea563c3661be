"""Run a function right after a module's first import (before code that imports it runs on).

For what must happen between ``import onnxruntime`` and its caller's next line: the build
path's logger hooks, ``ortplug.patch()`` applied before ONNX Runtime's first import. Imports
nothing costly (``ortplug exec`` runs it at every Python's start).
"""

from __future__ import annotations

import contextlib
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["after_import"]


class _AfterImport:
    """A meta path finder by its ``find_spec`` (subclassing ``importlib.abc.MetaPathFinder``
    would import ``importlib.abc``, ~7 ms) that wraps the module's loader once."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.then = then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        import importlib.util

        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the next finder's (another hook's too)
        loader = spec.loader if spec else None
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec
        then = self.then

        def exec_then(module: ModuleType) -> None:
            vars(loader).pop("exec_module", None)  # the loader's own again (it may be shared)
            exec_module(module)
            then(module)

        with contextlib.suppress(AttributeError):  # a loader without instance attributes
            loader.exec_module = exec_then  # type: ignore[method-assign,union-attr]
        return spec


def after_import(name: str, then: Callable[[ModuleType], None]) -> None:
    """Call ``then(module)`` once ``name`` is first imported (``name`` not imported yet)."""
    sys.meta_path.insert(0, _AfterImport(name, then))
