"""Usage errors and argument types: what a user typed is checked here (exit 2), before any heavy
import."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, NamedTuple

from ..errors import OptionError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "HINTS",
    "MAX_CALLERS",
    "MAX_COUNT",
    "InputArg",
    "UsageError",
    "caller_counts",
    "input_arg",
    "input_dir",
    "model_file",
    "model_source",
    "positive_int",
    "seconds",
    "size_mb",
    "thread_counts",
    "tolerance_pair",
]

#: ``--hint``'s choices: ``ortplug.backend.HINTS``, spelled here so that parsing imports no backend.
HINTS = ("latency", "throughput", "cumulative_throughput")
#: The most concurrent callers ``bench --callers`` starts (each one a thread).
MAX_CALLERS = 1024
#: The most seconds ``bench --seconds`` takes (per side, caller count and round).
_MAX_SECONDS = 3600.0

#: The first bytes of every ``.npy`` file (``numpy.save``).
_NPY_MAGIC = b"\x93NUMPY"


class UsageError(OptionError):
    """A command-line argument is wrong; the message names the flag, the expected and the given."""


#: The largest count a flag takes: more runs or rows than this is a typo (``--repeat 1e22``
#: written out), and would only grow memory for hours with no output.
MAX_COUNT = 1_000_000


def positive_int(value: str) -> int:
    """A count, 1 to ``MAX_COUNT`` (``--repeat``, ``--rounds``, ``--calls``, ``--batch-size``)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    if number > MAX_COUNT:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer up to {MAX_COUNT}, got {value[:30]!r}"
        )
    return number


def size_mb(value: str) -> float:
    """A cache size in MB (``cache prune --max-mb``), read as ``ORTPLUG_CACHE_MAX_MB`` is."""
    from ..cache.index import parse_size_mb  # only when the flag is given

    number = parse_size_mb(value)
    if number is None:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {value!r}")
    return number


def thread_counts(value: str) -> list[int]:
    """Comma-separated intra-op thread counts within the one bound (``bench --threads 1,2,4``)."""
    from ..errors import OptionError  # only when the flag is given
    from ..providers.options import check_threads

    counts = []
    for part in value.split(","):
        try:
            counts.append(check_threads("thread count", positive_int(part.strip())))
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"expected positive integers separated by commas such as 1,2,4, got {value!r}"
            ) from None
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return counts


def caller_counts(value: str) -> list[int]:
    """Comma-separated counts of concurrent callers, 1 to :data:`MAX_CALLERS` (``bench --callers
    1,4,16``), in the order given, each once."""
    counts: list[int] = []
    for part in value.split(","):
        text = part.strip()
        if not text.isdigit() or not 1 <= int(text) <= MAX_CALLERS:
            raise argparse.ArgumentTypeError(
                f"expected caller counts from 1 to {MAX_CALLERS} separated by commas such as "
                f"1,4,16, got {value!r}"
            )
        counts.append(int(text))
    return list(dict.fromkeys(counts))


def seconds(value: str) -> float:
    """A duration in seconds above 0 (``bench --seconds 0.5``)."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 0 < number <= _MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected seconds above 0 and up to {_MAX_SECONDS:g}, got {value!r}"
        )
    return number


def _path(text: str) -> Path:
    """``Path(text)``, importing pathlib only when a path is checked: ``--help`` needs none (~4 ms)."""
    from pathlib import Path

    return Path(text)


def model_file(value: str) -> Path:
    """An existing ONNX file; a directory or a missing path says which it is."""
    path = _path(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"expected an .onnx file, got a directory: {value!r}")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"expected an .onnx file, got {value!r} (no such file)")
    return path


def model_source(value: str) -> Path:
    """An existing ONNX file, or a folder in ONNX Runtime's model-package layout (``verify``)."""
    path = _path(value)
    if path.is_dir():
        if (path / "manifest.json").is_file() or (path / "metadata.json").is_file():
            return path
        raise argparse.ArgumentTypeError(
            f"expected an .onnx file or a model package (a folder with manifest.json), got the "
            f"folder {value!r}"
        )
    return model_file(value)


def tolerance_pair(value: str) -> tuple[float, float]:
    """``RTOL,ATOL``: two numbers >= 0 (``verify --tolerance 0.01,0.0001``)."""
    parts = value.split(",")
    try:
        numbers = tuple(float(part) for part in parts)
    except ValueError:
        numbers = ()
    if len(numbers) != 2 or not all(0 <= n < float("inf") for n in numbers):
        raise argparse.ArgumentTypeError(
            f"expected RTOL,ATOL (two numbers >= 0, e.g. 0.01,0.0001), got {value!r}"
        )
    return numbers[0], numbers[1]


def input_dir(value: str) -> Path:
    """An existing directory (``batch --input-dir``)."""
    path = _path(value)
    if not path.is_dir():
        what = "a file" if path.exists() else "no such directory"
        raise argparse.ArgumentTypeError(f"expected a directory, got {value!r} ({what})")
    return path


class InputArg(NamedTuple):
    """One ``--input NAME=FILE.npy``: the input's name and an existing ``.npy`` file."""

    name: str
    path: Path


def input_arg(value: str) -> InputArg:
    """Parse ``NAME=FILE.npy`` and check the file is a ``.npy`` array file (``numpy.save``)."""
    name, sep, file = value.partition("=")
    if not sep or not name or not file:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE.npy, got {value!r}")
    path = _path(file)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{name}: expected a .npy file, got a directory: {file!r}")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{name}: expected a .npy file, got {file!r} (not found)")
    with path.open("rb") as handle:
        if handle.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            raise argparse.ArgumentTypeError(
                f"{name}: expected a .npy file written by numpy.save, got {file!r} "
                "(not in .npy format)"
            )
    return InputArg(name, path)
