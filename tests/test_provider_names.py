"""A shipped provider is its plugin folder: the core lists none of them (issue 29, item 1).

Adding a first-party provider is a new folder under ``plugins/`` and one extra in
``core/pyproject.toml``; the core reads kinds, ONNX Runtime names, install lines, catalog
fields and device classes from the plugins' ``ortplug.json`` files. This test lists every
place in ``core/src`` whose code (identifiers and string literals; docstrings and comments
are prose) names a shipped kind or its ONNX Runtime name, and fails on one that no entry of
``_ALLOWED`` justifies.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
CORE = REPOSITORY / "core" / "src" / "ortplug"

#: Each allowed use: what the code says (a regex over the token), and why it may say it.
_ALLOWED = {
    r"cuda:device_id=1|cuda,cpu|\"kind\": \"cuda\"|\['cuda', 'cpu'\]": (
        "the syntax of a provider chain, shown by an example in help pages and error lines"
    ),
    r"like 'cuda'|'cpu' or 'cuda'": (
        "an example of a name in an error line (a probe name, a kind, an IO-binding device)"
    ),
    r"first TensorRT engine": "load_timeout_s's hint names the slowest first build it knows",
}


def _names() -> re.Pattern[str]:
    """The shipped kinds, their aliases and ONNX Runtime names, from the plugins' own files."""
    words: set[str] = set()
    for path in REPOSITORY.glob("plugins/*/src/*/ortplug.json"):
        for plugin in json.loads(path.read_text())["plugins"].values():
            for kind in plugin["kinds"]:
                if kind["kind"] != "cpu":  # "cpu" is every host's, not a provider's word
                    words.update(n.lower() for n in (kind["kind"], kind["ort_name"]))
                    words.update(a.lower() for a in kind.get("aliases", ()) if a != "gpu")
    return re.compile("|".join(sorted(map(re.escape, words))), re.IGNORECASE)


#: Identifiers and string literals (an f-string's text is its own token from Python 3.12).
_CODE = (tokenize.NAME, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING))


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                lines.update(range(value.lineno, (value.end_lineno or value.lineno) + 1))
    return lines


def _places(names: re.Pattern[str]) -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(CORE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        docs = _docstring_lines(ast.parse(text))
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            code = token.type in _CODE
            if code and token.start[0] not in docs and names.search(token.string):
                found.append((str(path.relative_to(CORE)), token.start[0], token.string))
    return found


def test_the_names_cover_each_shipped_kind_and_its_onnx_runtime_name() -> None:
    names = _names()
    for word in ("cuda", "CUDAExecutionProvider", "trt", "coreml", "WebGpuExecutionProvider"):
        assert names.search(word), word
    assert not names.search("cpu")


def test_no_shipped_provider_is_named_in_the_core_outside_the_allowed_places() -> None:
    unjustified = [
        f"{path}:{line}: {text[:80]!r}"
        for path, line, text in _places(_names())
        if not any(re.search(allowed, text) for allowed in _ALLOWED)
    ]
    assert not unjustified, "\n".join(unjustified)


def test_each_allowed_place_is_still_used() -> None:
    places = _places(_names())
    unused = [a for a in _ALLOWED if not any(re.search(a, text) for _, _, text in places)]
    assert not unused


def test_the_binding_device_map_is_read_from_the_manifests() -> None:
    """``bind_output(device=...)`` checks the session's providers against the kinds whose
    manifest names that IO-binding device (binding.py listed them, DirectML and CANN too)."""
    from ortplug.plugin_host.first_party import io_device_providers

    assert io_device_providers("cuda") == {"CUDAExecutionProvider", "TensorrtExecutionProvider"}
    assert io_device_providers("webgpu") == {"WebGpuExecutionProvider"}
    assert io_device_providers("dml") == frozenset()  # no plugin declares DirectML


def test_the_binding_device_map_scans_the_installed_plugins_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each ``bind_output(device=...)`` ran the entry-point scan again and re-checked every
    installed declaration (about a millisecond a call); the map is read once per plugin host."""
    from ortplug.plugin_host import entry_points
    from ortplug.plugin_host.first_party import io_device_providers
    from ortplug.plugin_host.manager import reset_plugin_host

    scans = []
    real = entry_points.discover

    def counted(group: str, *, remember: bool = True) -> object:
        scans.append(group)
        return real(group, remember=remember)

    reset_plugin_host()
    monkeypatch.setattr(entry_points, "discover", counted)
    for _ in range(3):
        assert "CUDAExecutionProvider" in io_device_providers("cuda")
    assert "WebGpuExecutionProvider" in io_device_providers("webgpu")
    assert scans == ["ortplug"]
    reset_plugin_host()  # a new host reads the installed plugins again
    io_device_providers("cuda")
    assert scans == ["ortplug", "ortplug"]
