"""A config class takes its ``kind`` and ``ort_name`` from the manifest that names it.

The manifest (``ortplug.json``) is the one place a plugin with one says what its kinds are: a
kind names its config class by import path (``"config": "ortplug_acme.config:AcmeProvider"``),
and the class, decorated with :func:`declared_kind`, reads the kind's names back from that
entry instead of restating them::

    @declared_kind
    @attrs.frozen(kw_only=True)
    class AcmeProvider:
        kind: ClassVar[str]
        ort_name: ClassVar[str]

A class no kind of its package's manifest names is one line saying so, at its import. A
hook-form plugin (no manifest) sets the two class variables itself.
"""

from __future__ import annotations

import functools
from typing import TypeVar

from .declaration import FILENAME, DeclarationError, KindDeclaration, declarations_beside

__all__ = ["declared_kind", "kind_of"]

_C = TypeVar("_C", bound=type)


@functools.cache
def _kinds_beside(module: str) -> dict[str, KindDeclaration]:
    """The kinds of the manifest beside ``module``'s top-level package, by their config path."""
    top = module.partition(".")[0]
    return {
        str(kind.config): kind
        for declaration in declarations_beside(top).values()
        for kind in declaration.kinds
    }


def kind_of(cls: type) -> KindDeclaration:
    """The declared kind whose ``config`` names ``cls`` (``module:QualName``); one-line error if
    none does."""
    path = f"{cls.__module__}:{cls.__qualname__}"
    found = _kinds_beside(cls.__module__).get(path)
    if found is None:
        top = cls.__module__.partition(".")[0]
        raise DeclarationError(
            f"{cls.__qualname__}: expected a kind in {top}/{FILENAME} whose config is {path!r}, "
            f"got none; declare it there, or set kind and ort_name on the class (hook form)"
        )
    return found


def declared_kind(cls: _C) -> _C:
    """Set ``cls.kind`` and ``cls.ort_name`` from the manifest's kind that names ``cls``."""
    declared = kind_of(cls)
    type.__setattr__(cls, "kind", declared.kind)
    type.__setattr__(cls, "ort_name", declared.ort_name)
    return cls
