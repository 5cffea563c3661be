"""The ``manifesttest`` probe, named in ortplug.json; it counts its runs."""

from __future__ import annotations

RUNS: list[int] = []


def detect() -> dict[str, object]:
    """Whether the provider is usable here: always, and how many times this probe ran."""
    RUNS.append(1)
    return {"usable": True, "runs": len(RUNS)}
