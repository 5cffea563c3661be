"""Checkpoints: model weights plus the metadata that drives provider selection."""

from .metadata import PRECISIONS, SCHEMA_VERSION, CheckpointMetadata
from .sources import InMemoryCheckpoint, LocalCheckpoint, ResolvedCheckpoint, metadata_path_for

__all__ = [
    "PRECISIONS",
    "SCHEMA_VERSION",
    "CheckpointMetadata",
    "InMemoryCheckpoint",
    "LocalCheckpoint",
    "ResolvedCheckpoint",
    "metadata_path_for",
]
