"""The model in a form that pickles: what travels from the driver to every Ray worker.

Sessions cannot be pickled, so a :class:`PortableCheckpoint` carries the weights (a path every
worker can read, or the model's bytes), the metadata the driver resolved, in-memory
initializers and external data, and the name of the precision variant that serves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

import attrs
import numpy as np
from ortplug.checkpoint import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    LocalCheckpoint,
    ResolvedCheckpoint,
    select_variant,
)
from ortplug.errors import MissingFileError, OptionTypeError

from ._placement import placement

__all__ = ["CheckpointLike", "PortableCheckpoint"]


def _plain(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value or {})  # plain dicts: the config must pickle with the standard pickle too


@attrs.frozen
class PortableCheckpoint:
    """A checkpoint in a form that pickles, resolved again on each worker.

    ``source`` is a path every worker can read or the model's bytes;
    ``metadata`` is the metadata the driver resolved (a separate metadata file
    and ``extra`` included) as a dict; ``initializers`` and ``external_data``
    are the in-memory arrays and files of an ``InMemoryCheckpoint``; ``variant``
    the precision variant of these weights that serves (``None``: these weights).
    """

    source: str | bytes = attrs.field(repr=lambda s: s if isinstance(s, str) else "<model bytes>")
    metadata: dict[str, Any] = attrs.field(converter=_plain, hash=False)
    initializers: dict[str, np.ndarray] = attrs.field(
        factory=dict, converter=_plain, eq=False, repr=False
    )
    external_data: dict[str, bytes] = attrs.field(
        factory=dict, converter=_plain, eq=False, repr=False
    )
    #: The precision variant of these (reference) weights that serves, by name: chosen again on
    #: the worker, so its outputs are still checked against the reference's.
    variant: str | None = None

    @classmethod
    def of(cls, checkpoint: CheckpointLike) -> PortableCheckpoint:
        """Resolve ``checkpoint`` here (reading its metadata file) into what travels to workers.

        A variant travels as its reference and its name (alone, it would be its own reference:
        nothing would check it).
        """
        if isinstance(checkpoint, PortableCheckpoint):
            return checkpoint
        resolved = _resolved_here(checkpoint)
        if resolved.variant is not None and resolved.reference is not None:
            return attrs.evolve(cls.of(resolved.reference), variant=resolved.variant)
        return cls(
            source=str(resolved.weights_path) if resolved.model_bytes is None else resolved.source,
            metadata=resolved.metadata.to_dict(),
            initializers=dict(resolved.initializers),
            external_data=dict(resolved.external_data),
        )

    def resolve(self) -> ResolvedCheckpoint:
        """The checkpoint on this worker, with the metadata the driver resolved."""
        reference = self._reference()
        return reference if self.variant is None else select_variant(reference, self.variant)

    def _reference(self) -> ResolvedCheckpoint:
        metadata = CheckpointMetadata.from_dict(self.metadata)
        if isinstance(self.source, bytes):
            return InMemoryCheckpoint(
                self.source,
                metadata,
                initializers=self.initializers,
                external_data=self.external_data,
            ).resolve()
        if not Path(self.source).is_file():
            raise MissingFileError(
                f"ONNX model not found on node {placement()[0] or 'here'}: {self.source}; "
                "expected a path every Ray worker can read (or pass InMemoryCheckpoint(bytes))"
            )
        return ResolvedCheckpoint(
            Path(self.source),
            metadata,
            initializers=self.initializers,
            external_data=self.external_data,
        )


#: What ``predict`` and ``BackendConfig`` accept as the model.
CheckpointLike = Union[
    LocalCheckpoint,
    ResolvedCheckpoint,
    InMemoryCheckpoint,
    PortableCheckpoint,
    str,
    "os.PathLike[str]",
    bytes,
]


def _resolved_here(checkpoint: object) -> ResolvedCheckpoint:
    if isinstance(checkpoint, ResolvedCheckpoint):
        return checkpoint
    if isinstance(checkpoint, (LocalCheckpoint, InMemoryCheckpoint)):
        return checkpoint.resolve()
    if isinstance(checkpoint, bytes):
        return InMemoryCheckpoint(checkpoint).resolve()
    if isinstance(checkpoint, (str, os.PathLike)):
        return LocalCheckpoint(Path(checkpoint)).resolve()
    raise OptionTypeError(
        "checkpoint: expected a LocalCheckpoint, ResolvedCheckpoint, InMemoryCheckpoint, "
        f"a path or the model's bytes, got {type(checkpoint).__name__}"
    )
