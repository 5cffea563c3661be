"""``ortplug.patch()``: the drop-in in place of ``onnxruntime.InferenceSession``, for code that
builds its own sessions.

Cheap to call before ``onnxruntime`` is imported (``ortplug exec`` does, at start-up): the swap
then happens right after ONNX Runtime's import, and a program that never imports it is left
alone. Imports neither ONNX Runtime nor numpy until then, nor contextlib or typing (every
Python ``ortplug exec`` starts pays for what this module imports).
"""

from __future__ import annotations

import _thread  # threading would import functools and collections (~4 ms at every start)
import sys
from types import ModuleType

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up cost)
if TYPE_CHECKING:
    from typing import Any

    from ._session import SessionRecord

__all__ = ["TAKEOVER_RULES", "Patch", "patch", "unpatch"]

#: Which explicit provider lists ortplug's policy may take over: none; lists naming only
#: ``CPUExecutionProvider`` (the common hard-coding; its options give way too); all.
TAKEOVER_RULES = ("none", "cpu", "all")

_NAME = "InferenceSession"
_LOCK = _thread.RLock()


class Patch:
    """A patch: its takeover rule and the sessions built under it (a context manager: leaving
    the block ends it, and the latest patch not ended is in force again, or none; blocks of
    several threads may end in any order)."""

    def __init__(self, takeover: str) -> None:
        self.takeover = takeover
        self._sessions: list[SessionRecord] = []
        self._class: Any = None  # the drop-in subclass installed (once ONNX Runtime is imported)

    @property
    def sessions(self) -> tuple[SessionRecord, ...]:
        """Each session built under this patch: model, realized chain, why."""
        return tuple(self._sessions)

    @property
    def active(self) -> bool:
        """Whether this patch is the one in force."""
        return _ACTIVE is self

    def _install(self) -> None:
        """Swap the drop-in in wherever a loaded module holds ONNX Runtime's class (lock held);
        an ONNX Runtime the drop-in is not made for keeps its class, said in one line."""
        from ._runtime import UnsupportedRuntimeError

        try:
            from ._session import InferenceSession, _OrtSession
        except UnsupportedRuntimeError as exc:
            sys.stderr.write(f"ortplug: {exc}; onnxruntime.InferenceSession is left as it is\n")
            return

        self._class = type(
            _NAME,
            (InferenceSession,),
            {
                "__module__": InferenceSession.__module__,
                "__qualname__": _NAME,
                "__doc__": InferenceSession.__doc__,
                "takeover": self.takeover,
                "_recorder": staticmethod(self._sessions.append),
            },
        )
        _swap(_OrtSession, self._class)

    def _remove(self) -> None:
        """Put ONNX Runtime's class back wherever a module holds the drop-in (lock held): where
        this patch put it, and where a module imported under the patch bound it."""
        if self._class is None:
            return
        from ._session import _OrtSession

        _swap(self._class, _OrtSession)
        self._class.takeover = "none"  # a reference kept past the patch takes over no list
        self._class._recorder = None  # and records into no patch
        self._class = None

    def __enter__(self) -> Patch:
        return self

    def __exit__(self, *_: object) -> None:
        with _LOCK:
            if self not in _OPEN:  # ended already, or unpatch() ended every patch
                return
            _OPEN.remove(self)
            if self.active:
                _put_in_force(_OPEN[-1] if _OPEN else None)

    def __repr__(self) -> str:
        state = "active" if self.active else "removed"
        return f"<ortplug.Patch takeover={self.takeover!r} {state}, {len(self._sessions)} sessions>"


_ACTIVE: Patch | None = None
#: The patches not ended, oldest first: the last one is in force.
_OPEN: list[Patch] = []
_WAITING = False  # a hook waits for ONNX Runtime's import


def _swap(old: object, new: object) -> None:
    """Rebind ``InferenceSession`` from ``old`` to ``new`` in every loaded module holding it."""
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None) if isinstance(module, ModuleType) else None
        if namespace is not None and namespace.get(_NAME) is old:
            namespace[_NAME] = new


def patch(takeover: str = "cpu") -> Patch:
    """Make ``onnxruntime.InferenceSession`` ortplug's drop-in; returns the :class:`Patch`.

    ``providers=None`` (and ortplug's provider forms) then get ortplug's choice.
    ``takeover`` says which explicit ONNX Runtime provider lists it replaces too:
    ``"none"``; ``"cpu"`` (default), lists naming only ``CPUExecutionProvider`` (with
    or without options, which give way to ortplug's), which libraries hard-code for
    the author's machine; ``"all"``.
    Any other list keeps ONNX Runtime's behaviour. Calling it again replaces the
    patch in force; use it as ``with ortplug.patch(): ...`` to undo it on leaving (the
    latest patch whose block is still open, if any, is in force again: ONNX Runtime's
    class is back when the last block ends, in whatever order blocks end).
    """
    if takeover not in TAKEOVER_RULES:
        from ortplug.errors import OptionError

        raise OptionError(
            f"takeover: expected one of {', '.join(TAKEOVER_RULES)}, got {takeover!r}"
        )
    with _LOCK:
        current = Patch(takeover)
        _OPEN.append(current)
        _put_in_force(current)
    return current


def unpatch() -> None:
    """Put ONNX Runtime's own class back, ending every patch; sessions already built stay as
    they are."""
    with _LOCK:
        _OPEN.clear()
        _put_in_force(None)


def _put_in_force(current: Patch | None) -> None:
    """Make ``current`` the patch in force (``None``: none), in place of the one that is (lock
    held); installed now if ONNX Runtime is imported, else right after its import."""
    global _ACTIVE
    if _ACTIVE is not None:
        _ACTIVE._remove()
    _ACTIVE = current
    if current is None:
        return
    if "onnxruntime" in sys.modules:
        current._install()
    else:
        _after_import("onnxruntime", _install_active)


def _install_active() -> None:
    global _WAITING
    with _LOCK:
        _WAITING = False
        if _ACTIVE is not None and _ACTIVE._class is None:
            _ACTIVE._install()


def _after_import(name: str, then: Any) -> None:
    """Call ``then()`` once ``name`` is imported (one waiting hook per patch in force)."""
    from ortplug.host.import_hook import after_import

    global _WAITING
    if not _WAITING:
        _WAITING = True
        after_import(name, lambda _module: then())
