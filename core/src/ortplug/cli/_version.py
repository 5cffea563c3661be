"""``ortplug --version``: ortplug's, ONNX Runtime's and each plugin's versions.

Read from the installed distributions' metadata: no plugin and no runtime is imported, so the
answer comes even when one of them is broken.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from ..host._runtime import install_hint, installed_runtimes
from ..plugins import _entry_points

__all__ = ["version_text"]


def version_text() -> str:
    """One line for ortplug, one per ONNX Runtime wheel and one per plugin entry point."""
    try:
        own = version("ortplug")
    except PackageNotFoundError:  # sources on sys.path, no distribution installed
        own = "(sources, not installed)"
    lines = [f"ortplug {own}"]
    runtimes = installed_runtimes()
    lines += [f"runtime {d.name} {d.version}" for d in runtimes] or [f"runtime: {install_hint()}"]
    for entry in sorted(_entry_points.discover(_entry_points.PROJECT), key=lambda e: e.name):
        made_by = f"{entry.distribution} {entry.version or ''}" if entry.distribution else "?"
        lines.append(f"plugin {entry.name}: {made_by.strip()}")
    return "\n".join(lines) + "\n"
