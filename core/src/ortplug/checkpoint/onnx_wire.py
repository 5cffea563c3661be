"""A minimal reader of the ONNX ``ModelProto`` wire format: what checkpoint metadata needs, without
importing ``onnx``, rejecting what ONNX Runtime rejects (docs/internals.md)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Iterator

import attrs

from ..errors import CheckpointError, MissingFileError

__all__ = [
    "ExternalData",
    "ModelSummary",
    "TensorInfo",
    "WireFormatError",
    "summarize_file",
    "summarize_model",
]

_VARINT, _FIXED64, _LENGTH, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5

# ONNX TensorProto.DataType codes used for precision inference.
FLOAT, UINT8, INT8, FLOAT16, DOUBLE, BFLOAT16 = 1, 2, 3, 10, 11, 16

#: Protobuf reads at most INT_MAX bytes; ONNX Runtime refuses bigger model files outright.
MAX_MODEL_BYTES = (1 << 31) - 1
#: Protobuf's default recursion budget, shared by nested messages and groups.
_MAX_DEPTH = 100
#: How much of a file one read brings in; larger fields are read whole.
_WINDOW = 1 << 16
#: Element counts saturate here (int64's maximum) so absurd dims stay cheap to multiply.
_MAX_COUNT = (1 << 63) - 1
_MASK64 = (1 << 64) - 1
# TypeProto's ``value`` oneof, by field number.
_KINDS = {1: "tensor", 4: "sequence", 5: "map", 7: "opaque", 8: "sparse_tensor", 9: "optional"}

_Span = tuple[int, int]

#: Bytes per element of the tensor types ONNX Runtime reads from external data, and the types
#: that pack several elements a byte (4-bit: 2, 2-bit: 4; the last byte is partly used).
_ELEMENT_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8,
                  14: 8, 15: 16, 16: 2, 17: 1, 18: 1, 19: 1, 20: 1, 24: 1}  # fmt: skip
_ELEMENTS_PER_BYTE = {21: 2, 22: 2, 23: 2, 25: 4, 26: 4}
#: ``offset`` and ``length`` as ONNX Runtime reads them: decimal digits, nothing around them.
_NUMBER = re.compile(r"[0-9]+")
#: ``TensorProto.DataLocation.EXTERNAL``: only such a tensor's ``external_data`` is read.
_EXTERNAL = 1

# Varints inside packed dims (each starts after a byte below 0x80): one over 10 bytes,
# one of 10 bytes with bit 63 set (a negative int64), one whose low 64 bits are 0.
_LONG_VARINT = re.compile(rb"[\x80-\xff]{10}")


@functools.cache
def _settling_varints() -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """The negative and the zero varint, compiled on first use: only a count already settled
    looks for them, and compiling their byte classes cost every process ~0.4 ms at import."""
    odd_last = b"".join(re.escape(bytes([b])) for b in range(1, 0x80, 2))
    even_last = b"".join(re.escape(bytes([b])) for b in range(0, 0x80, 2))
    negative = re.compile(rb"(?<![\x80-\xff])[\x80-\xff]{9}[" + odd_last + rb"]")
    zero = re.compile(rb"(?<![\x80-\xff])(?:\x80{0,8}\x00|\x80{9}[" + even_last + rb"])")
    return negative, zero


class WireFormatError(CheckpointError):
    """The bytes are not a well-formed ONNX protobuf message; the message names the file."""


@attrs.frozen
class TensorInfo:
    """A graph input or output: name, kind (tensor, sequence, ...), element type and shape;
    ``non_utf8_dims``: dimension names that are not UTF-8 (ORT's Python API cannot read them)."""

    name: str
    kind: str
    elem_type: int | None
    shape: tuple[int | str | None, ...] | None
    non_utf8_dims: tuple[tuple[int, bytes], ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class ExternalData:
    """One tensor's bytes outside the model file: ``location`` (relative to the model's folder),
    ``offset`` and ``length`` as given (0: not given; -1: not a number), ``size`` what ONNX
    Runtime reads (``None``: not sizable)."""

    location: str
    offset: int
    length: int
    size: int | None

    def span(self, file_size: int) -> tuple[int, int] | None:
        """``(offset, size)``: the bytes ONNX Runtime reads for this tensor from a file of
        ``file_size`` bytes; ``None`` where it refuses to (an offset or length that is not a
        number, a length other than the tensor's size, bytes past the file's end) or where
        the size is not known."""
        if self.size is None or self.offset < 0 or self.length not in (0, self.size):
            return None
        return (self.offset, self.size) if self.offset + self.size <= file_size else None


@attrs.frozen
class ModelSummary:
    """What the reader extracted from a model; ``label`` names the file (or ``<bytes>``)."""

    graph_name: str
    producer: str
    opsets: tuple[tuple[str, int], ...]
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    initializer_names: frozenset[str]
    initializer_sizes: tuple[tuple[int, int], ...]  # (elem_type, element count)
    op_types: frozenset[str]
    metadata_props: tuple[tuple[str, str], ...]
    label: str = attrs.field(default="<bytes>", kw_only=True, eq=False)
    #: Where the tensors stored outside the model file are (initializers, subgraphs and node
    #: attributes included): with the model file, all that ONNX Runtime loads.
    external_data: frozenset[ExternalData] = attrs.field(default=frozenset(), kw_only=True)
    #: Graph inputs that a top-level ``Gather`` uses as indices into an initializer: the input's
    #: name and the table's size along the gathered axis (the valid ids are 0 to size - 1).
    index_bounds: tuple[tuple[str, int], ...] = attrs.field(default=(), kw_only=True)

    @property
    def external_files(self) -> frozenset[str]:
        """The files the external data is in (``location``, relative to the model's folder)."""
        return frozenset(data.location for data in self.external_data)

    @property
    def feed_inputs(self) -> tuple[TensorInfo, ...]:
        """Graph inputs a caller must or may feed (initializers excluded, as ONNX Runtime does)."""
        return tuple(i for i in self.inputs if i.name not in self.initializer_names)


class _Source:
    """The bytes of one model, at absolute offsets: all in memory, or a window ``data`` of bytes
    ``[base, base + len(data))`` of a buffer or file, refilled through ``read``."""

    __slots__ = ("base", "data", "label", "read", "size")

    def __init__(
        self, label: str, size: int, data: bytes, read: Callable[[int, int], bytes] | None
    ) -> None:
        self.label = label
        self.size = size
        self.data = data
        self.base = 0
        self.read = read

    def fail(self, problem: str) -> WireFormatError:
        """The error for malformed bytes, naming the model."""
        return WireFormatError(f"{self.label} is not a valid ONNX model: {problem}")

    def _fill(self, pos: int, need: int) -> None:
        """Move the window to start at ``pos`` with ``need`` bytes or more (fewer at the end)."""
        if self.read is None:  # pragma: no cover - all bytes are in memory
            raise AssertionError("an in-memory model has no window to move")
        self.data = self.read(pos, min(max(need, _WINDOW), self.size - pos))
        self.base = pos

    def varint(self, pos: int, end: int, width: int = 10, mask: int = _MASK64) -> tuple[int, int]:
        """Decode the varint at ``pos`` (at most ``width`` bytes before ``end``): (value & ``mask``,
        next position), as protobuf keeps a value's low 64 bits and a key's low 32."""
        off = pos - self.base
        data = self.data
        if off < 0 or (off + width > len(data) and self.base + len(data) < self.size):
            self._fill(pos, width)
            off, data = 0, self.data
        if pos < end:
            byte = data[off]
            if byte < 0x80:
                return byte, pos + 1
        result = shift = 0
        stop = off + min(end - pos, width)
        i = off
        while i < stop:
            byte = data[i]
            i += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result & mask, pos + i - off
            shift += 7
        if end - pos < width:
            raise self.fail(f"a varint at byte {pos} runs past the end of its message (byte {end})")
        raise self.fail(f"the varint at byte {pos} is longer than {width} bytes")

    def take(self, start: int, end: int) -> bytes:
        """The bytes ``[start, end)``, read from the file when the window does not hold them."""
        off = start - self.base
        if off < 0 or end - self.base > len(self.data):
            self._fill(start, end - start)
            off = 0
        return self.data[off : off + end - start]

    def text(self, start: int, end: int) -> str:
        """A string field; bytes that are not UTF-8 become U+FFFD, as protobuf does not check."""
        return self.take(start, end).decode("utf-8", errors="replace")


def _fields(
    src: _Source, spans: Iterable[_Span], depth: int
) -> Iterator[tuple[int, int, int, int]]:
    """Yield the varint (value ``a``) and length-delimited (bytes ``[a, b)``) fields of one
    message's ``spans``, in protobuf's merge order, as (number, wire, a, b); fixed-width fields
    and groups are checked and skipped."""
    for start, end in spans:
        pos = start
        data, base = src.data, src.base
        while pos < end:
            at = pos
            off = pos - base
            if 0 <= off < len(data) - 1 and pos + 1 < end:
                key = data[off]
                if key < 0x80:
                    pos += 1
                elif data[off + 1] < 0x80:  # fields 16-2047
                    key, pos = (key & 0x7F) | data[off + 1] << 7, pos + 2
                else:
                    key, pos = src.varint(pos, end, 5, 0xFFFFFFFF)
                    data, base = src.data, src.base
            else:
                key, pos = src.varint(pos, end, 5, 0xFFFFFFFF)
                data, base = src.data, src.base
            number, wire = key >> 3, key & 7
            if number == 0:
                raise src.fail(f"the field key {key} at byte {at} has no valid field number")
            if wire in (_VARINT, _LENGTH):
                off = pos - base
                if pos < end and 0 <= off < len(data) and data[off] < 0x80:
                    value, pos = data[off], pos + 1
                else:
                    value, pos = src.varint(pos, end, 10 if wire == _VARINT else 5)
                    data, base = src.data, src.base
                if wire == _VARINT:
                    yield number, wire, value, 0
                else:
                    if value > end - pos:
                        raise src.fail(
                            f"field {number} at byte {at} is {value} bytes long, "
                            f"its message has {end - pos} left"
                        )
                    yield number, wire, pos, pos + value
                    pos += value
                data, base = src.data, src.base  # the caller may have moved the window
            elif wire in (_FIXED64, _FIXED32):
                width = 8 if wire == _FIXED64 else 4
                if width > end - pos:
                    raise src.fail(
                        f"fixed-width field {number} at byte {at} needs {width} bytes, "
                        f"its message has {end - pos} left"
                    )
                pos += width
            elif wire == _START_GROUP:
                pos = _skip_group(src, pos, end, number, depth + 1)
                data, base = src.data, src.base
            elif wire == _END_GROUP:
                raise src.fail(f"an end-group tag (field {number}) at byte {at} closes no group")
            else:
                raise src.fail(f"field {number} at byte {at} has wire type {wire}, expected 0-5")


def _skip_group(src: _Source, pos: int, end: int, number: int, depth: int) -> int:
    """Skip a group's fields up to its end-group tag; return the position after that tag."""
    open_groups = [number]
    while pos < end:
        if depth + len(open_groups) - 1 > _MAX_DEPTH:
            raise src.fail(f"groups nested deeper than {_MAX_DEPTH} levels at byte {pos}")
        at = pos
        key, pos = src.varint(pos, end, 5, 0xFFFFFFFF)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise src.fail(f"the field key {key} at byte {at} has no valid field number")
        if wire == _VARINT:
            _, pos = src.varint(pos, end)
        elif wire == _LENGTH:
            size, pos = src.varint(pos, end, 5)
            pos += size
        elif wire in (_FIXED64, _FIXED32):
            pos += 8 if wire == _FIXED64 else 4
        elif wire == _START_GROUP:
            open_groups.append(field)
        elif wire == _END_GROUP:
            if field != open_groups[-1]:
                raise src.fail(
                    f"the end-group tag at byte {at} closes group {field}, "
                    f"expected group {open_groups[-1]}"
                )
            open_groups.pop()
            if not open_groups:
                return pos
        else:
            raise src.fail(f"field {field} at byte {at} has wire type {wire}, expected 0-5")
        if pos > end:
            raise src.fail(f"field {field} at byte {at} runs past the end of its message")
    raise src.fail(f"group {number} is not closed before byte {end}")


def _int64(value: int) -> int:
    """An int64 field's value from its varint (two's complement in 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _int32(value: int) -> int:
    """An int32 field's value: protobuf keeps the varint's low 32 bits."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _dimension(src: _Source, span: _Span, depth: int) -> int | str | bytes | None:
    """A ``TensorShapeProto.Dimension``: its value or parameter (a oneof: the last one wins);
    a parameter that is not UTF-8 is its bytes."""
    dim: int | str | bytes | None = None
    for number, wire, a, b in _fields(src, (span,), depth):
        if number == 1 and wire == _VARINT:
            dim = _int64(a)
        elif number == 2 and wire == _LENGTH:
            raw = src.take(a, b)
            try:
                dim = raw.decode("utf-8")
            except UnicodeDecodeError:
                dim = raw
    return dim


def _shape(src: _Source, spans: list[_Span], depth: int) -> tuple[int | str | bytes | None, ...]:
    """A ``TensorShapeProto``; merged occurrences concatenate their dims."""
    return tuple(
        _dimension(src, (a, b), depth + 1)
        for number, wire, a, b in _fields(src, spans, depth)
        if number == 1 and wire == _LENGTH
    )


def _type(
    src: _Source, spans: list[_Span], depth: int
) -> tuple[str, int | None, tuple[int | str | bytes | None, ...] | None]:
    """A ``TypeProto``: kind, element type and shape (the last member of its oneof wins)."""
    member = 0
    member_spans: list[_Span] = []
    for number, wire, a, b in _fields(src, spans, depth):
        if number in _KINDS and wire == _LENGTH:
            if number != member:  # switching oneof members clears the previous one
                member, member_spans = number, []
            member_spans.append((a, b))
    if not member:
        return "unknown", None, None
    kind = _KINDS[member]
    if kind not in ("tensor", "sparse_tensor"):
        return kind, None, None
    elem: int | None = None
    shape_spans: list[_Span] = []
    for number, wire, a, b in _fields(src, member_spans, depth + 1):
        if number == 1 and wire == _VARINT:
            elem = _int32(a)
        elif number == 2 and wire == _LENGTH:
            shape_spans.append((a, b))
    shape = _shape(src, shape_spans, depth + 2) if shape_spans else None
    return kind, elem, shape


def _value_info(src: _Source, span: _Span, depth: int) -> TensorInfo:
    """A ``ValueInfoProto``: a graph input or output."""
    name, type_spans = "", []
    for number, wire, a, b in _fields(src, (span,), depth):
        if wire != _LENGTH:
            continue
        if number == 1:
            name = src.text(a, b)
        elif number == 2:
            type_spans.append((a, b))
    kind, elem, dims = _type(src, type_spans, depth + 1)
    if dims is None:
        return TensorInfo(name=name, kind=kind, elem_type=elem, shape=None)
    raw = tuple((i, d) for i, d in enumerate(dims) if isinstance(d, bytes))
    shape = tuple(d.decode("utf-8", errors="replace") if isinstance(d, bytes) else d for d in dims)
    return TensorInfo(name=name, kind=kind, elem_type=elem, shape=shape, non_utf8_dims=raw)


def _times(count: int, dim: int) -> int:
    """``count * dim`` saturated at int64's maximum; a negative dim makes the count -1 (invalid)."""
    if count < 0 or dim < 0:
        return -1
    return min(count * dim, _MAX_COUNT)


def _packed_count(src: _Source, start: int, end: int, count: int) -> int:
    """``count`` times every varint of the packed ``dims`` in ``[start, end)``: a tight loop until
    the count settles, then the rest only searched (a crafted model may pack a million)."""
    payload = src.take(start, end)
    if payload and payload[-1] >= 0x80:
        raise src.fail(f"the packed dims at bytes {start}-{end} end inside a varint")
    if _LONG_VARINT.search(payload):
        raise src.fail(f"the packed dims at bytes {start}-{end} hold a varint over 10 bytes")
    if count in (-1, 0, _MAX_COUNT):
        return _settled(payload, 0, count)
    value = shift = 0
    for index, byte in enumerate(payload):
        if byte >= 0x80:
            value |= (byte & 0x7F) << shift
            shift += 7
            continue
        value = (value | byte << shift) & _MASK64
        count = -1 if value >= 1 << 63 else min(count * value, _MAX_COUNT)
        value = shift = 0
        if count in (-1, 0, _MAX_COUNT):
            return _settled(payload, index + 1, count)
    return count


def _settled(payload: bytes, rest: int, count: int) -> int:
    """A settled count after the packed dims from ``rest`` on: only a negative or zero dim moves it."""
    negative, zero = _settling_varints()
    if count != -1 and negative.search(payload, rest):
        return -1
    if count == _MAX_COUNT and zero.search(payload, rest):
        return 0
    return count


def _tensor(src: _Source, spans: list[_Span], depth: int) -> tuple[str, int, int]:
    """A ``TensorProto``'s (name, element type, element count); a negative dim counts 0."""
    name, elem, count = "", 0, 1
    for number, wire, a, b in _fields(src, spans, depth):
        if number == 1 and wire == _VARINT:
            count = _times(count, _int64(a))
        elif number == 1 and wire == _LENGTH:  # packed dims
            count = _packed_count(src, a, b, count)
        elif number == 2 and wire == _VARINT:
            elem = _int32(a)
        elif number == 8 and wire == _LENGTH:
            name = src.text(a, b)
    return name, elem, max(count, 0)


def _sparse_tensor(src: _Source, span: _Span, depth: int) -> tuple[str, int, int]:
    """A ``SparseTensorProto``'s values tensor (merged across occurrences): name, type, count."""
    values = [(a, b) for n, w, a, b in _fields(src, (span,), depth) if n == 1 and w == _LENGTH]
    return _tensor(src, values, depth + 1)


def _node_op(src: _Source, span: _Span, depth: int, files: set[ExternalData]) -> str:
    """A ``NodeProto``'s op type (the last one wins); its attributes' external files go to ``files``."""
    op = ""
    for number, wire, a, b in _fields(src, (span,), depth):
        if number == 4 and wire == _LENGTH:
            op = src.text(a, b)
        elif number == 5 and wire == _LENGTH:
            _attribute_files(src, (a, b), depth + 1, files)
    return op


def _tensor_files(src: _Source, span: _Span, depth: int, files: set[ExternalData]) -> None:
    """A ``TensorProto``'s external data (field 13 entries), when its ``data_location`` is
    external: ONNX Runtime ignores the entries of any other tensor."""
    entries: dict[str, str] = {}
    location = 0
    for number, wire, a, b in _fields(src, (span,), depth):
        if number == 13 and wire == _LENGTH:
            key, value = _entry(src, (a, b), depth + 1)
            entries[key] = value  # the last entry of a key wins
        elif number == 14 and wire == _VARINT:
            location = _int32(a)
    if location != _EXTERNAL or "location" not in entries:
        return
    _, elem, count = _tensor(src, [span], depth)
    if elem in _ELEMENT_BYTES:
        size: int | None = count * _ELEMENT_BYTES[elem]
    else:
        per_byte = _ELEMENTS_PER_BYTE.get(elem)
        size = None if per_byte is None else -(-count // per_byte)
    offset, length = (_number(entries.get(key, "")) for key in ("offset", "length"))
    files.add(ExternalData(entries["location"], offset, length, size))


def _number(value: str) -> int:
    """An ``offset`` or ``length`` entry: 0 when empty (not given), -1 when not a number."""
    if not value:
        return 0
    return int(value) if _NUMBER.fullmatch(value) else -1


def _sparse_files(src: _Source, span: _Span, depth: int, files: set[ExternalData]) -> None:
    """A ``SparseTensorProto``'s values and indices tensors' external files."""
    for number, wire, a, b in _fields(src, (span,), depth):
        if number in (1, 2) and wire == _LENGTH:
            _tensor_files(src, (a, b), depth + 1, files)


def _attribute_files(src: _Source, span: _Span, depth: int, files: set[ExternalData]) -> None:
    """An ``AttributeProto``'s tensors (t, tensors, sparse ones) and subgraphs (g, graphs)."""
    for number, wire, a, b in _fields(src, (span,), depth):
        if wire != _LENGTH:
            continue
        if number in (5, 10):
            _tensor_files(src, (a, b), depth + 1, files)
        elif number in (22, 23):
            _sparse_files(src, (a, b), depth + 1, files)
        elif number in (6, 11):
            _graph_files(src, (a, b), depth + 1, files)


def _graph_files(src: _Source, span: _Span, depth: int, files: set[ExternalData]) -> None:
    """A subgraph's initializers and nodes, for the external files they name."""
    if depth > _MAX_DEPTH:
        raise src.fail(f"subgraphs nested deeper than {_MAX_DEPTH} levels at byte {span[0]}")
    for number, wire, a, b in _fields(src, (span,), depth):
        if wire != _LENGTH:
            continue
        if number == 1:
            _node_op(src, (a, b), depth + 1, files)
        elif number == 5:
            _tensor_files(src, (a, b), depth + 1, files)
        elif number == 15:
            _sparse_files(src, (a, b), depth + 1, files)


def _dims(src: _Source, span: _Span, depth: int) -> tuple[str, tuple[int, ...]]:
    """A ``TensorProto``'s name and dims (a negative dim as given)."""
    name, dims = "", []
    for number, wire, a, b in _fields(src, (span,), depth):
        if number == 1 and wire == _VARINT:
            dims.append(_int64(a))
        elif number == 8 and wire == _LENGTH:
            name = src.text(a, b)
    return name, tuple(dims)


def _gather(src: _Source, span: _Span, depth: int) -> tuple[str, str, int] | None:
    """A default-domain ``Gather`` node's (data, indices, axis), or ``None`` for any other node."""
    op, domain, names, axis = "", "", [], 0
    for number, wire, a, b in _fields(src, (span,), depth):
        if wire != _LENGTH:
            continue
        if number == 1:
            names.append(src.text(a, b))
        elif number == 4:
            op = src.text(a, b)
        elif number == 7:
            domain = src.text(a, b)
        elif number == 5:
            attribute = {n: (w, x, y) for n, w, x, y in _fields(src, ((a, b),), depth + 1)}
            named, value = attribute.get(1), attribute.get(3)
            if named and value and src.text(named[1], named[2]) == "axis" and value[0] == _VARINT:
                axis = _int64(value[1])
    if op != "Gather" or domain not in ("", "ai.onnx") or len(names) < 2:
        return None
    return names[0], names[1], axis


def _index_bounds(
    gathers: list[tuple[str, str, int]], tables: dict[str, tuple[int, ...]], inputs: set[str]
) -> tuple[tuple[str, int], ...]:
    bounds: dict[str, int] = {}
    for data, indices, axis in gathers:
        dims = tables.get(data)
        if indices in inputs and dims and -len(dims) <= axis < len(dims) and dims[axis] > 0:
            size = dims[axis]
            bounds[indices] = min(bounds.get(indices, size), size)
    return tuple(sorted(bounds.items()))


def _opset(src: _Source, span: _Span, depth: int) -> tuple[str, int]:
    """An ``OperatorSetIdProto``: (domain, version)."""
    domain, version = "", 0
    for number, wire, a, b in _fields(src, (span,), depth):
        if number == 1 and wire == _LENGTH:
            domain = src.text(a, b)
        elif number == 2 and wire == _VARINT:
            version = _int64(a)
    return domain, version


def _entry(src: _Source, span: _Span, depth: int) -> tuple[str, str]:
    """A ``StringStringEntryProto``: (key, value)."""
    entry = ["", ""]
    for number, wire, a, b in _fields(src, (span,), depth):
        if number in (1, 2) and wire == _LENGTH:
            entry[number - 1] = src.text(a, b)
    return entry[0], entry[1]


def _summarize(src: _Source) -> ModelSummary:
    """Parse the ``ModelProto`` in ``src``."""
    if src.size == 0:
        raise src.fail("it is empty (0 bytes)")
    if src.size > MAX_MODEL_BYTES:
        raise src.fail(
            f"it is {src.size} bytes, protobuf reads at most {MAX_MODEL_BYTES}; "
            "store the weights as external data"
        )
    has_ir_version, producer = False, ""
    graph: list[_Span] = []
    opsets: list[tuple[str, int]] = []
    props: list[tuple[str, str]] = []
    for number, wire, a, b in _fields(src, ((0, src.size),), 0):
        if number == 1 and wire == _VARINT:
            has_ir_version = True
        elif wire != _LENGTH:
            continue
        elif number == 2:
            producer = src.text(a, b)
        elif number == 7:
            graph.append((a, b))
        elif number == 8:
            opsets.append(_opset(src, (a, b), 1))
        elif number == 14:
            props.append(_entry(src, (a, b), 1))
    if not has_ir_version:
        raise src.fail("it has no ir_version (field 1), which ONNX Runtime requires")
    if not graph:
        raise src.fail("it has no graph (field 7)")

    graph_name = ""
    inputs: list[TensorInfo] = []
    outputs: list[TensorInfo] = []
    init_names: set[str] = set()
    init_sizes: list[tuple[int, int]] = []
    ops: set[str] = set()
    files: set[ExternalData] = set()
    gathers: list[tuple[str, str, int]] = []
    tables: dict[str, tuple[int, ...]] = {}
    for number, wire, a, b in _fields(src, graph, 1):
        if wire != _LENGTH:
            continue
        if number == 1:
            op = _node_op(src, (a, b), 2, files)
            ops.add(op)
            if op == "Gather" and (gather := _gather(src, (a, b), 2)) is not None:
                gathers.append(gather)
        elif number == 2:
            graph_name = src.text(a, b)
        elif number in (5, 15):
            if number == 5:
                name, elem, count = _tensor(src, [(a, b)], 2)
                _tensor_files(src, (a, b), 2, files)
                tables.setdefault(*_dims(src, (a, b), 2))
            else:
                name, elem, count = _sparse_tensor(src, (a, b), 2)
                _sparse_files(src, (a, b), 2, files)
            init_names.add(name)
            init_sizes.append((elem, count))
        elif number == 11:
            inputs.append(_value_info(src, (a, b), 2))
        elif number == 12:
            outputs.append(_value_info(src, (a, b), 2))
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
        label=src.label,
        external_data=frozenset(files),
        index_bounds=_index_bounds(gathers, tables, {i.name for i in inputs} - init_names),
    )


def summarize_model(
    data: bytes | bytearray | memoryview, *, label: str = "<bytes>"
) -> ModelSummary:
    """Read a serialized ``ModelProto``; a :class:`WireFormatError` naming ``label`` if it is not
    one. A buffer other than ``bytes`` is copied a window at a time, never left exported."""
    if isinstance(data, bytes):
        return _summarize(_Source(label, len(data), data, None))
    with memoryview(data) as view:
        flat = view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
        with flat:

            def read(pos: int, size: int) -> bytes:
                return flat[pos : pos + size].tobytes()

            return _summarize(_Source(label, flat.nbytes, b"", read))


def _stamp(stat: os.stat_result) -> tuple[int, int, int]:
    """What changes when a file is rewritten: its size and modification times."""
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def summarize_file(path: str | os.PathLike[str]) -> ModelSummary:
    """Read a model file with ordinary reads (never mapped); every error names the file, and one
    that changes while it is read is a :class:`CheckpointError` saying so."""
    label = os.fspath(path)
    try:
        handle = open(label, "rb", buffering=0)  # noqa: SIM115 - closed below
    except FileNotFoundError as exc:
        raise MissingFileError(f"ONNX model not found: {label}") from exc
    except OSError as exc:
        raise CheckpointError(f"{label}: cannot open the model: {exc}") from exc
    with handle:
        try:
            before = _stamp(os.fstat(handle.fileno()))

            def read(pos: int, size: int) -> bytes:
                handle.seek(pos)
                chunks, got = [], 0
                while got < size:
                    chunk = handle.read(size - got)
                    if not chunk:
                        raise _changed(label, f"bytes {pos + got}-{pos + size} are gone")
                    chunks.append(chunk)
                    got += len(chunk)
                return b"".join(chunks)

            source = _Source(label, before[0], b"", read)
            try:
                summary = _summarize(source)
            except WireFormatError:
                _require_unchanged(handle.fileno(), before, label)
                raise
            _require_unchanged(handle.fileno(), before, label)
            return summary
        except OSError as exc:
            raise CheckpointError(f"{label}: cannot read the model: {exc}") from exc


def _changed(label: str, detail: str) -> CheckpointError:
    """The error for a file that moved under the reader, naming it."""
    return CheckpointError(
        f"{label} changed while it was being read ({detail}); read it again once it is written"
    )


def _require_unchanged(fd: int, before: tuple[int, int, int], label: str) -> None:
    """Raise when the open file's size or times moved since ``before``."""
    after = _stamp(os.fstat(fd))
    if after != before:
        raise _changed(
            label, f"size {before[0]} -> {after[0]} bytes, mtime {before[1]} -> {after[1]} ns"
        )
