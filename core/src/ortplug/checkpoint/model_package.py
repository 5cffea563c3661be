"""ONNX Runtime's model-package layout, read as a checkpoint with variants (the layout and what is
read of it: docs/internals.md)."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

import attrs

from ..errors import CheckpointError, MissingFileError, OptionError, VerificationWarning
from ..log import user_stacklevel
from .metadata import CheckpointMetadata
from .variants import MAX_VARIANTS, PRECISIONS, Variant

__all__ = ["MANIFEST", "PackageContents", "is_model_package", "read_model_package"]

MANIFEST = "manifest.json"
_COMPONENT = "metadata.json"
_DESCRIPTOR = "variant.json"
_CPU_EP = "CPUExecutionProvider"
_MAX_JSON_BYTES = 1 << 20


@attrs.frozen
class PackageContents:
    """What a package holds: the reference weights and the other variants (files relative to it)."""

    reference: Path
    variants: tuple[Variant, ...]


def is_model_package(path: Path) -> bool:
    """Whether ``path`` is a folder in ONNX Runtime's model-package layout (or one component)."""
    return path.is_dir() and ((path / MANIFEST).is_file() or (path / _COMPONENT).is_file())


def _json(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > _MAX_JSON_BYTES:
            raise OptionError(f"larger than {_MAX_JSON_BYTES} bytes")
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        raise CheckpointError(f"{path}: cannot read the model package file ({exc})") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _segment(value: object, what: str, where: Path) -> str:
    """A file or folder name inside the package: relative, without '..'."""
    if not isinstance(value, str) or not value:
        raise CheckpointError(f"{where}: {what}: expected a non-empty string, got {value!r}")
    path = PurePath(value)
    if path.is_absolute() or ".." in path.parts:
        raise CheckpointError(f"{where}: {what} {value!r} leaves the package (absolute or '..')")
    return value


def _component_root(root: Path) -> Path:
    """The one component's folder: ``root`` itself, the manifest's, or the one found under models/."""
    if (root / _COMPONENT).is_file():
        return root
    manifest_path = root / MANIFEST
    manifest = _json(manifest_path)
    version = manifest.get("schema_version")
    if version != 1 or isinstance(version, bool):
        raise CheckpointError(f"{manifest_path}: schema_version: expected 1, got {version!r}")
    listed = manifest.get("components")
    if listed is None:
        names = sorted(p.parent.name for p in (root / "models").glob(f"*/{_COMPONENT}"))
    elif isinstance(listed, list):
        names = [_segment(name, "components entry", manifest_path) for name in listed]
    else:
        raise CheckpointError(f"{manifest_path}: components: expected a list, got {listed!r}")
    if len(names) != 1:
        raise CheckpointError(
            f"{root}: expected exactly one component model (as ONNX Runtime loads), got "
            f"{names or 'none'}; point ortplug at one component's folder (models/NAME)"
        )
    component = root / "models" / names[0]
    if not (component / _COMPONENT).is_file():
        raise CheckpointError(f"{component}: component {names[0]!r} has no {_COMPONENT}")
    return component


def _ep(name: str, entry: Mapping[str, Any], where: Path) -> str | None:
    """The execution provider a variant entry is made for (``None``: any)."""
    compatibility = entry.get("ep_compatibility")
    if compatibility is not None:
        if not isinstance(compatibility, list) or len(compatibility) != 1:
            raise CheckpointError(
                f"{where}: variant {name!r}: ortplug reads one ep_compatibility entry per "
                f"variant, got {compatibility!r}"
            )
        entry = compatibility[0] if isinstance(compatibility[0], Mapping) else {}
    ep = entry.get("ep")
    if ep is not None and (not isinstance(ep, str) or not ep):
        raise CheckpointError(f"{where}: variant {name!r}: ep: expected a string, got {ep!r}")
    return ep


def _single_onnx(folder: Path, variant: str) -> Path:
    found = sorted(p for p in folder.glob("*") if p.is_file() and p.suffix.lower() == ".onnx")
    if len(found) != 1:
        raise CheckpointError(
            f"{folder}: variant {variant!r}: expected one .onnx file (or a variant.json naming it), "
            f"found {[p.name for p in found] or 'none'}"
        )
    return found[0]


def _variant_file(folder: Path, name: str) -> tuple[Path, Mapping[str, Any]]:
    """The variant's model file and its ``consumer_metadata.ortplug`` (empty when absent)."""
    descriptor_path = folder / _DESCRIPTOR
    if not descriptor_path.is_file():
        return _single_onnx(folder, name), {}
    descriptor = _json(descriptor_path)
    filename = descriptor.get("filename")
    files = descriptor.get("files")
    if filename is None and isinstance(files, list) and len(files) == 1:
        filename = files[0].get("filename") if isinstance(files[0], Mapping) else None
    target = folder / _segment(filename, "filename", descriptor_path)
    if target.is_dir():
        target = _single_onnx(target, name)
    elif not target.is_file():
        raise CheckpointError(f"{descriptor_path}: variant {name!r}: file not found: {target}")
    consumer = descriptor.get("consumer_metadata")
    ours = consumer.get("ortplug") if isinstance(consumer, Mapping) else None
    return target, ours if isinstance(ours, Mapping) else {}


def _rank(variant: Variant) -> int:
    return PRECISIONS.index(variant.precision)


def read_model_package(root: Path) -> PackageContents:
    """The package's reference weights and its other variants; every defect names its file."""
    component = _component_root(root)
    metadata_path = component / _COMPONENT
    entries = _json(metadata_path).get("variants")
    if not isinstance(entries, Mapping) or not entries:
        raise CheckpointError(f"{metadata_path}: variants: expected a non-empty object")
    if len(entries) > MAX_VARIANTS:
        raise CheckpointError(
            f"{metadata_path}: variants: expected at most {MAX_VARIANTS} variants, "
            f"got {len(entries)}"
        )
    found: list[tuple[Path, Variant]] = []
    for name, entry in entries.items():
        folder = component / _segment(name, "variant name", metadata_path)
        if not isinstance(entry, Mapping):
            raise CheckpointError(f"{metadata_path}: variant {name!r}: expected an object")
        ep = _ep(name, entry, metadata_path)
        try:
            path, ours = _variant_file(folder, name)
            precision = ours.get("precision") or CheckpointMetadata.from_model(path).precision
            variant = Variant(
                name=name,
                file=str(path),
                precision=precision,
                tolerance=ours.get("tolerance"),
                ep=ep,
            )
        except (OptionError, MissingFileError) as exc:
            problem = CheckpointError(f"{metadata_path}: variant {name!r}: {exc}")
            if ep in (None, _CPU_EP):
                raise problem from exc  # it may be the reference: nothing is verified without it
            warnings.warn(
                f"{problem}; it is left out (ONNX Runtime's other variants serve)",
                VerificationWarning,
                stacklevel=user_stacklevel(),  # the caller of LocalCheckpoint.resolve
            )
            continue
        found.append((path, variant))
    on_cpu = [(p, v) for p, v in found if v.runs_on(_CPU_EP)]
    if not on_cpu:
        made_for = ", ".join(f"{v.name} [{v.ep}]" for _, v in found)
        raise CheckpointError(
            f"{root}: no variant the CPU provider runs (variants: {made_for}); ortplug verifies "
            "against the CPU provider, so a package needs one as the reference"
        )
    reference, chosen = min(on_cpu, key=lambda pair: _rank(pair[1]))
    others = tuple(
        attrs.evolve(v, file=os.path.relpath(p, reference.parent))
        for p, v in found
        if v is not chosen
    )
    return PackageContents(reference=reference, variants=others)
