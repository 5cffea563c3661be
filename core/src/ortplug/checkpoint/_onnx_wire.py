"""A minimal reader of the ONNX ``ModelProto`` wire format.

It reads only what checkpoint metadata needs (graph inputs and outputs, their
types and shapes, initializer element types and sizes, node op types) so that
inferring metadata never imports the ``onnx`` package. Tensor payloads are
skipped by length, never copied.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from math import prod

import attrs

__all__ = [
    "ModelSummary",
    "TensorInfo",
    "WireFormatError",
    "summarize_file",
    "summarize_model",
]

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5

# ONNX TensorProto.DataType codes used for precision inference.
FLOAT, UINT8, INT8, FLOAT16, DOUBLE, BFLOAT16 = 1, 2, 3, 10, 11, 16


class WireFormatError(ValueError):
    """The bytes are not a well-formed ONNX protobuf message."""


@attrs.frozen
class TensorInfo:
    """A graph input or output: name, kind (tensor, sequence, ...), element type and shape."""

    name: str
    kind: str
    elem_type: int | None
    shape: tuple[int | str | None, ...] | None


@attrs.frozen
class ModelSummary:
    """What the reader extracted from a model."""

    graph_name: str
    producer: str
    opsets: tuple[tuple[str, int], ...]
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    initializer_names: frozenset[str]
    initializer_sizes: tuple[tuple[int, int], ...]  # (elem_type, element count)
    op_types: frozenset[str]
    metadata_props: tuple[tuple[str, str], ...]

    @property
    def feed_inputs(self) -> tuple[TensorInfo, ...]:
        """Graph inputs a caller must or may feed (initializers excluded, as ONNX Runtime does)."""
        return tuple(i for i in self.inputs if i.name not in self.initializer_names)


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise WireFormatError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireFormatError("varint longer than 10 bytes")


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """Yield ``(field number, wire type, value)``; length-delimited values are memoryviews."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireFormatError("field number 0")
        value: int | memoryview
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _LENGTH:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise WireFormatError("truncated length-delimited field")
            value, pos = buf[pos : pos + size], pos + size
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            if pos + width > end:
                raise WireFormatError("truncated fixed-width field")
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        else:
            raise WireFormatError(f"unsupported wire type {wire}")
        yield number, wire, value


def _text(value: int | memoryview) -> str:
    if not isinstance(value, memoryview):
        raise WireFormatError("expected a string field")
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireFormatError("string field is not UTF-8") from exc


def _message(value: int | memoryview) -> memoryview:
    if not isinstance(value, memoryview):
        raise WireFormatError("expected an embedded message")
    return value


def _int(value: int | memoryview) -> int:
    if isinstance(value, memoryview):
        raise WireFormatError("expected an integer field")
    return value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _shape(buf: memoryview) -> tuple[int | str | None, ...]:
    dims: list[int | str | None] = []
    for number, _, value in _fields(buf):
        if number != 1:
            continue
        dim: int | str | None = None
        for dnum, _, dval in _fields(_message(value)):
            if dnum == 1:
                dim = _signed(_int(dval))
            elif dnum == 2:
                dim = _text(dval)
        dims.append(dim)
    return tuple(dims)


def _type(buf: memoryview) -> tuple[str, int | None, tuple[int | str | None, ...] | None]:
    kinds = {1: "tensor", 4: "sequence", 5: "map", 8: "sparse_tensor", 9: "optional"}
    for number, _, value in _fields(buf):
        kind = kinds.get(number)
        if kind is None:
            continue
        if kind not in ("tensor", "sparse_tensor"):
            return kind, None, None
        elem: int | None = None
        shape: tuple[int | str | None, ...] | None = None
        for tnum, _, tval in _fields(_message(value)):
            if tnum == 1:
                elem = _int(tval)
            elif tnum == 2:
                shape = _shape(_message(tval))
        return kind, elem, shape
    return "unknown", None, None


def _value_info(buf: memoryview) -> TensorInfo:
    name, kind, elem, shape = "", "unknown", None, None
    for number, _, value in _fields(buf):
        if number == 1:
            name = _text(value)
        elif number == 2:
            kind, elem, shape = _type(_message(value))
    return TensorInfo(name=name, kind=kind, elem_type=elem, shape=shape)


def _tensor(buf: memoryview) -> tuple[str, int, int]:
    """Return an initializer's (name, element type, element count)."""
    name, elem, dims = "", 0, []
    for number, wire, value in _fields(buf):
        if number == 1:
            if wire == _LENGTH:  # packed dims
                packed, pos = _message(value), 0
                while pos < len(packed):
                    dim, pos = _varint(packed, pos)
                    dims.append(dim)
            else:
                dims.append(_int(value))
        elif number == 2:
            elem = _int(value)
        elif number == 8:
            name = _text(value)
    return name, elem, prod(dims)


def _sparse_tensor(buf: memoryview) -> tuple[str, int, int]:
    for number, _, value in _fields(buf):
        if number == 1:
            return _tensor(_message(value))
    return "", 0, 0


def _node_op(buf: memoryview) -> str:
    for number, _, value in _fields(buf):
        if number == 4:
            return _text(value)
    return ""


def summarize_model(data: bytes | memoryview) -> ModelSummary:
    """Read a serialized ``ModelProto``; raise :class:`WireFormatError` when it is not one."""
    buf = memoryview(data)
    producer, graph, opsets, props = "", None, [], []
    for number, _, value in _fields(buf):
        if number == 2:
            producer = _text(value)
        elif number == 7:
            graph = _message(value)
        elif number == 8:
            domain, version = "", 0
            for onum, _, oval in _fields(_message(value)):
                if onum == 1:
                    domain = _text(oval)
                elif onum == 2:
                    version = _int(oval)
            opsets.append((domain, version))
        elif number == 14:
            entry = dict((n, _text(v)) for n, _, v in _fields(_message(value)) if n in (1, 2))
            props.append((entry.get(1, ""), entry.get(2, "")))
    if graph is None:
        raise WireFormatError("the model has no graph")

    graph_name = ""
    inputs: list[TensorInfo] = []
    outputs: list[TensorInfo] = []
    init_names: set[str] = set()
    init_sizes: list[tuple[int, int]] = []
    ops: set[str] = set()
    for number, _, value in _fields(graph):
        if number == 1:
            ops.add(_node_op(_message(value)))
        elif number == 2:
            graph_name = _text(value)
        elif number in (5, 15):
            reader = _tensor if number == 5 else _sparse_tensor
            name, elem, count = reader(_message(value))
            init_names.add(name)
            init_sizes.append((elem, count))
        elif number == 11:
            inputs.append(_value_info(_message(value)))
        elif number == 12:
            outputs.append(_value_info(_message(value)))
    if not outputs:
        raise WireFormatError("the graph has no outputs")
    return ModelSummary(
        graph_name=graph_name,
        producer=producer,
        opsets=tuple(opsets),
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        initializer_names=frozenset(init_names),
        initializer_sizes=tuple(init_sizes),
        op_types=frozenset(ops),
        metadata_props=tuple(props),
    )


def summarize_file(path: str | os.PathLike[str]) -> ModelSummary:
    """Read a model file through a memory map; errors name the file."""
    problem = "the file is empty"
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size > 0:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    return summarize_model(view)
                except WireFormatError as exc:
                    # Keep only the text: the traceback pins slices of the mapping.
                    problem = str(exc)
                finally:
                    view.release()
    raise WireFormatError(f"{os.fspath(path)} is not a valid ONNX model: {problem}")
