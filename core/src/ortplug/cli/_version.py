"""``ortplug --version``: the versions read straight from the distribution folders on ``sys.path``,
importing no plugin or runtime, so it answers even when one is broken."""

from __future__ import annotations

import os
import sys

from ..plugins.project import PROJECT

__all__ = ["version_json", "version_text"]

_RUNTIME_FILE = "onnxruntime/__init__.py"


def _key(name: str) -> str:
    """A distribution's name normalized (PEP 503: runs of ``-_.`` as one ``-``, lower case)."""
    return "-".join(filter(None, name.lower().replace("_", "-").replace(".", "-").split("-")))


def _distributions() -> dict[str, str]:
    """The metadata folder (or ``.egg-info`` file) of each distribution on ``sys.path`` by
    normalized name, the first found of a name."""
    found: dict[str, str] = {}
    for entry in sys.path:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            stem, dot, suffix = name.rpartition(".")
            if dot and suffix in ("dist-info", "egg-info"):
                found.setdefault(_key(stem.partition("-")[0]), os.path.join(folder, name))
    return found


def _read(folder: str, name: str) -> str:
    """A file of a metadata folder ("" when there is none)."""
    try:
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return ""


def _name_and_version(path: str) -> tuple[str, str]:
    """``Name`` and ``Version`` from a distribution's metadata headers (up to the first blank
    line: the long description after them is not read)."""
    found = {"name": "", "version": ""}
    if os.path.isdir(path):
        path = os.path.join(path, "METADATA" if path.endswith(".dist-info") else "PKG-INFO")
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            for line in file:
                if not line.strip():
                    break
                header, _, value = line.partition(":")
                if header.lower() in found and not found[header.lower()]:
                    found[header.lower()] = value.strip()
    except OSError:
        pass
    return found["name"], found["version"]


def _ships(folder: str, file: str) -> bool:
    """Whether a distribution's ``RECORD`` lists ``file``."""
    return any(line.split(",", 1)[0] == file for line in _read(folder, "RECORD").splitlines())


def _entry_points(folder: str, group: str) -> list[str]:
    """The names of a distribution's entry points in ``group``."""
    section, names = None, []
    for raw in _read(folder, "entry_points.txt").splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == group and "=" in line and not line.startswith(("#", ";")):
            names.append(line.partition("=")[0].strip())
    return names


def _versions() -> tuple[str | None, list[tuple[str, str]], list[tuple[str, str, str]]]:
    """ortplug's version (``None``: its sources, not installed), each ONNX Runtime wheel's name
    and version, and each plugin entry point with its distribution's name and version."""
    distributions = _distributions()
    own = distributions.get("ortplug")
    runtimes = sorted(
        (
            _name_and_version(folder)
            for key, folder in distributions.items()
            if key.startswith("onnxruntime") and _ships(folder, _RUNTIME_FILE)
        ),
        key=lambda named: named[0].lower(),
    )
    plugins = sorted(
        (entry, *_name_and_version(folder))
        for folder in distributions.values()
        for entry in _entry_points(folder, PROJECT)
    )
    return (_name_and_version(own)[1] if own else None), runtimes, plugins


def version_text() -> str:
    """One line for ortplug, one per ONNX Runtime wheel and one per plugin entry point."""
    own, runtimes, plugins = _versions()
    # without a distribution: ortplug's sources on sys.path
    lines = [f"ortplug {own or '(sources, not installed)'}"]
    lines += [f"runtime {name} {version}" for name, version in runtimes]
    if not runtimes:
        from ..host.runtime import install_hint

        lines.append(f"runtime: {install_hint()}")
    for entry, name, version in plugins:
        lines.append(f"plugin {entry}: {' '.join(filter(None, (name, version))) or '?'}")
    return "\n".join(lines) + "\n"


def version_json() -> str:
    """``--version --json``: what :func:`version_text` says, as a JSON object (``ortplug``
    ``null`` for its sources, not installed; ``runtimes`` empty when none is installed)."""
    import json  # deferred: the text answer does without it

    own, runtimes, plugins = _versions()
    return (
        json.dumps(
            {
                "ortplug": own,
                "runtimes": [{"name": name, "version": version} for name, version in runtimes],
                "plugins": [
                    {"entry_point": entry, "distribution": name or None, "version": version or None}
                    for entry, name, version in plugins
                ],
            },
            indent=2,
        )
        + "\n"
    )
