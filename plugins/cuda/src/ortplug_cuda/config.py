"""``CudaProvider``: typed options of ONNX Runtime's CUDA execution provider."""

from __future__ import annotations

from typing import ClassVar

import attrs
from ortplug.plugins import (
    HostCapabilities,
    bool_field,
    choice_field,
    declared_kind,
    int_field,
    ort_options,
    path_field,
)

__all__ = ["CONV_ALGO_SEARCH", "CudaProvider"]

#: ``cudnn_conv_algo_search`` values; EXHAUSTIVE is ONNX Runtime's default.
CONV_ALGO_SEARCH = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")
_ARENA_STRATEGIES = ("kNextPowerOfTwo", "kSameAsRequested")
_ARENA_ALIASES = {"next_power_of_two": "kNextPowerOfTwo", "same_as_requested": "kSameAsRequested"}


@declared_kind
@attrs.frozen(kw_only=True)
class CudaProvider:
    """ONNX Runtime's ``CUDAExecutionProvider``.

    Every field but ``device_id`` defaults to ``None``: ONNX Runtime's own
    default applies and nothing is sent. ``preload_dlls`` and ``dll_directory``
    are ortplug's: they make ortplug call ``onnxruntime.preload_dlls`` (once,
    when a session with this provider is built) so the CUDA and cuDNN
    libraries of the nvidia-* wheels are found.
    """

    kind: ClassVar[str]  # kind and ort_name: the manifest's (ortplug.json)
    ort_name: ClassVar[str]

    device_id: int = int_field(0)
    #: Arena size limit in bytes.
    gpu_mem_limit: int | None = int_field(minimum=1)
    arena_extend_strategy: str | None = choice_field(_ARENA_STRATEGIES, aliases=_ARENA_ALIASES)
    #: EXHAUSTIVE re-benchmarks convolutions for every new input shape: slow for dynamic shapes.
    cudnn_conv_algo_search: str | None = choice_field(CONV_ALGO_SEARCH)
    do_copy_in_default_stream: bool | None = bool_field()
    cudnn_conv_use_max_workspace: bool | None = bool_field()
    cudnn_conv1d_pad_to_nc1d: bool | None = bool_field()
    #: Needs IO binding with fixed addresses, static shapes and every node on CUDA.
    enable_cuda_graph: bool | None = bool_field()
    use_tf32: bool | None = bool_field()
    prefer_nhwc: bool | None = bool_field()
    use_ep_level_unified_stream: bool | None = bool_field()
    enable_skip_layer_norm_strict_mode: bool | None = bool_field()
    tunable_op_enable: bool | None = bool_field()
    tunable_op_tuning_enable: bool | None = bool_field()
    tunable_op_max_tuning_duration_ms: int | None = int_field(minimum=1)
    #: A ``cudaStream_t`` as an integer (e.g. ``torch.cuda.current_stream().cuda_stream``).
    user_compute_stream: int | None = int_field(minimum=1)
    preload_dlls: bool = bool_field(True)
    dll_directory: str | None = path_field()

    def each_device(self, host: HostCapabilities) -> tuple[CudaProvider, ...]:
        """This provider on each GPU the host's ``cuda`` probe lists, its own device first
        (``performance_hint="cumulative_throughput"`` serves on every one of them)."""
        devices = host.fact("cuda", "devices") or []
        ids = [d.get("index") for d in devices if isinstance(d, dict)]
        others = sorted({i for i in ids if type(i) is int and i >= 0 and i != self.device_id})
        return (self, *(attrs.evolve(self, device_id=i) for i in others))

    def to_ort(self) -> tuple[str, dict[str, str]]:
        """ONNX Runtime's provider name and options (names from ``cuda_execution_provider_info``)."""
        stream = self.user_compute_stream
        return self.ort_name, ort_options(
            [
                ("device_id", self.device_id),
                ("gpu_mem_limit", self.gpu_mem_limit),
                ("arena_extend_strategy", self.arena_extend_strategy),
                ("cudnn_conv_algo_search", self.cudnn_conv_algo_search),
                ("do_copy_in_default_stream", self.do_copy_in_default_stream),
                ("cudnn_conv_use_max_workspace", self.cudnn_conv_use_max_workspace),
                ("cudnn_conv1d_pad_to_nc1d", self.cudnn_conv1d_pad_to_nc1d),
                ("enable_cuda_graph", self.enable_cuda_graph),
                ("use_tf32", self.use_tf32),
                ("prefer_nhwc", self.prefer_nhwc),
                ("use_ep_level_unified_stream", self.use_ep_level_unified_stream),
                ("enable_skip_layer_norm_strict_mode", self.enable_skip_layer_norm_strict_mode),
                ("tunable_op_enable", self.tunable_op_enable),
                ("tunable_op_tuning_enable", self.tunable_op_tuning_enable),
                ("tunable_op_max_tuning_duration_ms", self.tunable_op_max_tuning_duration_ms),
                ("has_user_compute_stream", True if stream is not None else None),
                ("user_compute_stream", stream),
            ]
        )
