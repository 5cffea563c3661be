"""Precision variants made with ONNX Runtime's own tools, and the manifest that lists them.

* int8: ``onnxruntime.quantization.quantize_static`` in QDQ format (per-channel int8 weights,
  uint8 activations: the form ONNX Runtime's CPU kernels fuse into QLinearConv/QGemm and run
  with VNNI/AMX), calibrated on the checkpoint's sample inputs or generated ones; a graph
  below opset 13 is first converted to 13 (per-channel scales need it);
* fp16: ``onnxruntime.transformers.float16.convert_float_to_float16(keep_io_types=True)``:
  fp16 weights and compute, fp32 inputs and outputs, so callers feed what they fed before.

:func:`write_variants` builds them beside the weights (``<stem>.int8.onnx``, ``<stem>.fp16.onnx``)
and lists them in the ``variants`` of ``<stem>.metadata.json``, the checkpoint's variant manifest.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import numpy as np
import onnx
from ortplug.checkpoint import CheckpointMetadata, ResolvedCheckpoint, Variant, metadata_path_for
from ortplug.errors import CheckpointError, OptionError
from ortplug.host.runtime import require_onnxruntime
from ortplug.verification.sample_inputs import carried_samples, session_inputs

__all__ = [
    "BUILDERS",
    "CALIBRATION_BATCHES",
    "calibration_feeds",
    "make_fp16",
    "make_int8",
    "write_buildable_variants",
    "write_variants",
]

#: Calibration batches drawn when the checkpoint carries no samples of its own.
CALIBRATION_BATCHES = 8
#: The lowest opset per-channel quantization takes.
_QUANT_OPSET = 13


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """ONNX Runtime's tools log advice at WARNING on the root logger; keep it off stderr."""
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def _weights(checkpoint: ResolvedCheckpoint) -> Path:
    if checkpoint.weights_path is None:
        raise OptionError(
            "precision variants are written beside the weights: expected a checkpoint on disk "
            "(LocalCheckpoint), got model bytes"
        )
    return checkpoint.weights_path


def calibration_feeds(
    checkpoint: ResolvedCheckpoint, batches: int = CALIBRATION_BATCHES
) -> list[dict[str, np.ndarray]]:
    """Representative inputs: the carried samples when there are any, else ``batches`` seeded draws
    of sizes the model runs on the CPU provider.

    Generated float inputs are redrawn (standard normal) for each batch; other inputs
    keep their generated values (lengths, masks, sample rates).
    """
    ort = require_onnxruntime()
    session = ort.InferenceSession(str(_weights(checkpoint)), providers=["CPUExecutionProvider"])
    accepted = session_inputs(session, checkpoint.metadata.extra, carried_samples(checkpoint))
    first, generated = dict(accepted.feed), accepted.generated
    if not generated:
        return [first]
    feeds = [first]
    for seed in range(1, batches):
        rng = np.random.default_rng(seed)
        feeds.append(
            {
                name: rng.standard_normal(value.shape).astype(value.dtype)
                if name in generated and value.dtype.kind == "f"
                else value
                for name, value in first.items()
            }
        )
    return feeds


class _Reader:
    """What ``onnxruntime.quantization`` reads calibration data from: one feed per call, then ``None``."""

    def __init__(self, feeds: Sequence[Mapping[str, np.ndarray]]) -> None:
        self._feeds = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        feed = next(self._feeds, None)
        return None if feed is None else dict(feed)


def make_int8(
    checkpoint: ResolvedCheckpoint,
    target: Path,
    calibration: Sequence[Mapping[str, np.ndarray]] | None = None,
) -> Path:
    """Write the int8 (static QDQ) variant of ``checkpoint`` to ``target``, calibrated on ``calibration``.

    ``calibration`` defaults to :func:`calibration_feeds`.
    """
    require_onnxruntime()
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    feeds = calibration_feeds(checkpoint) if calibration is None else calibration
    model = onnx.load(str(_weights(checkpoint)))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    with _quiet():
        if opset < _QUANT_OPSET:
            from onnx import version_converter

            model = version_converter.convert_version(model, _QUANT_OPSET)
        quantize_static(
            model,
            target,
            _Reader(feeds),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
        )
    return target


def make_fp16(checkpoint: ResolvedCheckpoint, target: Path) -> Path:
    """Write the fp16 variant of ``checkpoint`` to ``target``: fp16 inside, fp32 inputs and outputs."""
    require_onnxruntime()
    from onnxruntime.transformers.float16 import convert_float_to_float16

    with _quiet():
        converted = convert_float_to_float16(
            onnx.load(str(_weights(checkpoint))), keep_io_types=True
        )
    onnx.save(converted, str(target))
    return target


#: Each buildable precision and the function that builds it from a checkpoint into a file.
BUILDERS = {"int8": make_int8, "fp16": make_fp16}

#: The nodes a QDQ int8 model has and an fp32 one has not.
_QDQ = ("QuantizeLinear", "DequantizeLinear")


def _unchanged(path: Path, precision: str) -> str | None:
    """Why the variant built at ``path`` computes nothing in ``precision`` (the tools leave graphs
    of ops they do not handle, such as ai.onnx.ml's, as they were), or ``None`` when it does."""
    graph = onnx.load(str(path), load_external_data=False).graph
    if precision == "int8":
        if any(node.op_type in _QDQ for node in graph.node):
            return None
        ops = ", ".join(sorted({node.op_type for node in graph.node}))
        return (
            f"no {'/'.join(_QDQ)} node: ONNX Runtime's quantizer changes none of the model's "
            f"operators {ops}"
        )
    float16 = 10  # onnx.TensorProto.FLOAT16
    halves = {t.name for t in graph.initializer if t.data_type == float16} | {
        v.name
        for v in (*graph.input, *graph.value_info, *graph.output)
        if v.type.tensor_type.elem_type == float16
    }
    computing = [node for node in graph.node if node.op_type != "Cast"]
    if any(name in halves for node in computing for name in node.input):
        return None
    ops = ", ".join(sorted({node.op_type for node in computing}))
    return f"no operator takes a float16 input: ONNX Runtime's converter keeps {ops} in float32"


def write_variants(checkpoint: ResolvedCheckpoint, precisions: Sequence[str]) -> CheckpointMetadata:
    """Build each precision's variant beside the weights and list it in ``<stem>.metadata.json``.

    A variant of the same name is replaced; the others the manifest lists are kept. One that
    would compute nothing in its precision raises :class:`~ortplug.errors.OptionError`, and
    then nothing is written. Returns the metadata as written.
    """
    return _write(checkpoint, precisions, partial=False)[0]


def write_buildable_variants(
    checkpoint: ResolvedCheckpoint, precisions: Sequence[str]
) -> tuple[CheckpointMetadata, dict[str, str]]:
    """As :func:`write_variants`, but a precision whose variant would compute nothing in it is
    left out and the others written (``ortplug variants --int8 --fp16`` of a model the
    quantizer changes nothing of still gets its fp16 variant): the metadata as written, and
    each precision left out with the one line saying why. Raises as :func:`write_variants`
    when every one is left out."""
    return _write(checkpoint, precisions, partial=True)


def _write(
    checkpoint: ResolvedCheckpoint, precisions: Sequence[str], *, partial: bool
) -> tuple[CheckpointMetadata, dict[str, str]]:
    """Every variant built and checked before any file or the manifest changes; ``partial``:
    the ones that compute nothing in their precision are left out (else the first raises)."""
    weights = _weights(checkpoint)
    if checkpoint.variant is not None:
        raise OptionError(
            f"variants are built from the reference weights, not from variant {checkpoint.variant!r}"
        )
    unknown = [p for p in precisions if p not in BUILDERS]
    if unknown or not precisions:
        raise OptionError(
            f"precisions: expected some of {', '.join(BUILDERS)}, got {list(precisions)}"
        )
    if checkpoint.metadata.precision != "fp32":
        raise CheckpointError(
            f"{weights}: variants are made from fp32 reference weights, this checkpoint is "
            f"{checkpoint.metadata.precision}"
        )
    drafts = {p: weights.with_name(f".{weights.stem}.{p}.{os.getpid()}.onnx") for p in precisions}
    refused: dict[str, str] = {}
    try:
        for precision, draft in drafts.items():
            BUILDERS[precision](checkpoint, draft)
            why = _unchanged(draft, precision)
            if why is not None:
                refused[precision] = (
                    f"{precision} variant of {weights}: not written: nothing in it runs in "
                    f"{precision} ({why})"
                )
                if not partial:
                    raise OptionError(refused[precision])
        if len(refused) == len(drafts):
            raise OptionError(next(iter(refused.values())))
        built = []
        for precision, draft in drafts.items():
            if precision in refused:
                continue
            target = weights.with_name(f"{weights.stem}.{precision}.onnx")
            os.replace(draft, target)
            built.append(Variant(name=precision, file=target.name, precision=precision))
    finally:
        for draft in drafts.values():
            draft.unlink(missing_ok=True)
    names = {v.name for v in built}
    kept = [v for v in checkpoint.metadata.variants if v.name not in names]
    metadata = attrs.evolve(checkpoint.metadata, variants=(*kept, *built))
    path = metadata_path_for(weights)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_text(metadata.to_json())
    os.replace(temp, path)
    return metadata, refused
