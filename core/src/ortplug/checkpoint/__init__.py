"""Checkpoints: model weights plus the metadata that drives provider selection."""

from .metadata import PRECISIONS, SCHEMA_VERSION, CheckpointMetadata
from .sources import (
    InMemoryCheckpoint,
    LocalCheckpoint,
    ResolvedCheckpoint,
    metadata_path_for,
    select_variant,
)
from .variants import Tolerance, Variant

__all__ = [
    "PRECISIONS",
    "SCHEMA_VERSION",
    "CheckpointMetadata",
    "InMemoryCheckpoint",
    "LocalCheckpoint",
    "ResolvedCheckpoint",
    "Tolerance",
    "Variant",
    "metadata_path_for",
    "select_variant",
]
