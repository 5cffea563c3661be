"""What a live session says about its model: typed input/output info, metadata, memory placement."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs
import numpy as np

__all__ = ["MemoryInfo", "ModelInfo", "ValueInfo", "memory_infos", "parse_type", "value_infos"]

# ONNX element type names (as in "tensor(float)") -> numpy dtype names.
_DTYPES = {
    "float": "float32",
    "double": "float64",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "bool": "bool",
    "string": "object",
    **{name: name for name in ("int8", "int16", "int32", "int64")},
    **{name: name for name in ("uint8", "uint16", "uint32", "uint64")},
}
_KINDS = {
    "tensor": "tensor",
    "sparse_tensor": "sparse_tensor",
    "seq": "sequence",
    "map": "map",
    "optional": "optional",
}


@attrs.frozen
class ValueInfo:
    """One input, output or overridable initializer, or a nested element type: a tensor's
    ``element_type`` (``float``...) and ``shape`` (ints, names, ``None``); a sequence's or
    optional's ``element``; a map's ``key_type`` and ``value``."""

    name: str
    type: str
    kind: str
    element_type: str | None = None
    shape: tuple[int | str | None, ...] | None = None
    element: ValueInfo | None = None
    key_type: str | None = None
    value: ValueInfo | None = None

    @property
    def dtype(self) -> np.dtype[Any] | None:
        """The numpy dtype of a tensor's elements (``None`` for other kinds or bfloat16)."""
        name = _DTYPES.get(self.element_type or "")
        if self.kind != "tensor" or name is None or name == "bfloat16":
            return None
        return np.dtype(name)

    @property
    def symbolic_dims(self) -> tuple[str, ...]:
        """The named dimensions of the shape, in order."""
        return tuple(d for d in self.shape or () if isinstance(d, str))


def _split_top(text: str) -> list[str]:
    """Split ``"string,tensor(float)"`` at top-level commas."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parse_type(name: str, type_text: str, shape: object = None) -> ValueInfo:
    """A :class:`ValueInfo` from ONNX Runtime's type string (``seq(tensor(float))``...)."""
    head, _, rest = type_text.partition("(")
    inner = rest[:-1] if rest.endswith(")") else rest
    kind = _KINDS.get(head, head)
    if kind in ("tensor", "sparse_tensor"):
        dims = tuple(shape) if isinstance(shape, (list, tuple)) else None
        return ValueInfo(name, type_text, kind, element_type=inner, shape=dims)
    if kind in ("sequence", "optional"):
        return ValueInfo(name, type_text, kind, element=parse_type("", inner))
    if kind == "map":
        key, value = _split_top(inner)
        return ValueInfo(name, type_text, kind, key_type=key, value=parse_type("", value))
    return ValueInfo(name, type_text, kind)


def value_infos(args: Any) -> tuple[ValueInfo, ...]:
    """ValueInfos of ``session.get_inputs()``-style NodeArgs."""
    return tuple(parse_type(arg.name, arg.type, arg.shape) for arg in args)


def _frozen(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


@attrs.frozen
class ModelInfo:
    """The model's own metadata (``get_modelmeta``), ``custom`` holding its ``metadata_props``."""

    producer: str
    graph_name: str
    graph_description: str
    domain: str
    description: str
    version: int
    custom: Mapping[str, str] = attrs.field(converter=_frozen)

    @classmethod
    def from_session(cls, session: Any) -> ModelInfo:
        """Read ``session.get_modelmeta()``."""
        meta = session.get_modelmeta()
        return cls(
            producer=meta.producer_name,
            graph_name=meta.graph_name,
            graph_description=meta.graph_description,
            domain=meta.domain,
            description=meta.description,
            version=meta.version,
            custom=meta.custom_metadata_map,
        )


@attrs.frozen
class MemoryInfo:
    """Where ONNX Runtime expects an input or puts an output (seed 003's memory info fields)."""

    name: str
    location: str  # the allocator's name: "Cpu", "Cuda", "CudaPinned"...
    device_id: int
    mem_type: str
    allocator_type: str
    device_mem_type: str
    vendor_id: int

    @classmethod
    def from_ort(cls, name: str, info: Any) -> MemoryInfo:
        """Read an ``OrtMemoryInfo`` for the input or output ``name``."""
        return cls(
            name=name,
            location=str(info.name),
            device_id=int(info.device_id),
            mem_type=str(info.mem_type).rpartition(".")[2],
            allocator_type=str(info.allocator_type).rpartition(".")[2],
            device_mem_type=str(info.device_mem_type).rpartition(".")[2],
            vendor_id=int(info.device_vendor_id),
        )


def memory_infos(names: Sequence[str], infos: Sequence[Any]) -> tuple[MemoryInfo, ...]:
    """Each named value's :class:`MemoryInfo` from ONNX Runtime's list of them, in order."""
    return tuple(MemoryInfo.from_ort(name, info) for name, info in zip(names, infos))
