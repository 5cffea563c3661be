"""``CheckpointMetadata``: what the policy and backend know about a model, as a versioned JSON value."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import attrs

from ..errors import CheckpointError, OptionError
from .onnx_wire import (
    BFLOAT16,
    DOUBLE,
    FLOAT,
    FLOAT16,
    ModelSummary,
    summarize_file,
    summarize_model,
)
from .variants import PRECISIONS, Variant, parse_variants

__all__ = ["PRECISIONS", "SCHEMA_VERSION", "CheckpointMetadata", "require_utf8_dimensions"]

SCHEMA_VERSION = 1

# Ops that mark a quantized (integer-arithmetic) graph, ONNX and com.microsoft domains.
_QUANTIZED_OPS = frozenset(
    {
        "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
        "QLinearMatMul", "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu",
        "QLinearConcat", "QLinearGlobalAveragePool", "QLinearAveragePool", "QLinearSoftmax",
        "ConvInteger", "MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul",
        "QGemm", "QAttention", "QOrderedMatMul", "MatMulNBits",
    }
)  # fmt: skip
_FLOAT_PRECISION = {FLOAT: "fp32", DOUBLE: "fp32", FLOAT16: "fp16", BFLOAT16: "bf16"}


def _names(field_name: str, value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise OptionError(f"{field_name}: expected a list of names, got {value!r}")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise OptionError(f"{field_name}: expected non-empty strings, got {name!r}")
    duplicates = sorted(n for n, times in Counter(names).items() if times > 1)
    if duplicates:
        raise OptionError(f"{field_name}: names must be unique, {duplicates} repeat")
    return names


def _input_names(value: Iterable[str]) -> tuple[str, ...]:
    return _names("input_names", value)


def _output_names(value: Iterable[str]) -> tuple[str, ...]:
    return _names("output_names", value)


def _check_precision(_: Any, __: Any, value: str) -> None:
    if value not in PRECISIONS:
        raise OptionError(f"precision: expected one of {', '.join(PRECISIONS)}, got {value!r}")


def _check_bool(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise OptionError(f"{attribute.name}: expected true or false, got {value!r}")


def _check_family(_: Any, __: Any, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise OptionError(f"model_family: expected a non-empty string, got {value!r}")


def _freeze_extra(value: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise OptionError(f"extra: expected a JSON object, got {type(value).__name__}")
    try:
        copied = json.loads(json.dumps(dict(value)))
    except (TypeError, ValueError) as exc:
        raise OptionError(f"extra: values must be JSON-serializable ({exc})") from exc
    return MappingProxyType(copied)


#: Graph names exporters give every model: they say nothing about the model family.
_GENERIC_GRAPH_NAMES = re.compile(
    r"^(main_graph|main|graph|model|torch[-_]jit([-_]export)?|tf2onnx|tf2onnx_graph|"
    r"onnx_graph|test_graph|[0-9a-f]{16,}|[0-9a-f-]{36})$",
    re.IGNORECASE,
)


def _family(graph_name: str | None, fallback: str | None) -> str:
    """The graph's name when it is specific; else the fallback (file stem), else "unknown"."""
    if graph_name and not _GENERIC_GRAPH_NAMES.match(graph_name.strip()):
        return graph_name
    return fallback or "unknown"


@attrs.frozen(kw_only=True)
class CheckpointMetadata:
    """Facts about a checkpoint that drive provider selection and input checks, stored beside the
    weights as ``<stem>.metadata.json``; ``variants``: the precision variants it carries."""

    schema_version: ClassVar[int] = SCHEMA_VERSION

    model_family: str = attrs.field(default="unknown", validator=_check_family)
    input_names: tuple[str, ...] = attrs.field(converter=_input_names)
    output_names: tuple[str, ...] = attrs.field(converter=_output_names)
    precision: str = attrs.field(default="fp32", validator=_check_precision)
    static_shapes: bool = attrs.field(default=False, validator=_check_bool)
    extra: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_freeze_extra, eq=False, hash=False
    )
    variants: tuple[Variant, ...] = attrs.field(default=(), converter=parse_variants)

    def variants_for(self, ort_name: str, *precisions: str) -> tuple[Variant, ...]:
        """The variants of these precisions that may run on provider ``ort_name``, in manifest order."""
        return tuple(v for v in self.variants if v.precision in precisions and v.runs_on(ort_name))

    def dim_ranges(self) -> dict[str, tuple[int, int, int]]:
        """``extra.dim_ranges`` validated: ``{dim_name: (min, opt, max)}`` ({} when absent), the
        key's one reader; a malformed value raises naming the dimension."""
        return parse_dim_ranges(self.extra.get("dim_ranges"))

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict that includes ``schema_version`` (and ``variants`` when any)."""
        data = {
            "schema_version": SCHEMA_VERSION,
            "model_family": self.model_family,
            "input_names": list(self.input_names),
            "output_names": list(self.output_names),
            "precision": self.precision,
            "static_shapes": self.static_shapes,
            "extra": dict(self.extra),
        }
        if self.variants:
            data["variants"] = [variant.to_dict() for variant in self.variants]
        return data

    def to_json(self) -> str:
        """Serialize to the JSON text stored in ``<stem>.metadata.json``."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckpointMetadata:
        """Build from a dict, rejecting unknown fields and newer schema versions by name."""
        if not isinstance(data, Mapping):
            raise OptionError(f"checkpoint metadata: expected a JSON object, got {data!r}")
        fields = dict(data)
        version = fields.pop("schema_version", SCHEMA_VERSION)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise OptionError(f"schema_version: expected a positive integer, got {version!r}")
        if version > SCHEMA_VERSION:
            raise OptionError(
                f"schema_version: this ortplug reads versions up to {SCHEMA_VERSION}, "
                f"got {version}; upgrade ortplug to read this checkpoint"
            )
        allowed = [f.name for f in attrs.fields(cls)]
        unknown = sorted(set(fields) - set(allowed))
        if unknown:
            raise OptionError(
                f"checkpoint metadata: unknown field(s) {unknown}; allowed: {', '.join(allowed)}"
            )
        missing = [name for name in ("input_names", "output_names") if name not in fields]
        if missing:
            raise OptionError(f"checkpoint metadata: missing required field(s) {missing}")
        return cls(**fields)

    @classmethod
    def from_json(cls, text: str | bytes) -> CheckpointMetadata:
        """Parse the JSON text of ``to_json``."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OptionError(f"checkpoint metadata is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def from_model(cls, model: str | os.PathLike[str] | bytes) -> CheckpointMetadata:
        """Infer names, static-shape-ness and precision from an ONNX model file or its bytes."""
        if isinstance(model, bytes):
            return cls.from_summary(summarize_model(model))
        return cls.from_summary(summarize_file(model))

    def require_names_in(
        self,
        model_inputs: Sequence[str],
        model_outputs: Sequence[str],
        *,
        origin: str,
        also_accepted: Sequence[str] = (),
    ) -> None:
        """Raise ``ValueError`` when this metadata names an input or output the model lacks.

        ``also_accepted`` are further names that may be fed (overridable initializers).
        """
        for field, names, known, accepted in (
            ("input_names", self.input_names, model_inputs, (*model_inputs, *also_accepted)),
            ("output_names", self.output_names, model_outputs, model_outputs),
        ):
            accepted_names = set(accepted)
            unknown = [name for name in names if name not in accepted_names]
            if unknown:
                raise OptionError(
                    f"{origin}: {field} {unknown} not in the model; the model has {list(known)}"
                )

    @classmethod
    def from_summary(cls, summary: ModelSummary, *, name: str | None = None) -> CheckpointMetadata:
        """Infer metadata from a parsed model summary; ``model_family`` is the graph's name unless
        an exporter's generic one, then ``name`` (the file's stem)."""
        _require_metadata_names(summary)
        require_utf8_dimensions(summary)
        feeds = summary.feed_inputs
        return cls(
            model_family=_family(summary.graph_name, name),
            input_names=[i.name for i in feeds],
            output_names=[o.name for o in summary.outputs],
            precision=_infer_precision(summary),
            static_shapes=all(
                i.kind == "tensor"
                and i.shape is not None
                and all(isinstance(d, int) and d > 0 for d in i.shape)
                for i in feeds
            ),
        )


def _require_metadata_names(summary: ModelSummary) -> None:
    """Raise naming the model when its input or output names cannot be metadata (empty, repeated)."""
    for field, infos in (("input_names", summary.feed_inputs), ("output_names", summary.outputs)):
        try:
            _names(field, [info.name for info in infos])
        except OptionError as exc:
            raise CheckpointError(
                f"{summary.label}: cannot infer checkpoint metadata from the graph ({exc}); "
                "give the metadata explicitly"
            ) from exc


def require_utf8_dimensions(summary: ModelSummary) -> None:
    """Refuse, in one line naming it, a graph input or output dimension whose name is not UTF-8:
    ONNX Runtime runs the model, but its Python API raises a bare ``UnicodeDecodeError`` when
    ortplug (or anyone) reads the shape."""
    for side, infos in (("input", summary.feed_inputs), ("output", summary.outputs)):
        for info in infos:
            for index, raw in info.non_utf8_dims:
                raise CheckpointError(
                    f"{summary.label}: {side} {info.name!r} dimension {index} is named {raw!r}, "
                    "which is not UTF-8: ONNX Runtime's Python API cannot read that shape; "
                    "rename the dimension (its dim_param) to UTF-8 text"
                )


def _infer_precision(summary: ModelSummary) -> str:
    """Quantization ops mean int8; otherwise the float type holding the most weights wins."""
    if summary.op_types & _QUANTIZED_OPS:
        return "int8"
    counts: dict[str, int] = {}
    for elem_type, count in summary.initializer_sizes:
        precision = _FLOAT_PRECISION.get(elem_type)
        if precision:
            counts[precision] = counts.get(precision, 0) + count
    if not counts:
        for info in summary.feed_inputs:
            precision = _FLOAT_PRECISION.get(info.elem_type or 0)
            if precision:
                counts[precision] = counts.get(precision, 0) + 1
    return max(counts, key=lambda p: counts[p]) if counts else "fp32"


def parse_dim_ranges(value: object) -> dict[str, tuple[int, int, int]]:
    """Validate a ``dim_ranges`` value: ``{dim_name: [min, opt, max]}`` positive, ordered."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OptionError(
            f"metadata extra.dim_ranges: expected {{dim: [min, opt, max]}}, got {value!r}"
        )
    ranges = {}
    for dim, triple in value.items():
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
        ranges[str(dim)] = (triple[0], triple[1], triple[2])
    return ranges
