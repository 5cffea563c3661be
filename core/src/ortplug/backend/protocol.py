"""``InferenceBackend``: the protocol every ortplug backend satisfies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from ..checkpoint import CheckpointMetadata

__all__ = ["InferenceBackend"]


@runtime_checkable
class InferenceBackend(Protocol):
    """Runs one checkpoint: named numpy tensors in, named numpy tensors out."""

    @property
    def metadata(self) -> CheckpointMetadata:
        """Metadata of the checkpoint this backend executes."""
        ...

    def run(self, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        """Run the model on a batch of named inputs and return every output by name."""
        ...

    def close(self) -> None:
        """Release the native resources; ``run`` afterwards raises ``RuntimeError``."""
        ...
