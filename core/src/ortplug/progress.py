"""Progress of long work: a bar on a terminal's stderr where the caller asked for one, else nothing."""

from __future__ import annotations

import contextlib
import contextvars
import io
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, TextIO, TypeVar

from .settings import settings

__all__ = ["Progress", "progress", "show_progress"]

_T = TypeVar("_T")

#: Whether the code running now asked for bars (:func:`show_progress`); a new thread has not.
_asked: contextvars.ContextVar[bool] = contextvars.ContextVar("ortplug_progress", default=False)
#: The work whose bar shows now, in this context (inner work shows on its line).
_shown: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "ortplug_progress_bar", default=None
)


@contextlib.contextmanager
def show_progress(asked: bool = True) -> Iterator[None]:
    """Show the progress of the long work this block runs (in this thread), where a bar can
    show; ``asked=False`` hides it for the block (the CLI asks; library calls are silent)."""
    token = _asked.set(asked)
    try:
        yield
    finally:
        _asked.reset(token)


def progress(title: str, total: int | None = None, *, unit: str = "step") -> Progress:
    """The progress of one piece of long work, ``total`` steps of ``unit`` (``None``: not known
    ahead), to enter as a context manager (``with progress("verifying", 3) as shown: ...``)."""
    return Progress(title, total, unit)


def _wanted() -> bool:
    """Whether a bar shows: asked for, not turned off (``ORTPLUG_PROGRESS=0``), stderr a terminal."""
    if not _asked.get() or not settings().progress:
        return False
    stderr = sys.stderr
    try:
        return stderr is not None and stderr.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _terminal() -> tuple[TextIO, bool]:
    """A stream of the bar's own on what stderr is now (a duplicated descriptor), and whether it
    is the bar's to close; stderr itself when it has no descriptor to duplicate."""
    stderr = sys.stderr
    try:
        copy = os.dup(stderr.fileno())
    except (AttributeError, OSError, ValueError):  # not backed by a descriptor
        return stderr, False
    encoding = getattr(stderr, "encoding", None) or "utf-8"
    return open(copy, "w", encoding=encoding, errors="replace", buffering=1), True


def _sized(stream: TextIO) -> bool:
    """Whether the terminal says its width (a new pseudo-terminal says 0 columns: tqdm's own
    width is kept then, where following the terminal's would draw nothing)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (AttributeError, OSError, ValueError):
        return False


class _Above(io.TextIOBase):
    """``sys.stderr`` while a bar shows: each line written above the bar while descriptor 2 is
    still the bar's terminal; else (descriptor 2 sent to a log meanwhile), and once detached,
    to stderr as it was."""

    def __init__(self, stderr: TextIO, bar_stream: TextIO) -> None:
        self._stderr, self._stream = stderr, bar_stream
        self._terminal: tuple[int, int] | None = _identity(bar_stream)
        self._pending = ""

    def write(self, text: str) -> int:
        if self._terminal is None or _identity(self._stderr) != self._terminal:
            return self._stderr.write(text)
        from tqdm import tqdm

        done, newline, rest = (self._pending + text).rpartition("\n")
        self._pending = rest
        if newline:
            tqdm.write(done + newline, file=self._stream, end="")
        return len(text)

    def flush(self) -> None:
        (self._stream if self._terminal is not None else self._stderr).flush()

    def detach(self) -> None:  # type: ignore[override]
        """Write to stderr as it was from now on (what was held unfinished first)."""
        self._terminal = None
        if self._pending:
            self._stderr.write(self._pending)
            self._pending = ""

    def fileno(self) -> int:
        return self._stderr.fileno()

    def isatty(self) -> bool:
        return self._stderr.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stderr, "encoding", None) or "utf-8"


def _identity(stream: TextIO) -> tuple[int, int] | None:
    """The device and inode behind ``stream``'s descriptor (``None`` without one)."""
    try:
        found = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return found.st_dev, found.st_ino


class Progress:
    """One piece of long work's steps (:func:`progress`): a bar while it runs where one shows
    (see the module docstring), the outer bar's line inside other work, else nothing."""

    def __init__(self, title: str, total: int | None, unit: str) -> None:
        self.title, self.total, self.unit = title, total, unit
        #: Steps done so far.
        self.done = 0
        self._note = ""
        self._inner = ""  # the line of the work running inside this one
        self._outer: Progress | None = None
        self._bar: Any = None  # tqdm's, while this work's own bar shows
        self._closing = contextlib.ExitStack()

    @property
    def shown(self) -> bool:
        """Whether this work shows, on a bar of its own or on the outer work's."""
        return self._bar is not None or self._outer is not None

    def __enter__(self) -> Progress:
        outer = _shown.get()
        if outer is not None:
            self._outer = outer
            outer._show_inner(self._line())
        elif _wanted():
            self._closing.enter_context(self._drawn())
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._outer is not None:
            self._outer._show_inner("")
            self._outer = None
        self._closing.close()

    @contextlib.contextmanager
    def _drawn(self) -> Iterator[None]:
        """This work's bar, shown until the block ends, with ``sys.stderr`` written above it."""
        from tqdm import tqdm

        stderr = sys.stderr
        stderr.flush()
        stream, owned = _terminal()
        self._bar = tqdm(total=self.total, desc=self.title, unit=self.unit, file=stream,
                         leave=False, dynamic_ncols=_sized(stream))  # fmt: skip
        token = _shown.set(self)
        above = _Above(stderr, stream)
        try:
            with contextlib.redirect_stderr(above):
                yield
        finally:
            _shown.reset(token)
            above.detach()  # what holds it still (a log handler made meanwhile) writes to stderr
            self._bar.close()
            self._bar = None
            if owned:
                stream.close()

    def advance(self, steps: int = 1) -> None:
        """``steps`` more steps done."""
        self.done += steps
        if self._bar is not None:
            self._bar.update(steps)
        elif self._outer is not None:
            self._outer._show_inner(self._line())

    def note(self, text: str) -> None:
        """What the work does now (the candidate it verifies), shown after the count."""
        self._note = text
        self._redraw()

    def each(
        self, items: Iterable[_T], describe: Callable[[_T], str] | None = None
    ) -> Iterator[_T]:
        """``items``, one step each: noted (``describe``) when it comes, done when the next is
        asked for (a loop body that ``continue``\\ s counts too)."""
        for item in items:
            if describe is not None:
                self.note(describe(item))
            yield item
            self.advance()

    def _line(self) -> str:
        """This work as one piece of the outer bar's line: title, count and note."""
        count = f"{self.done}/{self.total}" if self.total is not None else str(self.done)
        return " ".join(part for part in (self.title, count, self._note, self._inner) if part)

    def _show_inner(self, line: str) -> None:
        self._inner = line
        self._redraw()

    def _redraw(self) -> None:
        """Show the note (and inner work) on this work's bar, or on the outer one's line."""
        if self._bar is not None:
            extra = "; ".join(part for part in (self._note, self._inner) if part)
            self._bar.set_postfix_str(extra)
        elif self._outer is not None:
            self._outer._show_inner(self._line())
