"""A plugin-EP library that crashes on load is loaded first in a child process (issue 24 item
28): the crash is reported and remembered in the probe cache; the process and its build live."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="builds an ELF library"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the library"),
]

_SOURCE = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void crash(void) {
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { write(fd, "loaded\n", 7); close(fd); }
    abort();
}
"""

_CHILD = textwrap.dedent(
    """
    import sys
    from typing import ClassVar
    import attrs, models
    from ortplug import InMemoryCheckpoint, OnnxBackend, ProviderOffer, ProviderType, hookimpl
    from ortplug.host.ep_libraries import EpLibrary, ensure_library
    from ortplug.testing import make_plugin_host

    LIBRARY = EpLibrary("crashy", "CrashyExecutionProvider", path=sys.argv[1])

    @attrs.frozen
    class Crashy:
        kind: ClassVar[str] = "crashy"
        def to_ort(self):
            return "CrashyExecutionProvider", {}

    class CrashyPlugin:
        @hookimpl
        def ortplug_provider_types(self):
            yield ProviderType("crashy", "CrashyExecutionProvider", Crashy, library=LIBRARY)

        @hookimpl
        def ortplug_offer_providers(self):
            yield ProviderOffer(Crashy(), preference=100, reason="wants to run")

    print(ensure_library(LIBRARY).problem())
    host = make_plugin_host(("crashy", CrashyPlugin()))
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    backend = OnnxBackend.from_checkpoint(checkpoint, plugins=host)
    print(backend.providers)
    """
)


@pytest.fixture
def crashy(tmp_path: Path) -> tuple[Path, Path]:
    """A library whose constructor notes each load in a marker file, then aborts."""
    source, library, marker = tmp_path / "crash.c", tmp_path / "libcrash.so", tmp_path / "loads"
    source.write_text(_SOURCE)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(library), str(source), f'-DMARKER="{marker}"'],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return library, marker


def _loads(marker: Path) -> int:
    return len(marker.read_text().split()) if marker.exists() else 0


#: The child imports the test models too.
_TEST_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(
        filter(None, (str(Path(__file__).parent), os.environ.get("PYTHONPATH")))
    ),
}


def _child(library: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(library)],
        capture_output=True, text=True, timeout=300, env=_TEST_ENV,
    )  # fmt: skip


def test_a_library_that_crashes_on_load_is_reported_and_remembered(crashy) -> None:
    library, marker = crashy
    first = _child(library)
    assert first.returncode == 0, (first.returncode, first.stderr[-2000:])
    problem, providers = first.stdout.splitlines()[-2:]
    assert problem.startswith(f"ONNX Runtime {_ort_version()} could not load {library}: ")
    assert "crashed (SIGABRT)" in problem and "does not load it into this process" in problem
    assert providers == "('CPUExecutionProvider',)"
    assert _loads(marker) == 1  # once, in the trial child
    second = _child(library)  # the same cache: the crash is remembered, nothing loads it again
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout.splitlines()[-2] == problem
    assert _loads(marker) == 1


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__
