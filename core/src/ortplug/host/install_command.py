"""How every ``pip install`` ortplug prints is spelled: the folders of the checkout the core was
installed from (nothing is on the registry yet), else the registry's names."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

from .requirement import Requirement, normalize_name

__all__ = [
    "CORE",
    "checkout_folders",
    "core_checkout",
    "core_extras",
    "install_targets",
    "pip_install",
]

#: The core's distribution.
CORE = "ortplug"


def core_checkout() -> Path | None:
    """The checkout the installed core came from (PEP 610 ``direct_url.json``: ``.../core``)."""
    from importlib.metadata import PackageNotFoundError, distribution  # deferred: slow import

    try:
        raw = distribution(CORE).read_text("direct_url.json")
        url = urlparse(json.loads(raw or "{}").get("url", ""))
    except (PackageNotFoundError, ValueError, AttributeError):
        return None
    folder = Path(unquote(url.path))
    if url.scheme != "file" or folder.name != "core" or not (folder.parent / "plugins").is_dir():
        return None
    return folder.parent


def core_extras() -> dict[str, frozenset[str]]:
    """Each extra of the installed core -> the distributions it brings (its metadata)."""
    from importlib.metadata import PackageNotFoundError, requires  # deferred: slow import

    brought: dict[str, set[str]] = {}
    try:
        lines = requires(CORE) or []
    except PackageNotFoundError:
        return {}
    for line in lines:
        requirement, _, marker = line.partition(";")
        extra = re.search(r"extra\s*==\s*[\"']([^\"']+)[\"']", marker)
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if extra and name:
            brought.setdefault(extra.group(1), set()).add(normalize_name(name.group(1)))
    return {extra: frozenset(names) for extra, names in brought.items()}


def checkout_folders(tree: Path) -> dict[str, Path]:
    """Distribution name -> its folder in the checkout (``core``, ``plugins/*``, ``addons/*``,
    ``examples/*``)."""
    folders = {}
    projects = [tree / "core", *tree.glob("plugins/*"), *tree.glob("addons/*")]
    for project in [*projects, *tree.glob("examples/*")]:
        try:
            text = (project / "pyproject.toml").read_text(encoding="utf-8")
        except OSError:
            continue
        name = re.search(r'^name\s*=\s*"([^"]+)"', text, re.M)
        if name:
            folders[normalize_name(name.group(1))] = project
    return folders


def install_targets(
    requirements: Iterable[str], tree: Path | None, extras: Mapping[str, frozenset[str]]
) -> list[str]:
    """What pip is given for ``requirements``: the core with every extra they name, then the
    rest in order. From a checkout (``tree``), the folder of each distribution it holds, those
    the extras bring included (pip would look for them on the registry); what else the extras
    bring is left to them. ``extras``: what each extra of the core brings."""
    folders = checkout_folders(tree) if tree else {}
    parsed = [Requirement.parse(text) for text in requirements]
    wanted = list(dict.fromkeys(e for r in parsed if r.name == CORE for e in r.extras))
    brought = {name for extra in wanted for name in extras.get(extra, ())}
    names = [name for extra in wanted for name in sorted(extras.get(extra, ()))]
    names += [r.text for r in parsed if r.name != CORE or not r.extras]
    targets = [f"{folders.get(CORE, CORE)}[{','.join(wanted)}]"] if wanted else []
    for name in names:
        key = Requirement.parse(name).name
        target = str(folders[key]) if key in folders else None if key in brought else name
        if target is not None and target not in targets and not (key == CORE and wanted):
            targets.append(target)
    return targets


def pip_install(*requirements: str) -> str:
    """``pip install ...`` for ``requirements`` (``"ortplug[cuda]"``) as it works here: the
    checkout's folders when the core came from one, else the registry's names."""
    targets = install_targets(requirements, core_checkout(), core_extras())
    return shlex.join(["pip", "install", *targets])
