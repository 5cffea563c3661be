"""Representative inputs for a model given none (verification, ``ortplug run``, ``bench``):
seeded, sized like a real model of that shape takes them (the rungs: docs/internals.md)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import numpy as np

from ..checkpoint.metadata import parse_dim_ranges
from ..errors import CheckpointError, InputsNotAcceptedError, OptionError
from ..host.runtime import require_onnxruntime

if TYPE_CHECKING:
    from ..checkpoint import ResolvedCheckpoint

__all__ = [
    "AUDIO_MS",
    "AUDIO_SECONDS",
    "GENERATION",
    "SAMPLE_RATE",
    "SEQUENCE",
    "SEQUENCE_LENGTHS",
    "SPATIAL_SIZES",
    "AcceptedInputs",
    "GeneratedFeed",
    "InputSpec",
    "accepted_inputs",
    "candidate_feeds",
    "carried_samples",
    "sample_inputs",
    "session_inputs",
]

#: Changes whenever the rules above change what is generated: records measured on generated
#: inputs (verification verdicts) key on it, so none measured on other inputs is reused.
GENERATION = 4  # 3: verification runs the probe feeds too (verification.probes); 4: and more
# batch sizes at random rows, x3 values, each output alone, repeated runs, own feeds at once
#: The sequence length of the last rung (what ran ordinary models before sizes were searched).
SEQUENCE = 16
#: The value of generated sample-rate inputs (Hz) unless metadata ``extra.sample_rate`` says.
SAMPLE_RATE = 16000
#: Milliseconds of generated audio on the last rung (one 512-sample chunk at 16 kHz).
AUDIO_MS = 32
#: Height and width of generated images, one per rung.
SPATIAL_SIZES = (224, 320, 640)
#: Seconds of generated audio, one per rung.
AUDIO_SECONDS = (1, 2, 4)
#: Lengths of generated sequences, one per rung.
SEQUENCE_LENGTHS = (16, 64, 256)

_SAMPLE_RATE_NAME = re.compile(r"^(sr|sample_?rate|sampling_?rate)s?$", re.IGNORECASE)
_LENGTH_NAME = re.compile(r"(^|_)(lens?|lengths?|seq_?lens?|sequence_?lengths?)$", re.IGNORECASE)
_MASK_NAME = re.compile(r"(^|_)mask$", re.IGNORECASE)
_BATCH_DIM = re.compile(r"batch|^(n|b|bs)$", re.IGNORECASE)
_SEQUENCE_DIM = re.compile(r"seq|len|time|token|frame|step", re.IGNORECASE)
_SPATIAL_DIM = re.compile(r"height|width|^(h|w)$", re.IGNORECASE)

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
_FLOATS = ("tensor(float)", "tensor(float16)", "tensor(double)")


class InputSpec(Protocol):
    """What generating an input needs to know of it; ``OnnxBackend.input_specs`` items are ones."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def shape(self) -> tuple[int | str | None, ...] | None: ...


@attrs.frozen
class _Rung:
    """The sizes of one try: images, audio samples, sequences."""

    spatial: int
    samples: int
    sequence: int


def _rungs(rate: int) -> tuple[_Rung, ...]:
    sized = [
        _Rung(spatial, seconds * rate, sequence)
        for spatial, seconds, sequence in zip(SPATIAL_SIZES, AUDIO_SECONDS, SEQUENCE_LENGTHS)
    ]
    return (*sized, _Rung(1, rate * AUDIO_MS // 1000, SEQUENCE))


def _sample_rate(extra: Mapping[str, object]) -> int | None:
    rate = extra.get("sample_rate")
    if rate is None:
        return None
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise OptionError(
            f"metadata extra.sample_rate: expected a positive integer (Hz), got {rate!r}"
        )
    return rate


class _Sizer:
    """Sizes of one model's dynamic dimensions, by the rules in the module docstring."""

    def __init__(self, specs: Sequence[InputSpec], extra: Mapping[str, object]) -> None:
        ranges = parse_dim_ranges(extra.get("dim_ranges"))
        self.ranges = {dim: opt for dim, (_, opt, _) in ranges.items()}
        declared = _sample_rate(extra)
        self.rate = declared or SAMPLE_RATE
        self.audio = declared is not None or any(_SAMPLE_RATE_NAME.match(s.name) for s in specs)
        self.lengths = any(_LENGTH_NAME.search(spec.name) for spec in specs)

    def shape(self, spec: InputSpec, rung: _Rung) -> tuple[int, ...]:
        dims = spec.shape or ()
        dynamic = [i for i, d in enumerate(dims) if not (isinstance(d, int) and d > 0)]
        audio = self.audio and spec.type in _FLOATS and len(dims) <= 2
        samples_axis = dynamic[-1] if audio and dynamic and dynamic[-1] > 0 else None
        image = len(dims) in (4, 5) and spec.type != "tensor(bool)"
        integer = not image and spec.type not in _FLOATS and spec.type != "tensor(bool)"
        return tuple(
            self._size(d, axis, rung, samples=axis == samples_axis, image=image, integer=integer)
            for axis, d in enumerate(dims)
        )

    def _size(
        self,
        dim: int | str | None,
        axis: int,
        rung: _Rung,
        *,
        samples: bool,
        image: bool,
        integer: bool,
    ) -> int:
        if isinstance(dim, int) and dim > 0:
            return dim
        name = dim if isinstance(dim, str) else ""
        if name in self.ranges:
            return self.ranges[name]
        if name and _BATCH_DIM.search(name):
            return 1
        if samples:
            return rung.samples
        if name and _SPATIAL_DIM.search(name):
            return rung.spatial
        if (name and _SEQUENCE_DIM.search(name)) or (axis > 0 and (self.lengths or integer)):
            return rung.sequence
        return rung.spatial if image and axis > 0 else 1


def _generate(
    spec: InputSpec, shape: tuple[int, ...], rng: np.random.Generator, rate: int, length: int
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
        return np.full(shape, rate, dtype), f"{text} = {rate} (a sample rate)"
    if _LENGTH_NAME.search(spec.name) and dtype is not np.bool_:
        return np.full(shape, length, dtype), f"{text} = {length} (lengths)"
    if _MASK_NAME.search(spec.name):
        return np.ones(shape, dtype), f"{text} = 1 (a mask)"
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype), f"{text} normal"
    if dtype is np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_), f"{text} random"
    return rng.integers(0, 10, shape).astype(dtype), f"{text} in 0..9"


@attrs.frozen
class GeneratedFeed:
    """One feed to try: every input's array, and how each generated one was made; ``degenerate``:
    an image dimension shrank to 1 (a latency measured on it says little)."""

    feed: Mapping[str, np.ndarray]
    generated: Mapping[str, str]
    degenerate: bool = False

    def describe(self) -> str:
        """``x float32 (1, 3, 224, 224) normal; sr int64 () = 16000 (a sample rate)``."""
        return "; ".join(f"{name} {how}" for name, how in self.generated.items()) or "given"


def candidate_feeds(
    specs: Sequence[InputSpec],
    extra: Mapping[str, object],
    given: Mapping[str, np.ndarray] | None = None,
) -> Iterator[GeneratedFeed]:
    """The feeds to try, in order: ``given`` arrays as they are, the rest generated rung by rung
    (``extra``: the metadata's, for ``dim_ranges`` and ``sample_rate``), each shape once."""
    sizer = _Sizer(specs, extra)
    missing = [spec for spec in specs if spec.name not in (given or {})]
    seen: set[tuple[tuple[int, ...], ...]] = set()
    rungs = _rungs(sizer.rate)
    first = tuple(sizer.shape(spec, rungs[0]) for spec in missing)
    for rung in rungs:
        shapes = tuple(sizer.shape(spec, rung) for spec in missing)
        if shapes in seen:
            continue
        seen.add(shapes)
        degenerate = rung.spatial == 1 and any(
            now == 1 and before == SPATIAL_SIZES[0]
            for shape, original in zip(shapes, first)
            for now, before in zip(shape, original)
        )
        rng = np.random.default_rng(0)
        feed = dict(given or {})
        generated = {}
        for spec, shape in zip(missing, shapes):
            feed[spec.name], generated[spec.name] = _generate(
                spec, shape, rng, sizer.rate, rung.sequence
            )
        yield GeneratedFeed(feed, generated, degenerate)


def sample_inputs(
    specs: Sequence[InputSpec],
    extra: Mapping[str, object],
    given: Mapping[str, np.ndarray] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The first candidate feed (representative sizes, not yet run anywhere), and how each was made.

    Where the model may reject it, use :func:`accepted_inputs` instead.
    """
    first = next(candidate_feeds(specs, extra, given))
    return dict(first.feed), dict(first.generated)


@attrs.frozen
class AcceptedInputs:
    """The first candidate feed the reference ran, its outputs, the ones before it (each
    described, with why it failed), and whether it is degenerate (:class:`GeneratedFeed`)."""

    feed: Mapping[str, np.ndarray]
    generated: Mapping[str, str]
    outputs: Mapping[str, Any]
    rejected: tuple[tuple[str, str], ...] = ()
    degenerate: bool = False


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def accepted_inputs(
    run: Callable[[Mapping[str, np.ndarray]], Mapping[str, Any]],
    specs: Sequence[InputSpec],
    extra: Mapping[str, object],
    given: Mapping[str, np.ndarray] | None = None,
    on_try: Callable[[GeneratedFeed], None] | None = None,
) -> AcceptedInputs:
    """The first of :func:`candidate_feeds` that ``run`` (the CPU reference) runs, with its outputs;
    ``on_try`` hears of each feed first. :class:`~ortplug.errors.InputsNotAcceptedError` names
    every feed tried when none runs."""
    tried: list[tuple[GeneratedFeed, BaseException]] = []
    for candidate in candidate_feeds(specs, extra, given):
        if on_try is not None:
            on_try(candidate)
        try:
            outputs = run(candidate.feed)
        except Exception as exc:  # the reference refused this size: try the next rung
            tried.append((candidate, exc))
            continue
        rejected = tuple((c.describe(), _reason(e)) for c, e in tried)
        return AcceptedInputs(
            candidate.feed, candidate.generated, outputs, rejected, candidate.degenerate
        )
    first, cause = tried[0]
    raise InputsNotAcceptedError(
        f"the CPU reference ran none of {len(tried)} generated input set(s): "
        + "; ".join(f"[{c.describe()}] {_reason(e)}" for c, e in tried)
        + "; give the inputs (checkpoint samples/<input>.npy, or --input NAME=FILE.npy)",
        first=first,
        cause=cause,
    )


def session_inputs(
    session: Any,
    extra: Mapping[str, object],
    given: Mapping[str, np.ndarray] | None = None,
    run_options: Any = None,
) -> AcceptedInputs:
    """:func:`accepted_inputs` on an ONNX Runtime session already built (the CPU reference), its
    outputs by name; the default ``run_options`` keep ORT's log of a refused size off stderr."""
    names = [output.name for output in session.get_outputs()]
    if run_options is None:
        run_options = require_onnxruntime().RunOptions()
        run_options.log_severity_level = 4

    def run(feed: Mapping[str, np.ndarray]) -> dict[str, Any]:
        return dict(zip(names, session.run(names, dict(feed), run_options)))

    specs = [_Spec(arg.name, arg.type, _shape(arg.shape)) for arg in session.get_inputs()]
    return accepted_inputs(run, specs, extra, given)


@attrs.frozen
class _Spec:
    name: str
    type: str
    shape: tuple[int | str | None, ...] | None


def _shape(value: object) -> tuple[int | str | None, ...] | None:
    return tuple(value) if isinstance(value, (list, tuple)) else None


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
