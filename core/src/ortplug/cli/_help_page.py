"""``ortplug --help``: the page shipped in the wheel for the shipped add-ons' commands installed
(each set of them, read in ~1 ms), else the one the parser renders (argparse, attrs and every
add-on's command: ~45 ms), for a command another distribution adds.
"""

from __future__ import annotations

import itertools
import os
import sys

from ..plugin_host.entry_points_txt import COMMANDS_GROUP, declared

__all__ = ["help_page", "shipped_pages", "shipped_points"]

#: The shipped pages: a ``python X.Y`` line, then per page ``== NAME=TARGET ...`` and its text.
_SHIPPED = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "help_pages.txt")
_PAGE = "\n== "
_PYTHON = "python {}.{}".format(*sys.version_info[:2])  # whose argparse rendered the pages


def _commands(points: list[tuple[str, str]]) -> str:
    """The add-on commands ``points`` as a shipped page's ``==`` line names them."""
    return " ".join(sorted(f"{name}={value}" for name, value in points))


def _shipped(points: list[tuple[str, str]]) -> str | None:
    """The shipped page for exactly the add-on commands ``points`` (``None``: none is, or it was
    rendered by another Python's argparse)."""
    try:
        with open(_SHIPPED, encoding="utf-8") as file:
            python, *pages = file.read().split(_PAGE)
    except (OSError, UnicodeDecodeError):  # a broken install: the parser renders it
        return None
    if python != _PYTHON:
        return None
    wanted = f"{_commands(points)}\n"
    return next((page.removeprefix(wanted) for page in pages if page.startswith(wanted)), None)


def shipped_points() -> list[tuple[str, str]]:
    """The ``(command, target)`` of each shipped add-on's command that is installed (the add-on
    :func:`~ortplug.addons.provider_of` names registering it from its own package)."""
    from ..addons import provider_of

    def shipped(name: str, target: str) -> bool:
        addon = provider_of(COMMANDS_GROUP, name)
        return addon is not None and target.startswith(f"{addon.package}.")

    return [point for point in declared(COMMANDS_GROUP) if shipped(*point)]


def shipped_pages(points: list[tuple[str, str]]) -> str:
    """The text of ``data/help_pages.txt``: a page per set of the shipped add-ons whose commands
    ``points`` are (every shipped one installed); ``PYTHONPATH=core/src python -m
    ortplug.cli._help_page`` writes it."""
    from ._parser import build_parser

    by_package = itertools.groupby(
        sorted(points, key=lambda p: p[1]), lambda p: p[1].partition(".")[0]
    )
    addons = [list(group) for _, group in by_package]
    subsets = (s for n in range(len(addons) + 1) for s in itertools.combinations(addons, n))
    sets = [list(itertools.chain.from_iterable(subset)) for subset in subsets]
    pages = [(p, build_parser([name for name, _ in p]).format_help()) for p in sets]
    if any(_PAGE in text for _, text in pages):
        raise ValueError(f"a help page holds {_PAGE!r}, which separates the shipped pages")
    return _PYTHON + "".join(f"{_PAGE}{_commands(p)}\n{text}" for p, text in pages)


def help_page() -> str:
    """The top-level help page, as ``build_parser().format_help()`` renders it."""
    shipped = _shipped(declared(COMMANDS_GROUP))
    if shipped is not None:
        return shipped
    from ._parser import build_parser

    return build_parser().format_help()


if __name__ == "__main__":
    with open(_SHIPPED, "w", encoding="utf-8") as out:
        out.write(shipped_pages(shipped_points()))
