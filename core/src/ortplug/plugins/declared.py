"""A config class takes its ``kind`` and ``ort_name`` from the manifest that names it
(:func:`declared_kind`), so the manifest is the one place they are said."""

from __future__ import annotations

import functools
from typing import TypeVar

from .declaration import (
    FILENAME,
    DeclarationError,
    KindDeclaration,
    declaration_path,
    declarations_beside,
    load_file,
    source_of,
)

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


@functools.cache
def _names_beside(module: str) -> dict[str, tuple[object, object]]:
    """Each kind's ``(kind, ort_name)`` in the manifest beside ``module``'s top-level package, by
    its config path: read off the JSON (the plugin host checks the file; a config class's
    import, in every process its kind is in play, pays no more than the read)."""
    top = module.partition(".")[0]
    path = declaration_path(top)
    data = load_file(path, source_of(top)) if path is not None and path.is_file() else {}
    plugins = data.get("plugins") if isinstance(data, dict) else None
    found: dict[str, tuple[object, object]] = {}
    for plugin in plugins.values() if isinstance(plugins, dict) else ():
        kinds = plugin.get("kinds") if isinstance(plugin, dict) else None
        for kind in kinds if isinstance(kinds, list) else ():
            if isinstance(kind, dict) and isinstance(kind.get("config"), str):
                found[kind["config"]] = (kind.get("kind"), kind.get("ort_name"))
    return found


def _missing(cls: type) -> DeclarationError:
    path = f"{cls.__module__}:{cls.__qualname__}"
    top = cls.__module__.partition(".")[0]
    return DeclarationError(
        f"{cls.__qualname__}: expected a kind in {top}/{FILENAME} whose config is {path!r}, "
        f"got none; declare it there, or set kind and ort_name on the class (hook form)"
    )


def kind_of(cls: type) -> KindDeclaration:
    """The declared kind whose ``config`` names ``cls`` (``module:QualName``), checked; one-line
    error if none does."""
    found = _kinds_beside(cls.__module__).get(f"{cls.__module__}:{cls.__qualname__}")
    if found is None:
        raise _missing(cls)
    return found


def declared_kind(cls: _C) -> _C:
    """Set ``cls.kind`` and ``cls.ort_name`` from the manifest's kind that names ``cls``."""
    names = _names_beside(cls.__module__).get(f"{cls.__module__}:{cls.__qualname__}")
    if names is None:
        raise _missing(cls)
    kind, ort_name = names
    if not isinstance(kind, str) or not isinstance(ort_name, str) or not kind or not ort_name:
        raise DeclarationError(
            f"{cls.__qualname__}: expected its manifest kind's kind and ort_name as names, got "
            f"{kind!r} and {ort_name!r}"
        )
    type.__setattr__(cls, "kind", kind)
    type.__setattr__(cls, "ort_name", ort_name)
    return cls
