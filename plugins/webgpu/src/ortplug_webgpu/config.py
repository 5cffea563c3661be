"""``WebGpuProvider``: typed options of ONNX Runtime's WebGPU execution provider (plugin-EP library).

Option names and values are the ones ``onnxruntime-ep-webgpu`` 0.4.0 parses
(``webgpu_provider_options.h`` / ``webgpu_provider_factory.cc`` in
microsoft/onnxruntime; each name appears in the wheel's library as
``ep.webgpuexecutionprovider.<name>``). They are passed without that prefix:
``add_provider_for_devices`` adds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import attrs
from ortplug.plugins import (
    OptionError,
    bool_field,
    choice_field,
    declared_kind,
    int_field,
    ort_options,
)

__all__ = [
    "BUFFER_CACHE_MODES",
    "DAWN_BACKENDS",
    "LAYOUTS",
    "POWER_PREFERENCES",
    "VALIDATION_MODES",
    "WebGpuProvider",
]

#: ``preferredLayout``: the layout of layout-sensitive operators (the native EP's default is NHWC).
LAYOUTS = ("NCHW", "NHWC")
#: ``validationMode``: Dawn's validation; ``basic`` is the default, ``full`` is for debugging.
VALIDATION_MODES = ("disabled", "wgpuOnly", "basic", "full")
#: ``*BufferCacheMode``: how GPU buffers are reused.
BUFFER_CACHE_MODES = ("disabled", "lazyRelease", "simple", "bucket")
#: ``powerPreference``: which adapter Dawn asks for (default high-performance).
POWER_PREFERENCES = ("high-performance", "low-power")
#: ``dawnBackendType``: Dawn's backend where there is a choice (Windows: D3D12 or Vulkan).
DAWN_BACKENDS = ("Vulkan", "D3D12")

_CACHE_ALIASES = {"lazy_release": "lazyRelease"}
_VALIDATION_ALIASES = {"wgpu_only": "wgpuOnly"}
_POWER_ALIASES = {"high_performance": "high-performance", "low_power": "low-power"}
#: Upper bound of ``maxNumPendingDispatches``, enforced by the EP.
_MAX_PENDING_DISPATCHES = 4096


def _node_names(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, Iterable):
        raise OptionError(f"force_cpu_node_names: expected a list of node names, got {value!r}")
    names = tuple(names)
    bad = [n for n in names if not isinstance(n, str) or not n or "\n" in n or "\r" in n]
    if bad:
        raise OptionError(
            "force_cpu_node_names: expected non-empty node names without line breaks, "
            f"got {bad[0]!r}"
        )
    return names


@declared_kind
@attrs.frozen(kw_only=True)
class WebGpuProvider:
    """ONNX Runtime's ``WebGpuExecutionProvider`` (Dawn over Vulkan, D3D12 or Metal).

    Every field defaults to ``None``: the EP's own default applies and nothing
    is sent. ``enable_graph_capture`` replays recorded GPU work; with
    ``onnxruntime-ep-webgpu`` 0.4.0 it needs every compute node on WebGPU (a
    session with CPU nodes fails to build) and runs only through IO binding
    with device values (a plain ``run()`` fails), so it is never set for you.
    """

    kind: ClassVar[str]  # kind and ort_name: the manifest's (ortplug.json)
    ort_name: ClassVar[str]

    preferred_layout: str | None = choice_field(LAYOUTS)
    enable_graph_capture: bool | None = bool_field()
    validation_mode: str | None = choice_field(VALIDATION_MODES, aliases=_VALIDATION_ALIASES)
    storage_buffer_cache_mode: str | None = choice_field(BUFFER_CACHE_MODES, aliases=_CACHE_ALIASES)
    uniform_buffer_cache_mode: str | None = choice_field(BUFFER_CACHE_MODES, aliases=_CACHE_ALIASES)
    query_resolve_buffer_cache_mode: str | None = choice_field(
        BUFFER_CACHE_MODES, aliases=_CACHE_ALIASES
    )
    default_buffer_cache_mode: str | None = choice_field(BUFFER_CACHE_MODES, aliases=_CACHE_ALIASES)
    power_preference: str | None = choice_field(POWER_PREFERENCES, aliases=_POWER_ALIASES)
    dawn_backend_type: str | None = choice_field(DAWN_BACKENDS)
    #: Register int64 kernels (on by itself when graph capture is on).
    enable_int64: bool | None = bool_field()
    #: Dawn's robust buffer access (bounds checks in shaders).
    enable_robustness: bool | None = bool_field()
    #: Keep the WebGPU device alive when the last session using it ends.
    preserve_device: bool | None = bool_field()
    #: Windows (D3D12) only: frame markers for PIX captures.
    enable_pix_capture: bool | None = bool_field()
    #: Node names that run on the CPU provider even when WebGPU has a kernel.
    force_cpu_node_names: tuple[str, ...] | None = attrs.field(default=None, converter=_node_names)
    #: Dispatches queued before a submit, 1..4096 (the EP's default is 16).
    max_num_pending_dispatches: int | None = int_field(minimum=1, maximum=_MAX_PENDING_DISPATCHES)
    #: Bytes; 0 or unset: the adapter's limit.
    max_storage_buffer_binding_size: int | None = int_field(minimum=0)
    #: Buffer generations kept for reuse across captured graphs (0: no pooling; default 1).
    session_buffer_pool_generations: int | None = int_field(minimum=0)

    def to_ort(self) -> tuple[str, dict[str, str]]:
        """ONNX Runtime's provider name and options (camelCase names the EP parses)."""
        names = self.force_cpu_node_names
        return self.ort_name, ort_options(
            [
                ("preferredLayout", self.preferred_layout),
                ("enableGraphCapture", self.enable_graph_capture),
                ("validationMode", self.validation_mode),
                ("storageBufferCacheMode", self.storage_buffer_cache_mode),
                ("uniformBufferCacheMode", self.uniform_buffer_cache_mode),
                ("queryResolveBufferCacheMode", self.query_resolve_buffer_cache_mode),
                ("defaultBufferCacheMode", self.default_buffer_cache_mode),
                ("powerPreference", self.power_preference),
                ("dawnBackendType", self.dawn_backend_type),
                ("enableInt64", self.enable_int64),
                ("enableRobustness", self.enable_robustness),
                ("preserveDevice", self.preserve_device),
                ("enablePIXCapture", self.enable_pix_capture),
                ("forceCpuNodeNames", "\n".join(names) if names else None),
                ("maxNumPendingDispatches", self.max_num_pending_dispatches),
                ("maxStorageBufferBindingSize", self.max_storage_buffer_binding_size),
                ("sessionBufferPoolGenerations", self.session_buffer_pool_generations),
            ]
        )
