"""``TensorrtProvider``: typed options of ONNX Runtime's TensorRT execution provider."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import attrs
from ortplug.plugins import (
    OptionError,
    bool_field,
    declared_kind,
    int_field,
    ort_options,
    path_field,
    seconds_field,
)

from .shapes import check_profiles

__all__ = ["TensorrtProvider"]


def _op_types(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(op.strip() for op in value.split(",") if op.strip())
    if isinstance(value, Iterable):
        return tuple(value)
    raise OptionError(f"op_types_to_exclude: expected op names, got {value!r}")


def _check_op_types(_: Any, __: Any, value: tuple[object, ...]) -> None:
    bad = [op for op in value if not isinstance(op, str) or not op.isidentifier()]
    if bad:
        raise OptionError(
            f"op_types_to_exclude: expected ONNX op type names like 'Loop', got {bad!r}"
        )


def _check_shapes(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise OptionError(
            f"{attribute.name}: expected 'input:1x3x224x224,...' or null, got {value!r}"
        )


def _shapes_field() -> Any:
    return attrs.field(default=None, validator=_check_shapes)


@declared_kind
@attrs.frozen(kw_only=True)
class TensorrtProvider:
    """ONNX Runtime's ``TensorrtExecutionProvider``.

    Engine and timing caches are on by default: with no path given, ortplug
    puts them under its cache directory, keyed by the model's hash, the ONNX
    Runtime and TensorRT versions, the GPU's compute capability and these
    options, so a stale engine is never loaded. Profile shapes use ONNX
    Runtime's format ``"in1:1x3x224x224,in2:1x77"``; all three or none, and
    every dynamic input must be listed (by default they come from the
    checkpoint metadata's ``extra.dim_ranges``). ``build_timeout_s`` cancels a
    session build that takes longer; ``preload_dlls``/``dll_directory`` as
    for the CUDA provider.
    """

    kind: ClassVar[str]  # kind and ort_name: the manifest's (ortplug.json)
    ort_name: ClassVar[str]

    device_id: int = int_field(0)
    fp16: bool | None = bool_field()
    bf16: bool | None = bool_field()
    int8: bool | None = bool_field()
    int8_calibration_table_name: str | None = path_field()
    int8_use_native_calibration_table: bool | None = bool_field()
    #: Builder workspace limit in bytes.
    max_workspace_size: int | None = int_field(minimum=1)
    builder_optimization_level: int | None = int_field(minimum=0, maximum=5)
    min_subgraph_size: int | None = int_field(minimum=1)
    op_types_to_exclude: tuple[str, ...] = attrs.field(
        default=(), converter=_op_types, validator=_check_op_types
    )
    engine_cache: bool = bool_field(True)
    engine_cache_path: str | None = path_field()
    timing_cache: bool = bool_field(True)
    timing_cache_path: str | None = path_field()
    profile_min_shapes: str | None = _shapes_field()
    profile_opt_shapes: str | None = _shapes_field()
    profile_max_shapes: str | None = _shapes_field()
    dump_ep_context_model: bool | None = bool_field()
    ep_context_file_path: str | None = path_field()
    #: 0 keeps the engine in a separate file (recommended), 1 embeds it in the model.
    ep_context_embed_mode: int | None = int_field(minimum=0, maximum=1)
    cuda_graph: bool | None = bool_field()
    detailed_build_log: bool | None = bool_field()
    build_timeout_s: float | None = seconds_field()
    preload_dlls: bool = bool_field(True)
    dll_directory: str | None = path_field()

    def __attrs_post_init__(self) -> None:
        shapes = (self.profile_min_shapes, self.profile_opt_shapes, self.profile_max_shapes)
        if any(s is not None for s in shapes):
            if any(s is None for s in shapes):
                raise OptionError(
                    "profile_min_shapes, profile_opt_shapes and profile_max_shapes: give all "
                    f"three or none, got {shapes}"
                )
            check_profiles(*shapes)  # type: ignore[arg-type]

    def cache_relevant_options(self) -> dict[str, str]:
        """The ONNX Runtime options that shape the engine (paths and logging left out)."""
        _, options = self.to_ort()
        ignored = {
            "trt_engine_cache_path",
            "trt_timing_cache_path",
            "trt_detailed_build_log",
            "trt_ep_context_file_path",
            "trt_dump_ep_context_model",
        }
        return {k: v for k, v in options.items() if k not in ignored}

    def to_ort(self) -> tuple[str, dict[str, str]]:
        """ONNX Runtime's provider name and ``trt_*`` options."""
        return self.ort_name, ort_options(
            [
                ("device_id", self.device_id),
                ("trt_fp16_enable", self.fp16),
                ("trt_bf16_enable", self.bf16),
                ("trt_int8_enable", self.int8),
                ("trt_int8_calibration_table_name", self.int8_calibration_table_name),
                ("trt_int8_use_native_calibration_table", self.int8_use_native_calibration_table),
                ("trt_max_workspace_size", self.max_workspace_size),
                ("trt_builder_optimization_level", self.builder_optimization_level),
                ("trt_min_subgraph_size", self.min_subgraph_size),
                ("trt_op_types_to_exclude", ",".join(self.op_types_to_exclude) or None),
                ("trt_engine_cache_enable", self.engine_cache),
                ("trt_engine_cache_path", self.engine_cache_path if self.engine_cache else None),
                ("trt_timing_cache_enable", self.timing_cache),
                ("trt_timing_cache_path", self.timing_cache_path if self.timing_cache else None),
                ("trt_profile_min_shapes", self.profile_min_shapes),
                ("trt_profile_opt_shapes", self.profile_opt_shapes),
                ("trt_profile_max_shapes", self.profile_max_shapes),
                ("trt_dump_ep_context_model", self.dump_ep_context_model),
                ("trt_ep_context_file_path", self.ep_context_file_path),
                ("trt_ep_context_embed_mode", self.ep_context_embed_mode),
                ("trt_cuda_graph_enable", self.cuda_graph),
                ("trt_detailed_build_log", self.detailed_build_log),
            ]
        )
