"""A command run with its stderr on a terminal (a pseudo-terminal), and what that terminal shows.

For the tests of progress bars (:mod:`ortplug.progress`): a bar is drawn only where stderr is
a terminal, so a test gives the command one (:func:`run_on_terminal`, POSIX only) and reads
both the bytes written to it and the lines it shows once the command is done
(:func:`screen`: a carriage return goes back to the line's start, later text overwrites).
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence

import attrs

__all__ = ["Ran", "run_on_terminal", "screen"]


@attrs.frozen
class Ran:
    """A finished command: its exit code, its stdout (a file) and what it wrote to the terminal."""

    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def shown(self) -> list[str]:
        """The terminal's lines once the command is done (:func:`screen` of its stderr)."""
        return screen(self.stderr)


def run_on_terminal(
    argv: Sequence[str], env: Mapping[str, str] | None = None, *, timeout: float = 300
) -> Ran:
    """Run ``argv`` with stderr on a new pseudo-terminal and stdout in a file, to the end."""
    main, child = os.openpty()
    try:
        with (
            tempfile.TemporaryFile() as stdout,
            subprocess.Popen(
                list(argv), stdout=stdout, stderr=child, env=None if env is None else dict(env)
            ) as process,
        ):
            os.close(child)
            child = -1
            said = bytearray()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if not select.select([main], [], [], 0.1)[0]:
                    if process.poll() is not None:  # done (a process it left may hold the terminal)
                        break
                    continue
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # every writer closed the terminal (EIO on Linux)
                    break
                if not chunk:
                    break
                said += chunk
            code = process.wait(timeout=max(0.0, deadline - time.monotonic()))
            stdout.seek(0)
            out = stdout.read()
    finally:
        os.close(main)
        if child != -1:
            os.close(child)
    return Ran(code, out, bytes(said))


def screen(raw: bytes) -> list[str]:
    """The lines a terminal shows after ``raw`` (a carriage return rewrites its line from the
    start; the terminal's ``\\r\\n`` ends one), trailing blanks dropped."""
    lines: list[str] = []
    for text in raw.decode(errors="replace").replace("\r\n", "\n").split("\n"):
        line: list[str] = []
        column = 0
        for char in text:
            if char == "\r":
                column = 0
                continue
            if column < len(line):
                line[column] = char
            else:
                line.append(char)
            column += 1
        lines.append("".join(line).rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return lines
