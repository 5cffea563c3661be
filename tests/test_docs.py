"""The code blocks of the README and of every page of the manual run, so that what they show
cannot drift from what ortplug does.

The pages are README.md, CONTRIBUTING.md, every ``docs/**/*.md`` and each distribution's
README.md. Every fenced block of a page is checked, in order, in one scratch folder of that page,
on the CPU install the README sets up (``ORTPLUG_PLUGINS=cpu``: the core and the CPU plugin of
this environment):

* ``python`` blocks run (each in a fresh interpreter, a deprecation the block causes an error);
  ``bash`` blocks run with ``bash -e``;
  a block whose first line is ``# PATH.py`` is written to PATH in a project folder (``test_*.py``
  files then run under pytest, importing the others), ``# PATH (abridged)``: each of its code
  lines must be in the repository's file PATH; ``toml`` blocks must parse; ``json`` blocks are
  plugin declarations or catalogs and must check as one (``parse_declarations``);
* a block without a language (what a command prints, a tree) needs a directive saying how to
  check it.

Directives are HTML comments right above the fence (invisible on the rendered page, stated in
the source), one per line, each ``<!-- readme-test: ... -->``:

* ``replace `OLD` with `NEW` (why)`` — run the block with OLD replaced (a hardware path on the
  CPU install); OLD must be in the block;
* ``instead `COMMAND` (why)`` — run COMMAND in place of a shell block;
* ``raises NAME: TEXT`` — the Python block must end in an exception of class NAME whose message
  starts with TEXT;
* ``output of `COMMAND`; numbers vary on: WORD ...`` — the block is what COMMAND prints, line for
  line (this checkout's folder, which install commands name, written ``/path/to/ortplug``);
  numbers may differ only on lines that start with one of the WORDs; ``...; host lines:
  WORD ...`` — lines that start with one of these WORDs say what this host has: not compared;
* ``captured on another host, checked by FILE::TEST`` — output captured on hardware this
  machine lacks; FILE's TEST checks the same output from the captured files;
* ``error classes`` — the tree of ortplug's exceptions, checked against the classes;
* ``paths`` — each line starts with a path of this repository;
* ``written to PATH`` — a ``json`` block is also written to PATH in the project folder (a
  plugin's manifest, beside the ``# PATH.py`` blocks of its package).

The files the examples name are made first: ``model.onnx`` (the shipped demo model, with its
metadata as ``model.meta.json``), ``x.npy`` (4 rows of its input, the user's own data the
verification examples hand in) and ``features/`` (Parquet with the columns the Ray example
reads).

Beside the blocks: the names the prose gives resolve, relative links and their anchors resolve,
the package READMEs link to their page of the site, and the command-line page has a section for
every command of the parser.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path

import attrs
import ortplug
import pytest
import tomllib
from ortplug import errors

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The distributions' own pages (what a registry shows).
PACKAGE_PAGES = sorted(
    [
        ROOT / "core" / "README.md",
        *ROOT.glob("plugins/*/README.md"),
        *ROOT.glob("addons/*/README.md"),
    ]
)
#: Every page whose blocks run: the README, the contributors' guide, the manual, the packages'.
PAGES = [README, ROOT / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md")), *PACKAGE_PAGES]
BIN = os.path.dirname(sys.executable)
_FENCE = re.compile(r"^```(\w*)\s*$")
_DIRECTIVE = re.compile(r"^<!-- readme-test: (.+?) -->$")
_NUMBER = re.compile(r"-?\d[\d,.]*(?:e[-+]?\d+)?")


@attrs.frozen
class Block:
    """A fenced block of a page: its language, text, first line number, directives and page."""

    language: str
    text: str
    line: int
    directives: tuple[str, ...]
    page: str = "README.md"

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.language or 'no language'})"


def _name(page: Path) -> str:
    """A page by its path in the repository (a page elsewhere, a test's, by its whole path)."""
    return page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else str(page)


def page_blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, named by its path in the repository."""
    return [attrs.evolve(b, page=_name(page)) for b in readme_blocks(page.read_text("utf-8"))]


def readme_blocks(text: str) -> list[Block]:
    """Every fenced block, with the ``readme-test`` comments on the lines right above it."""
    blocks, lines = [], text.splitlines()
    index = 0
    while index < len(lines):
        opened = _FENCE.match(lines[index])
        if opened is None:
            index += 1
            continue
        directives, above = [], index - 1
        while above >= 0 and (found := _DIRECTIVE.match(lines[above].strip())):
            directives.insert(0, found.group(1))
            above -= 1
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        body = "\n".join(lines[index + 1 : end]) + "\n"
        blocks.append(Block(opened.group(1), body, index + 1, tuple(directives)))
        index = end + 1
    return blocks


BLOCKS = {_name(page): page_blocks(page) for page in PAGES}


# -- directives -----------------------------------------------------------------------------------


def _expect(condition: object, message: str) -> None:
    """A check whose message is all that is shown (the test lists every block's failure)."""
    if not condition:
        raise AssertionError(message)


def _quoted(directive: str, count: int) -> list[str]:
    """The ``count`` backtick-quoted parts of a directive, and what follows them (its reason)."""
    parts = re.findall(r"`([^`]*)`", directive)
    _expect(len(parts) == count, f"expected {count} `quoted` part(s) in {directive!r}")
    return parts


def _substituted(block: Block) -> str:
    """The block's text with its ``replace`` directives applied (each must match)."""
    text = block.text
    for directive in block.directives:
        if directive.startswith("replace "):
            old, new = _quoted(directive, 2)
            _expect(old in text, f"{block}: {directive!r}: `{old}` is not in the block")
            _expect(directive.rstrip().endswith(")"), f"{block}: {directive!r} says no reason")
            text = text.replace(old, new)
    return text


def _directive(block: Block, kind: str) -> str | None:
    return next((d for d in block.directives if d.startswith(kind)), None)


# -- running -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scratch_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the blocks name, made once."""
    import numpy as np

    folder = tmp_path_factory.mktemp("readme")
    (folder / ".ci").symlink_to(ROOT / ".ci")  # what the CI block names
    (folder / "benchmarks").symlink_to(ROOT / "benchmarks")  # what the contributors' guide runs
    demo = Path(str(files("ortplug.data") / "demo.onnx"))
    shutil.copy(demo, folder / "model.onnx")
    metadata = ortplug.CheckpointMetadata.from_model(demo)
    (folder / "model.meta.json").write_text(metadata.to_json())
    rows = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    np.save(folder / "x.npy", rows)  # the demo model's input x [batch, 8]
    _features(folder / "features")
    return folder


@pytest.fixture
def scratch(scratch_files: Path, tmp_path: Path) -> Path:
    """A page's own folder to run its blocks in, with a copy of the files they name."""
    folder = tmp_path / "page"
    shutil.copytree(scratch_files, folder, symlinks=True)
    return folder


def _features(folder: Path) -> None:
    """Parquet as the Ray example reads it: a ``features`` list column (8 floats) and a ``key``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    rows = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    table = pa.table({"features": list(rows), "key": [f"row-{i}" for i in range(len(rows))]})
    pq.write_table(table, folder / "part-0.parquet")


def _environment(folder: Path) -> dict[str, str]:
    """The CPU install, a private cache, this environment's ``ortplug`` first on PATH."""
    return {
        **os.environ,
        "ORTPLUG_PLUGINS": "cpu",
        "ORTPLUG_CACHE_DIR": str(folder / ".cache"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "RAY_ADDRESS": "local",  # a cluster on this machine is not the example's
    }


def _run(args: list[str], folder: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**_environment(folder), **extra}
    return subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def _written_path(block: Block) -> str | None:
    """The PATH of a block that starts ``# PATH.py`` (a file of a project the README writes)."""
    first = block.text.splitlines()[0]
    found = re.fullmatch(r"# ([\w./-]+\.py)", first)
    return found.group(1) if found else None


_RAISES = """
import runpy, sys
try:
    runpy.run_path("{path}", run_name="__main__")
except Exception as exc:
    print(type(exc).__name__ + ": " + str(exc), file=sys.stderr)
    sys.exit(3)
"""


def _python_block(block: Block, folder: Path) -> None:
    text = _substituted(block)
    path = _written_path(block)
    if path is not None:
        target = folder / "project" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        compile(text, str(target), "exec")  # a module runs when a test block imports it
        if target.name.startswith("test_"):
            done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                         str(target)], folder / "project", PYTHONPATH=_pythonpath(folder))  # fmt: skip
            _expect(done.returncode == 0, f"{block}: pytest failed\n{done.stdout}")
        return
    script = folder / f"block_{block.line}.py"
    script.write_text(text)
    raises = _directive(block, "raises ")
    # a deprecated spelling in a block is an error: the pages show what to write now
    command = [sys.executable, "-W", "error::DeprecationWarning:__main__", "-c"]
    done = _run([*command, _RAISES.format(path=script)], folder)
    if raises is None:
        _expect(done.returncode == 0, f"{block} failed:\n{done.stderr[-3000:]}")
        return
    expected = raises.removeprefix("raises ")
    _expect(
        done.returncode == 3,
        f"{block}: expected {expected!r}, got exit {done.returncode} {done.stderr[-2000:]}",
    )
    last = done.stderr.strip().splitlines()[-1]
    _expect(last.startswith(expected), f"{block}: expected {expected!r}, got {last!r}")


def _pythonpath(folder: Path) -> str:
    """What a project the README writes puts on the path: its ``src``, then this environment's."""
    return os.pathsep.join(filter(None, [str(folder / "project" / "src"),
                                         os.environ.get("PYTHONPATH")]))  # fmt: skip


def _bash_block(block: Block, folder: Path) -> None:
    instead = _directive(block, "instead ")
    if instead is not None:
        (command,) = _quoted(instead, 1)
        _expect(instead.rstrip().endswith(")"), f"{block}: {instead!r} says no reason")
        script = command
    else:
        script = _substituted(block)
    done = _run(["bash", "-e", "-o", "pipefail", "-c", script], folder)
    _expect(done.returncode == 0, f"{block} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")


def _abridged(block: Block) -> None:
    """``# PATH (abridged)``: each code line of the block is a line of PATH (a trailing ``  #``
    comment is the README's; ``...`` alone elides lines, at the end of a line the rest of it)."""
    first, *rest = block.text.splitlines()
    path = ROOT / first.removeprefix("# ").removesuffix(" (abridged)")
    source = [line.strip() for line in path.read_text().splitlines()]

    def found(line: str) -> bool:
        code = line.partition("  # ")[0].strip()
        if code in ("", "...") or code.startswith("#"):
            return True
        if code.endswith("..."):
            return any(have.startswith(code.removesuffix("...")) for have in source)
        return code in source

    missing = [line for line in rest if not found(line)]
    _expect(not missing, f"{block}: not in {path.relative_to(ROOT)}: {missing}")


# -- output blocks -------------------------------------------------------------------------------


def _output_of(block: Block, directive: str, folder: Path) -> None:
    (command,) = _quoted(directive, 1)
    varies = directive.partition("numbers vary on:")[2].partition(";")[0].split()
    hosts = directive.partition("host lines:")[2].partition(";")[0].split()
    done = _run(["bash", "-c", command], folder)
    _expect(done.returncode == 0, f"{block}: {command} failed: {done.stderr[-2000:]}")

    def compared(lines: list[str]) -> list[str]:
        return [line for line in lines if not (line.split()[:1] and line.split()[0] in hosts)]

    stdout = done.stdout.replace(str(ROOT), "/path/to/ortplug")
    shown, printed = compared(block.text.splitlines()), compared(stdout.splitlines())
    _expect(len(shown) == len(printed), f"{block}: shows {shown}, {command} prints {printed}")
    for line, out in zip(shown, printed):
        numbers_vary = line.split()[:1] and line.split()[0] in varies
        want, got = (_NUMBER.sub("N", line), _NUMBER.sub("N", out)) if numbers_vary else (line, out)
        _expect(want == got, f"{block}: shows\n{want}\n{command} prints\n{got}")


def _error_classes(block: Block) -> None:
    """``Name (Builtin)`` lines indented under their parent: classes of :mod:`ortplug.errors` with
    those bases and builtins."""
    parents: list[tuple[int, type]] = []
    checked = 0
    for line in block.text.splitlines():
        found = re.match(r"^([│ ]*)(?:[├└]── )?([\w, ]+?)(?: \((\w+)\))?(?:\s{2,}.*)?$", line)
        if not found or not found.group(2).strip():
            continue
        depth = len(found.group(1)) + (4 if "──" in line else 0)
        for name in (n.strip() for n in found.group(2).split(",")):
            cls = getattr(errors, name)
            while parents and parents[-1][0] >= depth:
                parents.pop()
            if parents:
                parent = parents[-1][1]
                _expect(issubclass(cls, parent), f"{block}: {name} is not a {parent.__name__}")
            if found.group(3):
                base = getattr(builtins, found.group(3))
                _expect(issubclass(cls, base), f"{block}: {name} is not a {found.group(3)}")
            checked += 1
        parents.append((depth, cls))
    _expect(checked, f"{block}: no class found in it")


def _captured(block: Block, directive: str) -> None:
    file, _, test = directive.partition("checked by ")[2].strip().partition("::")
    path = ROOT / file
    _expect(path.is_file() and f"def {test}(" in path.read_text(), f"{block}: no test {directive}")


def _paths(block: Block) -> None:
    for line in block.text.splitlines():
        path = line.split()[0]
        _expect(list(ROOT.glob(path.rstrip("/"))), f"{block}: {path} is not in this repository")


# -- the tests -----------------------------------------------------------------------------------


def _check(block: Block, folder: Path) -> None:
    if block.language == "python":
        first = block.text.splitlines()[0]
        if first.endswith("(abridged)"):
            _abridged(block)
        else:
            _python_block(block, folder)
    elif block.language in ("bash", "sh", "shell"):
        _bash_block(block, folder)
    elif block.language == "toml":
        tomllib.loads(block.text)
    elif block.language == "json":
        from ortplug.plugins.declaration import parse_declarations

        written = _directive(block, "written to ")  # a plugin's manifest; else a catalog's
        parse_declarations(json.loads(block.text), str(block), catalog=written is None)
        if written is not None:
            target = folder / "project" / written.removeprefix("written to ").strip()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text)
    elif block.language in ("", "text"):
        if (output := _directive(block, "output of ")) is not None:
            _output_of(block, output, folder)
        elif _directive(block, "error classes") is not None:
            _error_classes(block)
        elif _directive(block, "paths") is not None:
            _paths(block)
        elif (captured := _directive(block, "captured on another host")) is not None:
            _captured(block, captured)
        else:
            raise AssertionError(
                f"{block}: say how to check it (output of, error classes, paths, captured)"
            )
    else:
        raise AssertionError(f"{block}: no rule for {block.language!r} blocks")


@pytest.mark.parametrize("page", list(BLOCKS))
def test_every_block_of_the_page_holds(page: str, scratch: Path) -> None:
    """In the page's order, in one folder: a block may use the files an earlier one wrote."""
    failures = []
    for block in BLOCKS[page]:
        try:
            _check(block, scratch)
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, "\n\n".join(failures)


# -- names in the prose --------------------------------------------------------------------------


def _prose(text: str) -> str:
    """The README without its fenced blocks."""
    return re.sub(r"(?ms)^```\w*\n.*?^```\n", "", text)


def _spans(text: str) -> Iterator[str]:
    yield from re.findall(r"`([^`\n]+)`", _prose(text))


def _resolve(dotted: str) -> object:
    """``ortplug.a.b.c``: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target
    raise ModuleNotFoundError(dotted)


def _wrong_names(text: str) -> list[str]:
    """``ortplug.x.y`` paths and ``PublicClass.method()`` calls in inline code that do not resolve."""
    wrong = []
    for span in _spans(text):
        # a quoted "ortplug.x" is a name given to ONNX Runtime, ortplug.json a file: not Python
        for dotted in re.findall(r"(?<![\w.\"])(ortplug(?:\.\w+)+)(?![\w\"])", span):
            if dotted.endswith(".json"):
                continue
            try:
                _resolve(dotted)
            except (ImportError, AttributeError) as exc:
                wrong.append(f"`{span}`: {dotted}: {type(exc).__name__}: {exc}")
        for cls, member in re.findall(r"\b([A-Z]\w+)\.(\w+)\(", span):
            public = getattr(ortplug, cls, None) if cls in ortplug.__all__ else None
            if public is not None and not hasattr(public, member):
                wrong.append(f"`{span}`: ortplug.{cls} has no {member}")
    return wrong


@pytest.mark.parametrize("page", list(BLOCKS))
def test_the_names_the_page_gives_exist(page: str) -> None:
    wrong = _wrong_names((ROOT / page).read_text(encoding="utf-8"))
    assert not wrong, "\n".join(wrong)


def test_names_that_are_not_there_are_found() -> None:
    """What the README once said (issue 24, items 1 and 2)."""
    text = (
        "`HostCapabilities.detect()` composes every plugin's probes; "
        "`OrtDevicePolicy` (from `ortplug.ort_selection`); `ortplug.selection.OrtDevicePolicy`\n"
    )
    assert _wrong_names(text) == [
        "`HostCapabilities.detect()`: ortplug.HostCapabilities has no detect",
        "`ortplug.ort_selection`: ortplug.ort_selection: AttributeError: module 'ortplug' has no "
        "attribute 'ort_selection'",
    ]


_DRIFTED = [
    (Block("python", "raise ValueError('x')\n", 1, ()), "README.md:1 (python) failed"),
    (Block("python", "x = 1\n", 2, ("raises OptionError: x",)), "expected 'OptionError: x'"),
    (Block("python", "x = 1\n", 3, ("replace `y` with `z` (why)",)), "`y` is not in the block"),
    (Block("python", "x = 1\n", 4, ("replace `x` with `z`",)), "says no reason"),
    (Block("bash", "false\n", 5, ()), "README.md:5 (bash) failed"),
    (Block("", "usage: nothing\n", 6, ("output of `echo usage: something`",)), "shows"),
    (Block("", "OrtplugError\n└── CacheError (ValueError)\n", 7, ("error classes",)),
     "CacheError is not a ValueError"),
    (Block("", "OrtplugError\n└── OptionError (ValueError)\n    └── CacheError\n", 8,
           ("error classes",)), "CacheError is not a OptionError"),
    (Block("", "nowhere/   a folder\n", 9, ("paths",)), "nowhere/ is not in this repository"),
    (Block("", "some output\n", 10, ()), "say how to check it"),
    (Block("python", "# core/src/ortplug/__init__.py (abridged)\nx = 1\n", 11, ()), "not in"),
    (Block("python", "import warnings\nwarnings.warn('old', DeprecationWarning)\n", 12, ()),
     "DeprecationWarning: old"),
]  # fmt: skip


@pytest.mark.parametrize(("block", "message"), _DRIFTED, ids=[b.line for b, _ in _DRIFTED])
def test_a_block_that_drifted_fails(tmp_path, block, message) -> None:
    with pytest.raises(AssertionError, match=re.escape(message)):
        _check(block, tmp_path)


def test_directives_are_understood() -> None:
    """A misspelt directive would silently check nothing."""
    kinds = ("replace ", "instead ", "raises ", "output of ", "error classes", "paths",
             "captured on another host", "written to ")  # fmt: skip
    for block in (b for blocks in BLOCKS.values() for b in blocks):
        for directive in block.directives:
            assert directive.startswith(kinds), f"{block}: unknown directive {directive!r}"


# -- links, the site, the command line -----------------------------------------------------------

#: ``[text](target)`` links of a page (images too), outside its fenced blocks.
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _site_url() -> str:
    """``site_url`` of mkdocs.yml: where the manual is published, the package READMEs' links."""
    found = re.search(r"^site_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)
    assert found, "mkdocs.yml has no site_url"
    return found.group(1)


def _anchors(page: Path) -> set[str]:
    """The heading ids of a Markdown page, as GitHub and MkDocs' toc write them."""
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", _prose(page.read_text("utf-8")), re.MULTILINE):
        text = re.sub(r"[^\w\- ]", "", heading.replace("`", "")).strip().lower()
        anchors.add(re.sub(r"[ ]+", "-", text))
    return anchors


def _broken_links(page: Path) -> list[str]:
    """Relative links of ``page`` whose file, or heading, is not there; site links whose page
    is not in docs/."""
    broken, site = [], _site_url()
    for target in _LINK.findall(_prose(page.read_text("utf-8"))) + re.findall(
        r"<(https?://[^>]+)>", _prose(page.read_text("utf-8"))
    ):
        if target.startswith(site):
            path, _, anchor = target.removeprefix(site).partition("#")
            path = path.strip("/")
            found = [DOCS / f"{path}.md", DOCS / path / "index.md"] if path else [DOCS / "index.md"]
            file = next((f for f in found if f.is_file()), None)
        elif re.match(r"^[a-z]+:", target):
            continue  # another site: not checked here
        else:
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            file = file if file.exists() else None
        if file is None:
            broken.append(f"{_name(page)}: {target}: no such page")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{_name(page)}: {target}: no heading #{anchor} in {_name(file)}")
    return broken


def test_every_link_of_every_page_resolves() -> None:
    """The site's own links are checked by ``mkdocs build --strict``; the README's, the guide's
    and the packages' (which point into docs/ or at the site) here."""
    broken = [line for page in PAGES for line in _broken_links(page)]
    assert not broken, "\n".join(broken)


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# Here\n[a](nowhere.md) [b](#here) [c](#gone) <{_site_url()}nope/>\n")
    assert _broken_links(page) == [
        f"{page}: nowhere.md: no such page",
        f"{page}: #gone: no heading #gone in {page}",
        f"{page}: {_site_url()}nope/: no such page",
    ]


def test_each_package_page_links_to_the_site() -> None:
    """What a registry shows for a distribution says where its manual is."""
    site = _site_url()
    assert PACKAGE_PAGES
    for page in PACKAGE_PAGES:
        text = page.read_text("utf-8")
        assert site in text and "install" in text.lower(), f"{_name(page)}: no link to {site}"


def _cli_hook():  # the MkDocs hook that renders the command-line page, loaded as MkDocs loads it
    spec = importlib.util.spec_from_file_location(
        "cli_reference", DOCS / "_hooks" / "cli_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_command_line_page_has_every_command() -> None:
    """A section and a rendered ``--help`` per command of the parser; none for a command that
    is not there."""
    hook = _cli_hook()
    text = (DOCS / "cli.md").read_text("utf-8")
    commands = set(hook.commands())
    assert set(hook.MARKER.findall(text)) == commands
    assert set(re.findall(r"^## ortplug (\S+)$", text, re.MULTILINE)) == commands - {""}
    rendered = hook.render(text)
    assert "<!-- cli:" not in rendered
    for name, parser in hook.commands().items():
        assert f"usage: {parser.prog}" in rendered, name
    assert "usage: ortplug run [-h]" in rendered and hook.DEMO in rendered


def test_a_marker_for_no_command_fails() -> None:
    with pytest.raises(ValueError, match="no ortplug command 'nothing'"):
        _cli_hook().render("<!-- cli: nothing -->\n")


def test_docstring_roles_become_references_and_a_missing_target_stays_required(
    tmp_path: Path,
) -> None:
    """The API pages' Griffe extension: a role that resolves is an optional reference (a link
    where the object has a page), one that resolves nowhere a required one (--strict fails)."""
    import griffe

    spec = importlib.util.spec_from_file_location("roles", DOCS / "_hooks" / "griffe_roles.py")
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        'class Thing:\n    """See :meth:`run`, :class:`~pkg.Thing` and :func:`gone`."""\n\n'
        '    def run(self):\n        """Runs."""\n'
    )
    extensions = griffe.load_extensions(roles.SphinxRoles)
    package = griffe.load("pkg", search_paths=[str(tmp_path)], extensions=extensions)
    assert package["Thing"].docstring.value == (
        'See <autoref identifier="pkg.Thing.run" optional><code>run</code></autoref>, '
        '<autoref identifier="pkg.Thing" optional><code>Thing</code></autoref> and '
        '<autoref identifier="gone"><code>gone</code></autoref>.'
    )


def test_the_readme_is_a_landing_page() -> None:
    """At most 250 lines (issue 39), and its first screen links how to install for a host, how
    to run a model and how to bring existing ONNX Runtime code, each in one link."""
    lines = README.read_text("utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines"
    first_screen = "\n".join(lines[:30])
    for page in ("docs/install.md", "docs/getting-started.md", "docs/existing-code.md"):
        assert f"]({page})" in first_screen, f"the README's first screen has no link to {page}"
