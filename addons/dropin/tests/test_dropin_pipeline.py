"""The drop-in session through the build pipeline: its provider list parsed once, its warnings
pointing at the user's line; a build on the CPU reference alone imports only what it runs.
(The serving add-on's warnings, from ``from_checkpoint`` and the drop-in, are tested with it.)"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import ClassVar

import attrs
import models
import pytest
from ortplug import ProviderType, VerificationWarning, hookimpl
from ortplug.plugin_host.manager import get_plugin_host
from ortplug.testing import demo_model
from ortplug_dropin import InferenceSession
from ortplug_misbehaving import MisbehavingPlugin


@pytest.fixture(autouse=True)
def _cpu_plugin_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORTPLUG_PLUGINS", "cpu")


class _Counter:
    """The names of the ``parsed`` configs built so far."""

    def __init__(self) -> None:
        self.names: list[str] = []


_READ = _Counter()


def _read(name: str) -> str:
    _READ.names.append(name)
    return name


@attrs.frozen
class _Parsed:
    """Built each time ortplug parses a ``{"kind": "parsed", "name": ...}`` entry."""

    kind: ClassVar[str] = "parsed"
    name: str = attrs.field(default="", converter=_read)

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "AzureExecutionProvider", {}


class _ParsedPlugin:
    @hookimpl
    def ortplug_provider_types(self):
        yield ProviderType("parsed", "AzureExecutionProvider", _Parsed)


def test_the_drop_in_parses_its_provider_list_once(tmp_path: Path) -> None:
    """ortplug's forms are parsed once, by the drop-in, and the build takes the parsed chain as
    given (a second parse would build the config again)."""
    assert get_plugin_host().register(_ParsedPlugin(), name="parsed")
    model = str(models.write(tmp_path, "add.onnx", models.add_model([2])))
    _READ.names.clear()
    session = InferenceSession(model, providers=[{"kind": "parsed", "name": "one"}, "cpu"])
    assert session.backend is not None
    assert session.get_providers() == ["AzureExecutionProvider", "CPUExecutionProvider"]
    assert _READ.names == ["one"]


def test_a_warning_of_a_drop_in_build_points_at_the_users_line() -> None:
    """A rejected candidate's warning names this file, whatever the depth of the drop-in's
    build below the user's call."""
    assert get_plugin_host().register(MisbehavingPlugin("raises"), name="bad")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = InferenceSession(str(demo_model()))
    assert session.get_providers() == ["CPUExecutionProvider"]
    rejected = [w for w in caught if issubclass(w.category, VerificationWarning)]
    assert rejected, "the misbehaving candidate is rejected with a warning"
    assert {Path(w.filename).name for w in rejected} == {Path(__file__).name}


#: What a build on the CPU reference alone does not run: none of it is imported.
_NOT_RUN = [
    "ortplug.pipeline.measure",
    "ortplug.pipeline.share",
    "ortplug.pipeline.real_traffic",
    "ortplug_serve",  # the serving add-on: only a throughput hint imports it
    "ortplug.pipeline.startup",
    "ortplug.pipeline.switch_state",
    "ortplug.verification.verifier",
    "ortplug.host.environment",  # the global thread pools: asked only by a build that opts out
    "ortplug.verification.verdicts",
]


def _imported(build: str) -> str:
    """What of ``_NOT_RUN`` a fresh process imported for ``build`` (a build and a first run)."""
    code = (
        "import sys, numpy as np, ortplug\n"
        "x = np.zeros((1, 8), np.float32)\n"
        f"{build}\n"
        "print(sorted(set(sys.argv[1:]) & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *_NOT_RUN], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_taken_over_cpu_list_imports_only_the_stages_it_runs() -> None:
    """The drop-in's taken-over CPU list builds the CPU reference alone: the serving stage is
    not imported (its session options' config entry made the build import it for the hint)."""
    build = (
        "ortplug.patch(takeover='cpu')\nimport onnxruntime as ort\n"
        f"s = ort.InferenceSession({str(demo_model())!r}, providers=['CPUExecutionProvider'])\n"
        "assert s.backend is not None\ns.run(None, {'x': x})"
    )
    assert _imported(build) == "[]"


def test_an_explicit_cpu_build_imports_only_the_stages_it_runs() -> None:
    build = (
        "from ortplug import LocalCheckpoint, OnnxBackend\n"
        f"b = OnnxBackend.from_checkpoint(LocalCheckpoint({str(demo_model())!r}).resolve(), "
        "providers=['cpu'])\n"
        "b.run({'x': x})"
    )
    assert _imported(build) == "[]"
