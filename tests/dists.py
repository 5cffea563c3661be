"""Installed distributions as pip leaves them, for tests of plugin discovery."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["dist_info"]


def dist_info(
    site: Path, distribution: str, entry_points: Mapping[str, str], version: str = "1.0"
) -> Path:
    """Write ``site/<distribution>-<version>.dist-info`` (underscored, as pip names it) with its
    ``METADATA`` and the ``[ortplug]`` ``entry_points``; returns the folder."""
    folder = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    metadata = f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    (folder / "METADATA").write_text(metadata)
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (folder / "entry_points.txt").write_text(f"[ortplug]\n{lines}")
    return folder
