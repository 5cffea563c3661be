"""Representative inputs for a model that was given none: for ``ortplug run``, smoke checks, warm-ups.

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

A checkpoint may carry its own samples (:func:`carried_samples`): ``<input>.npy`` files in
a ``samples/`` folder beside the weights, or in the folder metadata ``extra.samples`` names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .checkpoint.metadata import parse_dim_ranges
from .errors import CheckpointError, OptionError

if TYPE_CHECKING:
    from .checkpoint import ResolvedCheckpoint

__all__ = ["AUDIO_MS", "SAMPLE_RATE", "SEQUENCE", "InputSpec", "carried_samples", "sample_inputs"]

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


class InputSpec(Protocol):
    """What generating an input needs to know of it; ``OnnxBackend.input_specs`` items are ones."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def shape(self) -> tuple[int | str | None, ...] | None: ...


class _Sizer:
    """Sizes of one model's dynamic dimensions, by the rules in the module docstring."""

    def __init__(self, specs: Sequence[InputSpec], extra: Mapping[str, object]) -> None:
        ranges = parse_dim_ranges(extra.get("dim_ranges"))
        self.ranges = {dim: opt for dim, (_, opt, _) in ranges.items()}
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
        raise OptionError(
            f"input {spec.name!r} of type {spec.type} cannot be generated; give it "
            f"(from the command line: --input {spec.name}=FILE.npy)"
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


def sample_inputs(
    specs: Sequence[InputSpec],
    extra: Mapping[str, object],
    given: Mapping[str, np.ndarray] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The ``given`` arrays plus seeded generated ones for the rest, and how each was made.

    ``extra`` is the checkpoint metadata's ``extra`` (for ``dim_ranges``).
    """
    rng = np.random.default_rng(0)
    sizer = _Sizer(specs, extra)
    feed = dict(given or {})
    generated = {}
    for spec in specs:
        if spec.name not in feed:
            feed[spec.name], generated[spec.name] = _generate(spec, sizer.shape(spec), rng)
    return feed, generated


def _samples_folder(checkpoint: ResolvedCheckpoint) -> Path | None:
    """``extra.samples`` (relative to the weights' folder), else ``samples/`` beside the weights."""
    named = checkpoint.metadata.extra.get("samples")
    base = checkpoint.weights_path.parent if checkpoint.weights_path is not None else None
    if named is None:
        return None if base is None else base / "samples"
    folder = Path(str(named))
    if not folder.is_absolute() and base is not None:
        folder = base / folder
    if not folder.is_dir():
        raise CheckpointError(
            f"metadata extra.samples of {checkpoint.label}: expected a folder of <input>.npy "
            f"files, got {str(named)!r} ({folder} is not a folder)"
        )
    return folder


def carried_samples(checkpoint: ResolvedCheckpoint) -> dict[str, np.ndarray]:
    """The sample inputs the checkpoint carries, by input name (those it lacks are generated)."""
    folder = _samples_folder(checkpoint)
    if folder is None or not folder.is_dir():
        return {}
    samples = {}
    for name in checkpoint.metadata.input_names:
        path = folder / f"{name}.npy"
        if path.is_file():
            try:
                samples[name] = np.load(path, allow_pickle=False)
            except ValueError as exc:
                raise CheckpointError(
                    f"sample input {path}: expected a numeric .npy array ({exc})"
                ) from exc
    return samples
