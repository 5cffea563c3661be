"""Probes load native libraries only from installed distributions and the system loader, never the cwd.

A library named like the one a probe looks for is planted under the current
directory (``./tensorrt_libs/``, ``./nvidia/.../lib/``, ``./``); its
constructor writes a marker file. Nothing ortplug runs there may load it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="plants an ELF library"),
    pytest.mark.skipif(
        shutil.which("gcc") is None, reason="needs gcc to build the planted library"
    ),
]

_SOURCE = r"""
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { write(fd, NAME "\n", strlen(NAME) + 1); close(fd); }
}
int getInferLibVersion(void) { return 100000; }
int cudaRuntimeGetVersion(int *v) { *v = 12040; return 0; }
unsigned long cudnnGetVersion(void) { return 90100; }
int cuInit(unsigned int flags) { return 100; }
"""

#: Where each probe would find its library if it searched the current directory.
_PLANTED = (
    "tensorrt_libs/libnvinfer.so.10",
    "nvidia/cu13/lib/libcudart.so.13",
    "nvidia/cuda_runtime/lib/libcudart.so.12",
    "nvidia/cudnn/lib/libcudnn.so.9",
    "libnvinfer.so.10",
    "libcudart.so.12",
    "libcudnn.so.9",
    "libcuda.so.1",
    "libvulkan.so.1",
)

_TRT_QUERY = "ortplug_tensorrt/_trtquery.py"
_NV_QUERY = "ortplug_cuda/_nvquery.py"


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A working directory full of planted libraries, and the marker their constructors write."""
    cwd, marker = tmp_path / "cwd", tmp_path / "marker.txt"
    cwd.mkdir()
    source = tmp_path / "planted.c"
    source.write_text(_SOURCE)
    for relative in _PLANTED:
        target = cwd / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-o", str(target), str(source),
             f'-DMARKER="{marker}"', f'-DNAME="{relative}"'],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    return cwd, marker


def _python(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**environ, **env},
    )


def _loaded(marker: Path) -> list[str]:
    return marker.read_text().split() if marker.exists() else []


def _script(relative: str) -> str:
    import ortplug_cuda
    import ortplug_tensorrt

    package = ortplug_tensorrt if relative.startswith("ortplug_tensorrt") else ortplug_cuda
    return str(Path(package.__file__).parent / Path(relative).name)


def test_the_planted_library_would_run_if_loaded(planted) -> None:
    """The trap works: loading the planted file by path runs its constructor."""
    cwd, marker = planted
    done = _python(cwd, "-c", "import ctypes; ctypes.CDLL('./tensorrt_libs/libnvinfer.so.10')")
    assert done.returncode == 0, done.stderr
    assert _loaded(marker) == ["tensorrt_libs/libnvinfer.so.10"]


def test_the_tensorrt_probe_ignores_the_current_directory(planted) -> None:
    cwd, marker = planted
    code = "import json; from ortplug_tensorrt.probes import detect_tensorrt as d; print(json.dumps(d()))"
    done = _python(cwd, "-c", code)  # `python -c` puts '' (the cwd) first on sys.path
    assert done.returncode == 0, done.stderr
    assert _loaded(marker) == []
    assert "library_error" in json.loads(done.stdout.splitlines()[-1])


def test_the_cuda_probe_ignores_the_current_directory(planted) -> None:
    cwd, marker = planted
    code = (
        "import json, ortplug_cuda.probes as p; p.ort_cuda_version = lambda: '12.4'; "
        "print(json.dumps([p.nvidia_library_dirs(), p.detect_cuda()]))"
    )
    done = _python(cwd, "-c", code)  # as on a host with a CUDA 12 build of ONNX Runtime
    assert done.returncode == 0, done.stderr
    dirs, _ = json.loads(done.stdout.splitlines()[-1])
    assert _loaded(marker) == []
    assert not [d for d in dirs if not os.path.isabs(d) or d.startswith(str(cwd))]


@pytest.mark.parametrize("command", ["info", "run"])
def test_cli_commands_in_a_planted_directory_load_nothing_from_it(planted, command) -> None:
    cwd, marker = planted
    done = _python(cwd, "-m", "ortplug.cli.main", command)
    assert done.returncode == 0, done.stderr
    assert _loaded(marker) == []


def test_query_scripts_skip_relative_library_folders(planted) -> None:
    cwd, marker = planted
    trt = _python(
        cwd,
        "-I",
        _script(_TRT_QUERY),
        json.dumps({"major": 10, "library_dirs": ["tensorrt_libs", "."]}),
    )
    nv = _python(cwd, "-I", _script(_NV_QUERY),
                 json.dumps({"cuda_major": 12, "library_dirs": ["nvidia/cuda_runtime/lib", "nvidia/cudnn/lib", ""]}))  # fmt: skip
    assert trt.returncode == 0 and nv.returncode == 0, trt.stderr + nv.stderr
    assert _loaded(marker) == []
    assert "library_error" in json.loads(trt.stdout)


@pytest.mark.parametrize(
    "loader_path", [":", "/nonexistent:", ".", "lib:/nonexistent", ":/usr/local/lib", "/x;;/y"]
)
def test_relative_loader_path_entries_do_not_reach_the_cwd(planted, loader_path) -> None:
    """An empty or relative LD_LIBRARY_PATH entry means the cwd to the dynamic loader: no probe
    script ortplug runs (TensorRT, CUDA, WebGPU's Vulkan phase) sees one (issue 24 item 29)."""
    cwd, marker = planted
    (cwd / "lib").mkdir()
    for name in ("libnvinfer.so.10", "libvulkan.so.1"):
        shutil.copy(cwd / name, cwd / "lib" / name)
    code = (
        "import json, sys; from pathlib import Path; from ortplug.host.probing import run_probe_script; "
        "import ortplug_webgpu.probes as w; "
        "from ortplug.plugins.declaration import read_declaration; "
        "webgpu = read_declaration('webgpu', 'ortplug_webgpu.plugin:plugin'); "
        f"trt = run_probe_script(Path({_script(_TRT_QUERY)!r}), {{'major': 10, 'library_dirs': []}}); "
        f"nv = run_probe_script(Path({_script(_NV_QUERY)!r}), {{'cuda_major': 12, 'library_dirs': []}}); "
        "vk = run_probe_script(w._SCRIPT, {'phase': 'vulkan'}); "
        "print(json.dumps([trt, nv, vk, webgpu.probes[0].identity()]))"
    )
    done = _python(cwd, "-c", code, LD_LIBRARY_PATH=loader_path)
    assert done.returncode == 0, done.stderr
    assert _loaded(marker) == []
    trt, nv, _, identity = json.loads(done.stdout.splitlines()[-1])
    assert "library_error" in trt
    assert "driver_error" in nv
    assert all(os.path.isabs(path) for path, *_ in identity["files"])


def test_library_search_dirs_keep_only_absolute_folders() -> None:
    from ortplug.host.probing import library_search_dirs, probe_environment

    assert library_search_dirs(":/usr/local/lib:lib:.:/opt/x;/opt/y") == [
        "/usr/local/lib", "/opt/x", "/opt/y"
    ]  # fmt: skip
    assert library_search_dirs(None) == []
    env = probe_environment({"LD_LIBRARY_PATH": ":", "DYLD_LIBRARY_PATH": "a:/b", "HOME": "/h"})
    assert env == {"DYLD_LIBRARY_PATH": "/b", "HOME": "/h"}


def test_installed_wheel_folders_are_still_searched(tmp_path, monkeypatch) -> None:
    """A site-packages folder on sys.path is searched; the cwd and relative entries are not."""
    import site
    import sysconfig  # imported before sys.path is replaced

    from ortplug_cuda.probes import nvidia_library_dirs
    from ortplug_tensorrt.probes import tensorrt_library_dirs

    site_dir = tmp_path / "site-packages"
    for folder in ("tensorrt_libs", "nvidia/cudnn/lib"):
        (site_dir / folder).mkdir(parents=True)
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(site_dir)])
    monkeypatch.setattr(sysconfig, "get_path", lambda name: str(site_dir))
    monkeypatch.setattr(sys, "path", ["", ".", str(tmp_path), str(site_dir)])
    assert tensorrt_library_dirs() == [str(site_dir / "tensorrt_libs")]
    assert nvidia_library_dirs() == [str(site_dir / "nvidia/cudnn/lib")]
    assert tensorrt_library_dirs(["", "."]) == []  # an explicit relative entry is skipped too
