"""MkDocs hook: the command-line page's ``<!-- cli: NAME -->`` markers become each command's
``--help``, rendered from ortplug's own parser, so the page cannot drift from the commands
(tests/test_docs.py checks that every command has a section and a marker)."""

from __future__ import annotations

import argparse
import re
from typing import Any

#: A marker on a line of its own: ``<!-- cli: run -->``; ``<!-- cli: -->`` is ``ortplug --help``.
MARKER = re.compile(r"^<!-- cli: ?([\w-]*) -->$", re.MULTILINE)
#: Where the demo model lives differs per install; the page says so instead.
DEMO = "<the demo model's path>"


def commands() -> dict[str, argparse.ArgumentParser]:
    """``ortplug``'s parser (key ``""``) and each command's, by name, from the installed ortplug."""
    from ortplug.cli._parser import build_parser

    parser = build_parser()
    found: dict[str, argparse.ArgumentParser] = {"": parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def help_text(parser: argparse.ArgumentParser) -> str:
    """A parser's ``--help``, with the demo model's path written as :data:`DEMO`."""
    from importlib.resources import files

    demo = str(files("ortplug.data") / "demo.onnx")
    return parser.format_help().replace(demo, DEMO)


def render(markdown: str) -> str:
    """``markdown`` with each marker replaced by that command's help in a text block."""
    parsers = commands()

    def block(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in parsers:
            raise ValueError(f"docs/cli.md: no ortplug command {name!r} (have {sorted(parsers)})")
        return f"```text\n{help_text(parsers[name]).rstrip()}\n```"

    return MARKER.sub(block, markdown)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """The MkDocs event: only the command-line page has markers."""
    return render(markdown) if page.file.src_uri == "cli.md" else markdown
