"""What a live ONNX Runtime session is, read from it (names, types, placement, profiling): the
describing half of a session-backed object; nothing here runs the model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import OptionError
from ..plugin_host.manager import resolve_plugin_host
from ..providers.options import encode_option
from .feeds import feed_by_name, select_outputs
from .serial import serial_lock, serialised
from .validation import InputChecker, InputSpec

if TYPE_CHECKING:
    from ..checkpoint import CheckpointMetadata
    from ..plugin_host.manager import PluginHost
    from .introspection import MemoryInfo, ModelInfo, ValueInfo

__all__ = ["SessionSurface"]


class SessionSurface:
    """Names, types, placement, metadata and profiling of the session :meth:`_live` returns."""

    _metadata: CheckpointMetadata
    _plugins: PluginHost | None
    _infos: dict[str, tuple[ValueInfo, ...]]

    def _live(self) -> Any:
        """The session (raises when there is none: the owner is closed)."""
        raise NotImplementedError

    def _checked(self, session: Any) -> Any:
        """``session`` serialised where a provider requires it, its names checked against the
        metadata (at construction and after a rebuild)."""
        session = serialised(session, resolve_plugin_host(self._plugins))
        checker = InputChecker.from_session(session)
        output_names = [o.name for o in session.get_outputs()]
        self._metadata.require_names_in(
            checker.names,
            output_names,
            origin="metadata",
            also_accepted=sorted(checker.overridable),
        )
        self._checker, self._output_names = checker, output_names
        self._overridable = tuple(sorted(checker.overridable))
        return session

    @property
    def run_lock(self) -> Any:
        """The locks every run of this session takes, where a provider does not declare
        concurrent runs safe (``None``: runs go concurrently); code running the session itself
        (:attr:`ort_session`) takes them too."""
        return serial_lock(self._live())

    @property
    def ort_session(self) -> Any:
        """The ``onnxruntime.InferenceSession`` serving now; runs on it bypass the backend's
        serialisation, checks and fallbacks (for code that must hold ONNX Runtime's own)."""
        session = self._live()
        return getattr(session, "inner", session)

    @property
    def provider_options(self) -> dict[str, dict[str, str]]:
        """The options each realized provider runs with, as ONNX Runtime reports them."""
        return {k: dict(v) for k, v in self._live().get_provider_options().items()}

    @property
    def input_names(self) -> list[str]:
        """The model's input names, in model order."""
        return self._checker.names

    @property
    def input_specs(self) -> tuple[InputSpec, ...]:
        """Each input's name, ORT type string and (symbolic) shape, in model order."""
        return self._checker.inputs

    @property
    def output_names(self) -> list[str]:
        """The model's output names, in model order (the keys ``run`` returns)."""
        return list(self._output_names)

    def _info(self, which: str) -> tuple[ValueInfo, ...]:
        cached = self._infos.get(which)
        if cached is None:
            from ..session.introspection import value_infos

            cached = self._infos[which] = value_infos(getattr(self._live(), f"get_{which}")())
        return cached

    @property
    def inputs(self) -> tuple[ValueInfo, ...]:
        """Typed info of each input: kind, element type, shape with symbolic dims, nesting."""
        return self._info("inputs")

    @property
    def outputs(self) -> tuple[ValueInfo, ...]:
        """Typed info of each output."""
        return self._info("outputs")

    @property
    def overridable_initializers(self) -> tuple[ValueInfo, ...]:
        """Initializers that may be fed by name to replace their stored value."""
        return self._info("overridable_initializers")

    @property
    def model_info(self) -> ModelInfo:
        """Producer, graph name, domain, version, description and custom metadata of the model."""
        from ..session.introspection import ModelInfo

        return ModelInfo.from_session(self._live())

    @property
    def input_memory_info(self) -> tuple[MemoryInfo, ...]:
        """Where each input is expected (device, memory type), in model order."""
        from ..session.introspection import memory_infos

        return memory_infos(self.input_names, self._live().get_input_memory_infos())

    @property
    def output_memory_info(self) -> tuple[MemoryInfo, ...]:
        """Where each output is produced, in model order."""
        from ..session.introspection import memory_infos

        return memory_infos(self._output_names, self._live().get_output_memory_infos())

    def node_assignment(self) -> dict[str, int]:
        """How many graph nodes each provider took, e.g. ``{"CUDAExecutionProvider": 41, ...}``;
        ``RuntimeError`` for a wrapped session built without recording it."""
        from .placement import recorded_node_counts

        return recorded_node_counts(self._live())

    def _feed(self, inputs: object) -> dict[str, Any]:
        """A feed dict from a mapping or from values in model order (then overridable initializers)."""
        return feed_by_name(inputs, self._checker.names, self._overridable)

    def _selected(self, outputs: object) -> list[str]:
        return select_outputs(outputs, self._output_names)

    def end_profiling(self) -> str:
        """Stop profiling and return the path of the JSON profile ONNX Runtime wrote."""
        path = str(self._live().end_profiling() or "")
        if not path:
            raise RuntimeError(
                "profiling is off for this session: build it with "
                "SessionOptionsConfig(enable_profiling=True)"
            )
        return path

    @property
    def profiling_start_time_ns(self) -> int:
        """When profiling started, in nanoseconds since the epoch (0 when profiling is off)."""
        return int(self._live().get_profiling_start_time_ns())

    def set_ep_dynamic_options(self, options: Mapping[str, object]) -> None:
        """Change provider settings on the live session; keys and values are sent as strings."""
        if not isinstance(options, Mapping) or not options:
            raise OptionError(
                f"set_ep_dynamic_options: expected a non-empty mapping, got {options!r}"
            )
        self._live().set_ep_dynamic_options({str(k): encode_option(v) for k, v in options.items()})
