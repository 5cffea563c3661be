"""Where checkpoints come from: a local ``.onnx`` file (with optional metadata beside it) or bytes."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..errors import (
    CheckpointError,
    MissingFileError,
    OptionError,
    OptionTypeError,
    OrtplugError,
)
from ._fingerprints import file_fingerprint, file_version, settled_version
from .metadata import CheckpointMetadata, require_utf8_dimensions
from .onnx_wire import ExternalData, ModelSummary, summarize_file, summarize_model
from .variants import Variant

if TYPE_CHECKING:
    from .model_package import PackageContents

__all__ = [
    "InMemoryCheckpoint",
    "LocalCheckpoint",
    "ResolvedCheckpoint",
    "metadata_path_for",
    "select_variant",
]


def _external_files(value: Mapping[str, bytes]) -> Mapping[str, bytes]:
    if not isinstance(value, Mapping):
        raise OptionTypeError(
            f"external_data: expected a mapping of file names to bytes, got {type(value).__name__}"
        )
    bad = [name for name, data in value.items() if not isinstance(data, (bytes, bytearray))]
    if bad:
        raise OptionError(f"external_data: expected bytes for every file, not for {bad}")
    return MappingProxyType(dict(value))


def _initializer_arrays(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """Contiguous arrays the checkpoint owns: ONNX Runtime reads them in place for the session's life."""
    if not isinstance(value, Mapping):
        raise OptionTypeError(
            f"expected a mapping of initializer names to arrays, got {type(value).__name__}"
        )
    return MappingProxyType({name: np.ascontiguousarray(array) for name, array in value.items()})


def _exactly_one_source(instance: ResolvedCheckpoint, _: object, __: Path | None) -> None:
    if (instance.weights_path is None) == (instance.model_bytes is None):
        raise OptionError(
            "ResolvedCheckpoint: expected exactly one of weights_path or model_bytes, "
            f"got weights_path={instance.weights_path!r} and "
            f"{'model_bytes' if instance.model_bytes is not None else 'no model_bytes'}"
        )


@attrs.frozen
class ResolvedCheckpoint:
    """Weights ready to load (a path, or the model's bytes) with their metadata."""

    weights_path: Path | None = attrs.field(
        converter=attrs.converters.optional(Path), validator=_exactly_one_source
    )
    metadata: CheckpointMetadata = attrs.field(
        validator=attrs.validators.instance_of(CheckpointMetadata)
    )
    model_bytes: bytes | None = attrs.field(default=None, repr=False, kw_only=True)
    #: Initializer values held in memory, by initializer name (``add_external_initializers``).
    initializers: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_initializer_arrays, repr=False, eq=False, kw_only=True
    )
    #: The model's external-data files held in memory, by the file name the model refers to.
    external_data: Mapping[str, bytes] = attrs.field(
        factory=dict, converter=_external_files, repr=False, eq=False, kw_only=True
    )
    #: The variant's name when these weights are a variant of ``reference`` (see :func:`select_variant`).
    variant: str | None = attrs.field(default=None, kw_only=True)
    #: The checkpoint whose reference weights this variant is verified against (``None``: itself).
    reference: ResolvedCheckpoint | None = attrs.field(
        default=None, repr=False, eq=False, kw_only=True
    )
    # What is costly to derive (the fingerprint, the parsed graph), computed once per checkpoint.
    _memo: dict[str, Any] = attrs.field(factory=dict, init=False, repr=False, eq=False)

    @property
    def source(self) -> str | bytes:
        """What ONNX Runtime loads: the path as a string, or the bytes."""
        return self.model_bytes if self.model_bytes is not None else str(self.weights_path)

    @property
    def label(self) -> str:
        """A short human name for messages."""
        return str(self.weights_path) if self.weights_path else "<model bytes>"

    def fingerprint(self) -> str:
        """SHA-256 of the model's bytes and of the external-data ranges ONNX Runtime reads: the
        part of every cache key that says "same weights"; hashed once per file version."""
        return str(self._remember("fingerprint", self._hash, self._external_versions()))

    def _external_files(self) -> list[tuple[str, Path]]:
        """The external-data files ONNX Runtime loads with the model file, by the name it gives;
        one it would refuse is refused here, before any of it is read or hashed."""
        if self.weights_path is None:
            return []  # model bytes: their external data is ``external_data``, hashed as given
        summary: ModelSummary = self._remember("summary", self._summarize)
        weights = self.weights_path
        return [(name, _external_path(weights, name)) for name in sorted(summary.external_files)]

    def _external_versions(self) -> object:
        return [(name, _file_version(path)) for name, path in self._external_files()]

    def file_versions(self) -> tuple[object, ...]:
        """The version (device, inode, size, modification and change times) of the model file
        and of every external-data file it names, as they are now; empty for model bytes (a
        session built from them loads the bytes that are hashed)."""
        if self.weights_path is None:
            return ()
        model = _version_now(self.weights_path)
        known = self._memo.get("summary")  # any version's (no parse): the model's version is here
        try:
            summary = known[1] if known is not None else self._remember("summary", self._summarize)
        except (OrtplugError, OSError) as exc:  # not a model now: its version says it changed
            return (model, f"unreadable: {exc}")
        folder = self.weights_path.parent
        files = sorted(summary.external_files)
        return (model, *((name, _version_now(folder / name)) for name in files))

    def note_build(self) -> None:
        """Note the files' versions as a session is about to load them (every build calls it):
        see :meth:`built_from_current_files`."""
        versions = self.file_versions()
        with _builds_lock:
            seen = self._memo.get("built_from", versions)
            self._memo["built_from"] = versions if seen == versions else _VERSIONS_DIFFERED

    def built_from_current_files(self) -> bool:
        """Whether every session built from this checkpoint loaded the files as they are now, so
        that what was measured on them belongs to :meth:`fingerprint` (``False`` when none was
        built, or a file was replaced or written since)."""
        built_from = self._memo.get("built_from")
        return built_from not in (None, _VERSIONS_DIFFERED) and built_from == self.file_versions()

    def _hash(self) -> str:
        source = self.source
        model = (
            hashlib.sha256(source).hexdigest()
            if isinstance(source, bytes)
            else file_fingerprint(Path(source))
        )
        files = self._external_files()
        if not self.initializers and not self.external_data and not files:
            return model
        digest = hashlib.sha256(model.encode())
        tensors: dict[str, list[ExternalData]] = {}
        for data in self._remember("summary", self._summarize).external_data:
            tensors.setdefault(data.location, []).append(data)
        for name, path in files:
            digest.update(f"file:{name}:{_content(path, tensors[name])}".encode())
        for name, array in sorted(self.initializers.items()):
            digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
            digest.update(array.tobytes())
        for name, data in sorted(self.external_data.items()):
            digest.update(f"{name}:{len(data)}".encode())
            digest.update(data)
        return digest.hexdigest()

    def input_shapes(self) -> dict[str, tuple[int | str | None, ...] | None]:
        """Each fed input's shape as the graph declares it (ints, symbolic names, ``None``)."""
        summary: ModelSummary = self._remember("summary", self._summarize)
        return {info.name: info.shape for info in summary.feed_inputs}

    def index_bounds(self) -> dict[str, int]:
        """Inputs that index a table of the graph, each with the table's size (ids 0..size-1)."""
        summary: ModelSummary = self._remember("summary", self._summarize)
        return dict(summary.index_bounds)

    def _summarize(self) -> ModelSummary:
        source = self.source
        if isinstance(source, bytes):
            return summarize_model(source, label=self.label)
        return summarize_file(source)

    def _version(self) -> object:
        """What identifies the weights' content: the bytes object, or the file's settled version
        (a file written just now has none: what is derived from it is computed again)."""
        if self.weights_path is None:
            return id(self.model_bytes)
        return settled_version(self.weights_path) or object()

    def _remember(self, key: str, compute: Callable[[], Any], also: object = None) -> Any:
        """``compute()`` once per version of the weights (and of ``also``: a rewritten file is read again)."""
        version = (self._version(), also)
        known = self._memo.get(key)
        if known is None or known[0] != version:
            known = self._memo[key] = (version, compute())
        return known[1]


def _external_path(model: Path, location: str) -> Path:
    """Where ONNX Runtime reads the external data ``location`` of ``model`` from: a relative path
    staying in the real model file's folder; anything else is a
    :class:`~ortplug.errors.CheckpointError` before a byte is read, as ORT refuses it."""
    allowed = Path(os.path.realpath(model)).parent
    if os.path.isabs(location):
        raise CheckpointError(
            f"{model}: external data location {location!r}: expected a path relative to the "
            f"model's folder {allowed}, got an absolute path (ONNX Runtime refuses it too)"
        )
    path = model.parent / location
    try:
        resolved = Path(os.path.realpath(path))
    except ValueError as exc:  # a NUL byte: no file has that name
        raise CheckpointError(
            f"{model}: external data location {location!r}: not a file name ({exc})"
        ) from None
    if not resolved.is_relative_to(allowed):
        raise CheckpointError(
            f"{model}: external data location {location!r}: expected a file in the model's "
            f"folder {allowed}, got {resolved} (ONNX Runtime refuses it too)"
        )
    return path


#: What :meth:`ResolvedCheckpoint.note_build` keeps when two builds loaded other file versions.
_VERSIONS_DIFFERED = "differed between builds"
_builds_lock = threading.Lock()


def _version_now(path: Path) -> object:
    """The file's version now (even one written just now), or why it has none."""
    try:
        return file_version(path)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def _file_version(path: Path) -> object:
    """What changes when a file is rewritten (its settled version; a file written just now has
    none, so what is derived from it is computed again)."""
    try:
        return settled_version(path) or object()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def _content(path: Path, tensors: list[ExternalData]) -> str:
    """The fingerprint of the bytes ONNX Runtime reads from an external-data file for
    ``tensors`` (a 64 GB file of which a model uses 16 bytes is read for those 16; a range it
    refuses is not read), or what the file is when it is not a regular file. A tensor whose
    type this reader cannot size counts by the file's version: any change to the file is one."""
    try:
        if not path.is_file():
            return "absent" if not os.path.lexists(path) else "not a regular file"
        size = path.stat().st_size
        spans = tuple(span for data in tensors if (span := data.span(size)) is not None)
        digest = file_fingerprint(path, spans)
        return f"{digest} {file_version(path)}" if any(d.size is None for d in tensors) else digest
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def metadata_path_for(weights_path: Path) -> Path:
    """The default metadata file of a checkpoint: ``<stem>.metadata.json`` beside the weights."""
    return weights_path.with_name(weights_path.stem + ".metadata.json")


@attrs.frozen
class LocalCheckpoint:
    """An ONNX file on disk, or a folder in ONNX Runtime's model-package layout; ``resolve`` reads
    its metadata file or infers metadata from the graph."""

    path: Path = attrs.field(converter=Path)
    metadata_path: Path | None = attrs.field(
        default=None, converter=attrs.converters.optional(Path)
    )

    def resolve(self) -> ResolvedCheckpoint:
        """Check the files and return weights plus metadata (validated against the graph)."""
        package = None
        if self.path.is_dir():  # a model package is a folder: its reader is imported for one
            from .model_package import is_model_package, read_model_package

            package = read_model_package(self.path) if is_model_package(self.path) else None
        path = self.path if package is None else package.reference
        if not path.is_file():
            raise MissingFileError(f"ONNX model not found: {path}")
        summary = summarize_file(path)
        meta_path = self.metadata_path
        if meta_path is not None and not meta_path.is_file():
            raise MissingFileError(f"checkpoint metadata file not found: {meta_path}")
        meta_path = meta_path or metadata_path_for(path)
        if meta_path.is_file():
            metadata = _load_metadata_file(meta_path)
            _require_fits(metadata, summary, origin=str(meta_path))
        else:
            metadata = CheckpointMetadata.from_summary(summary, name=path.stem)
        if package is not None:
            metadata = _with_package_variants(metadata, package, self.path)
        # A variant's file is read when it is chosen (select_variant): one that is missing or
        # broken costs that choice only, and the policy takes the next.
        return _with_summary(ResolvedCheckpoint(path, metadata), summary)


def _with_package_variants(
    metadata: CheckpointMetadata, package: PackageContents, root: Path
) -> CheckpointMetadata:
    """The reference's metadata with the package's variants (a metadata file may not list others)."""
    if metadata.variants:
        raise CheckpointError(
            f"{root}: variants are listed twice, in the model package and in the reference's "
            f"metadata file ({[v.name for v in metadata.variants]}); keep one list"
        )
    return attrs.evolve(metadata, variants=package.variants)


def _require_regular_file(path: Path, what: str) -> None:
    """``path`` is a regular file; else an error saying what it is (absent, a folder, a device)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise MissingFileError(f"{what}: file not found: {path}") from None
    except OSError as exc:
        raise CheckpointError(f"{what}: {path} cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise CheckpointError(f"{what}: {path} is a folder, expected an .onnx file")
    if not stat.S_ISREG(mode):
        raise CheckpointError(
            f"{what}: {path} is not a regular file (a device, FIFO or socket), "
            "expected an .onnx file"
        )


def _variant_path(weights: Path | None, variant: Variant) -> Path:
    """A variant's file: absolute as given, else relative to the reference weights' folder."""
    path = Path(variant.file)
    if path.is_absolute():
        return path
    if weights is None:
        raise CheckpointError(
            f"variant {variant.name!r}: file {variant.file!r} is relative, but the checkpoint is "
            "model bytes without a folder; give an absolute path"
        )
    return weights.parent / path


def select_variant(checkpoint: ResolvedCheckpoint, name: str) -> ResolvedCheckpoint:
    """The weights of ``checkpoint``'s variant ``name``, as a checkpoint verified against it: the
    reference's metadata at the variant's precision; inputs and outputs must be the reference's."""
    variant = next((v for v in checkpoint.metadata.variants if v.name == name), None)
    if variant is None:
        names = [v.name for v in checkpoint.metadata.variants]
        raise OptionError(
            f"variant: expected one of the variants of {checkpoint.label} "
            f"({', '.join(names) or 'it has none'}), got {name!r}"
        )
    path = _variant_path(checkpoint.weights_path, variant)
    _require_regular_file(path, f"variant {name!r} of {checkpoint.label}")
    summary = summarize_file(path)
    metadata = attrs.evolve(checkpoint.metadata, precision=variant.precision, variants=())
    _require_fits(metadata, summary, origin=f"variant {name!r} ({path})")
    resolved = ResolvedCheckpoint(path, metadata, variant=name, reference=checkpoint)
    return _with_summary(resolved, summary)


@attrs.frozen
class InMemoryCheckpoint:
    """A model held as bytes; ``initializers`` replaces named initializers with arrays and
    ``external_data`` gives its external-data files (``{"weights.bin": data}``), nothing on disk."""

    model_bytes: bytes = attrs.field(repr=False, validator=attrs.validators.instance_of(bytes))
    metadata: CheckpointMetadata | None = None
    initializers: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_initializer_arrays, repr=False, eq=False, kw_only=True
    )
    external_data: Mapping[str, bytes] = attrs.field(
        factory=dict, converter=_external_files, repr=False, eq=False, kw_only=True
    )

    def resolve(self) -> ResolvedCheckpoint:
        """Validate the bytes and return them with given or inferred metadata."""
        summary = summarize_model(self.model_bytes, label="<model bytes>")
        metadata = self.metadata
        if metadata is None:
            metadata = CheckpointMetadata.from_summary(summary)
        else:
            _require_fits(metadata, summary, origin="metadata")
        unknown = sorted(set(self.initializers) - summary.initializer_names)
        if unknown:
            raise OptionError(
                f"initializers: {unknown} are not initializers of the model; it has "
                f"{sorted(summary.initializer_names)}"
            )
        resolved = ResolvedCheckpoint(
            None,
            metadata,
            model_bytes=self.model_bytes,
            initializers=self.initializers,
            external_data=self.external_data,
        )
        return _with_summary(resolved, summary)


def _with_summary(checkpoint: ResolvedCheckpoint, summary: ModelSummary) -> ResolvedCheckpoint:
    """Keep the graph summary ``resolve`` already read, so nothing parses the model again."""
    checkpoint._memo["summary"] = ((checkpoint._version(), None), summary)  # as _remember keys it
    return checkpoint


def _load_metadata_file(path: Path) -> CheckpointMetadata:
    """Parse ``<stem>.metadata.json``; any defect, deep nesting included, names the file."""
    try:
        return CheckpointMetadata.from_json(path.read_bytes())
    except RecursionError:
        raise CheckpointError(
            f"{path}: checkpoint metadata is nested too deeply to parse "
            "(expected a flat JSON object as written by CheckpointMetadata.to_json)"
        ) from None
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from exc


def _require_fits(metadata: CheckpointMetadata, summary: ModelSummary, origin: str) -> None:
    require_utf8_dimensions(summary)
    inputs = [i.name for i in summary.inputs]
    metadata.require_names_in(inputs, [o.name for o in summary.outputs], origin=origin)
