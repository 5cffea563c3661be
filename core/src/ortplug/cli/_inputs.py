"""Inputs for ``run`` and ``bench``: ``--input NAME=FILE.npy`` arrays, and generated ones for the rest.

Runs that may fail use :func:`quiet_run_options`: ONNX Runtime's own log of the failure
stays off stderr, where the CLI prints the error as one line (``ORTPLUG_DEBUG=1`` keeps it).

Generated inputs are seeded (the same every time) and sized so ordinary models run:

* a dynamic dimension takes the ``opt`` size of metadata ``extra.dim_ranges``
  (``{dim_name: [min, opt, max]}``, the format the TensorRT plugin reads) when it is named there;
* else a dimension named like a batch is 1;
* in a model that takes a sample rate, the last dynamic dimension of a float input of rank 1
  or 2 holds :data:`AUDIO_MS` of audio (512 samples at 16 kHz, what VAD models such as Silero
  take);
* a dimension named like a sequence (seq, length, time, tokens, frames, steps) is
  :data:`SEQUENCE`, and so is any dynamic dimension past the first in a model that takes lengths;
* the rest of the dynamic dimensions are 1.

Values: inputs named like a sample rate (sr, sample_rate) hold :data:`SAMPLE_RATE`, like
lengths (length, seq_len, x_lens) :data:`SEQUENCE`, like a mask (attention_mask) ones;
other floats are standard normal, integers 0..9, booleans random.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

import numpy as np

from ..backend import InputSpec
from ..errors import InputValidationError, OptionError
from ..run_options import RunOptionsConfig
from ._usage import InputArg, UsageError

__all__ = [
    "AUDIO_MS",
    "SAMPLE_RATE",
    "SEQUENCE",
    "build_feed",
    "first_run_error",
    "load_inputs",
    "quiet_run_options",
]

#: The length of generated sequence dimensions and the value of generated length inputs.
SEQUENCE = 16
#: The value of generated sample-rate inputs (Hz).
SAMPLE_RATE = 16000
#: Milliseconds of generated audio in a model that takes a sample rate.
AUDIO_MS = 32

_SAMPLE_RATE_NAME = re.compile(r"^(sr|sample_?rate|sampling_?rate)s?$", re.IGNORECASE)
_LENGTH_NAME = re.compile(r"(^|_)(lens?|lengths?|seq_?lens?|sequence_?lengths?)$", re.IGNORECASE)
_MASK_NAME = re.compile(r"(^|_)mask$", re.IGNORECASE)
_BATCH_DIM = re.compile(r"batch|^(n|b|bs)$", re.IGNORECASE)
_SEQUENCE_DIM = re.compile(r"seq|len|time|token|frame|step", re.IGNORECASE)

_GENERATED_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def load_inputs(args: Sequence[InputArg], specs: Sequence[InputSpec]) -> dict[str, np.ndarray]:
    """Load each ``--input``; a name the model lacks, a repeat or an unreadable array is a usage error."""
    names = [spec.name for spec in specs]
    feed: dict[str, np.ndarray] = {}
    for arg in args:
        if arg.name not in names:
            raise UsageError(
                f"--input {arg.name}: expected one of the model's inputs ({', '.join(names)}), "
                f"got {arg.name!r}"
            )
        if arg.name in feed:
            raise UsageError(f"--input {arg.name}: expected once, given twice")
        try:
            feed[arg.name] = np.load(arg.path, allow_pickle=False)
        except ValueError as exc:  # object arrays, truncated files
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UsageError(
                f"--input {arg.name}: expected a numeric array, got {str(arg.path)!r} ({first})"
            ) from exc
    return feed


def _dim_sizes(extra: Mapping[str, object]) -> dict[str, int]:
    """The ``opt`` size of each dimension named in metadata ``extra.dim_ranges``."""
    ranges = extra.get("dim_ranges")
    if ranges is None:
        return {}
    if not isinstance(ranges, Mapping):
        raise OptionError(
            f"metadata extra.dim_ranges: expected {{dim: [min, opt, max]}}, got {ranges!r}"
        )
    sizes = {}
    for dim, triple in ranges.items():
        ok = (
            isinstance(triple, Sequence)
            and len(triple) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in triple)
            and triple[0] <= triple[1] <= triple[2]
        )
        if not ok:
            raise OptionError(
                f"metadata extra.dim_ranges[{dim!r}]: expected [min, opt, max] positive integers "
                f"with min <= opt <= max, got {triple!r}"
            )
        sizes[str(dim)] = int(triple[1])
    return sizes


class _Sizer:
    """Sizes of one model's dynamic dimensions, by the rules in the module docstring."""

    def __init__(self, specs: Sequence[InputSpec], extra: Mapping[str, object]) -> None:
        self.ranges = _dim_sizes(extra)
        self.audio = any(_SAMPLE_RATE_NAME.match(spec.name) for spec in specs)
        self.lengths = any(_LENGTH_NAME.search(spec.name) for spec in specs)

    def shape(self, spec: InputSpec) -> tuple[int, ...]:
        dims = spec.shape or ()
        dynamic = [i for i, d in enumerate(dims) if not (isinstance(d, int) and d > 0)]
        audio = self.audio and spec.type in ("tensor(float)", "tensor(double)") and len(dims) <= 2
        samples_axis = dynamic[-1] if audio and dynamic and dynamic[-1] > 0 else None
        return tuple(self._size(d, axis, axis == samples_axis) for axis, d in enumerate(dims))

    def _size(self, dim: int | str | None, axis: int, samples: bool) -> int:
        if isinstance(dim, int) and dim > 0:
            return dim
        name = dim if isinstance(dim, str) else ""
        if name in self.ranges:
            return self.ranges[name]
        if name and _BATCH_DIM.search(name):
            return 1
        if samples:
            return SAMPLE_RATE * AUDIO_MS // 1000
        if name and _SEQUENCE_DIM.search(name):
            return SEQUENCE
        return SEQUENCE if self.lengths and axis > 0 else 1


def _generate(
    spec: InputSpec, shape: tuple[int, ...], rng: np.random.Generator
) -> tuple[np.ndarray, str]:
    """One generated input and how it was made (for reports and error notes)."""
    dtype = _GENERATED_DTYPES.get(spec.type)
    if dtype is None:
        raise UsageError(
            f"input {spec.name!r} of type {spec.type} cannot be generated; "
            f"pass it with --input {spec.name}=FILE.npy"
        )
    text = f"{np.dtype(dtype)} {shape}"
    if _SAMPLE_RATE_NAME.match(spec.name) and dtype is not np.bool_:
        return np.full(shape, SAMPLE_RATE, dtype), f"{text} = {SAMPLE_RATE} (a sample rate)"
    if _LENGTH_NAME.search(spec.name) and dtype is not np.bool_:
        return np.full(shape, SEQUENCE, dtype), f"{text} = {SEQUENCE} (lengths)"
    if _MASK_NAME.search(spec.name):
        return np.ones(shape, dtype), f"{text} = 1 (a mask)"
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype), f"{text} normal"
    if dtype is np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_), f"{text} random"
    return rng.integers(0, 10, shape).astype(dtype), f"{text} in 0..9"


def build_feed(
    specs: Sequence[InputSpec], given: Mapping[str, np.ndarray], extra: Mapping[str, object]
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The given arrays plus seeded generated ones for the rest; and how each generated one was made.

    ``extra`` is the checkpoint metadata's ``extra`` (for ``dim_ranges``).
    """
    rng = np.random.default_rng(0)
    sizer = _Sizer(specs, extra)
    feed = dict(given)
    generated = {}
    for spec in specs:
        if spec.name not in feed:
            feed[spec.name], generated[spec.name] = _generate(spec, sizer.shape(spec), rng)
    return feed, generated


def first_run_error(
    exc: Exception, given: Mapping[str, np.ndarray], generated: Mapping[str, str]
) -> Exception | None:
    """What to raise when a model's first run failed; ``None``: ``exc`` as it is.

    Given inputs that do not fit the model are a usage error of ``--input``; any failure
    with generated inputs says which were generated and how to pass real ones.
    """
    note = ""
    if generated:
        made = "; ".join(f"{name} {how}" for name, how in generated.items())
        note = (
            f"; inputs were generated ({made}); pass real ones with --input NAME=FILE.npy "
            "(names, types and shapes: ortplug inspect MODEL)"
        )
    if isinstance(exc, InputValidationError) and given:
        return UsageError(f"--input: {exc}{note}")
    return RuntimeError(f"{exc}{note}") if note else None


def quiet_run_options() -> RunOptionsConfig | None:
    """Run options that keep ONNX Runtime's log of a failing run off stderr (unless ORTPLUG_DEBUG)."""
    return None if os.environ.get("ORTPLUG_DEBUG") else RunOptionsConfig(log_severity_level=4)
