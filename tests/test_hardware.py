"""Hardware detection from plain files under a fake root: GPUs, drivers, macOS, Vulkan, CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import fake_roots
import pytest
from ortplug.fit.catalog import load_catalog
from ortplug.fit.hardware import HARDWARE_ROOT_ENV, Hardware, detect_hardware

_LINUX = {"ORTPLUG_OVERRIDE_PLATFORM": "linux", "ORTPLUG_OVERRIDE_MACHINE": "x86_64"}
#: The facts the shipped manifests say how to read from files (the cuda and webgpu probes').
DRIVER, LOADER = "cuda.driver_version", "webgpu.vulkan_loader"


def test_nvidia_gpu_with_its_driver_read_as_the_cuda_manifest_says(tmp_path: Path) -> None:
    hw = detect_hardware(fake_roots.nvidia(tmp_path), _LINUX)
    (gpu,) = hw.gpus()
    assert (gpu.vendor_name, gpu.device, gpu.describe()) == ("NVIDIA", 0x2335, "NVIDIA H200")
    assert (hw.fact(DRIVER), hw.said(DRIVER)) == ("580.65.06", "NVIDIA driver 580.65.06")


def test_a_real_h200_hosts_files(tmp_path: Path) -> None:
    hw = detect_hardware(fake_roots.h200(tmp_path), _LINUX)
    assert [g.describe() for g in hw.gpus()] == ["NVIDIA H200"]
    assert (hw.fact(DRIVER), hw.cpu_vendor) == ("580.159.04", "GenuineIntel")
    assert hw.fact(LOADER) is None and hw.render_nodes == ()


def test_the_open_kernel_modules_version_line(tmp_path: Path) -> None:
    line = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build\n"
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text(line)
    hw = detect_hardware(tmp_path, _LINUX)
    assert hw.fact(DRIVER) == "575.57.08"


def test_an_nvidia_gpu_without_its_driver_is_seen_by_pci_id_alone(tmp_path: Path) -> None:
    hw = detect_hardware(fake_roots.nvidia(tmp_path, driver=None), _LINUX)
    assert [g.describe() for g in hw.gpus()] == ["NVIDIA GPU 0x2335"]
    assert hw.fact(DRIVER) is None and DRIVER not in hw.facts


@pytest.mark.parametrize(
    ("driver", "install"),
    [("580.65.06", "ortplug[cuda]"), ("590.1", "ortplug[cuda]"), ("579.99", "ortplug[cuda12]"),
     ("525.60.13", "ortplug[cuda12]"), ("470.1", None), ("440.1", None),
     (None, "ortplug[cuda]")],
)  # fmt: skip
def test_driver_branches_pick_the_install_the_cuda_manifest_needs(
    driver: str | None, install: str | None
) -> None:
    """NVIDIA's minimum driver per CUDA major is the cuda manifest's (needs: driver 580 for the
    CUDA 13 build, 525 for CUDA 12), not a table in the core; no driver seen: the first."""
    (entry,) = [e for e in load_catalog({}, installed=False) if e.name == "cuda"]
    hw = Hardware(platform="linux", machine="x86_64", facts={DRIVER: driver} if driver else {})
    chosen = entry.install_for(hw)
    assert (chosen.install if chosen else None) == install


def test_amd_gpu_with_vulkan(tmp_path: Path) -> None:
    hw = detect_hardware(fake_roots.amd_gpu(tmp_path), _LINUX)
    assert [g.vendor_name for g in hw.gpus()] == ["AMD"]
    assert hw.fact(LOADER) == "/usr/lib/x86_64-linux-gnu/libvulkan.so.1"
    assert hw.said(LOADER) == "Vulkan loader"
    assert hw.vulkan_icds == ("lvp_icd.x86_64.json", "radeon_icd.x86_64.json")
    assert hw.render_nodes == ("renderD128",)
    assert hw.fact(DRIVER) is None


def test_intel_gpu_npu_and_cpu(tmp_path: Path) -> None:
    hw = detect_hardware(fake_roots.intel_gpu(tmp_path), _LINUX)
    assert [g.vendor_name for g in hw.gpus()] == ["Intel"]
    assert hw.to_dict()["accelerators"] == ["Intel accelerator 0x7d1d"]
    assert hw.cpu_vendor == "GenuineIntel"
    assert {"avx2", "avx512_vnni"} <= hw.cpu_flags


def test_apple_silicon_from_the_system_version_file(tmp_path: Path) -> None:
    env = {"ORTPLUG_OVERRIDE_PLATFORM": "darwin", "ORTPLUG_OVERRIDE_MACHINE": "arm64"}
    hw = detect_hardware(fake_roots.apple_silicon(tmp_path, "14.5"), env)
    assert (hw.platform, hw.machine, hw.macos_version) == ("darwin", "arm64", "14.5")
    assert hw.pci == () and hw.cpu_vendor is None


def test_vulkan_only_host_has_a_render_node_and_no_pci_gpu(tmp_path: Path) -> None:
    hw = detect_hardware(fake_roots.vulkan_only(tmp_path), _LINUX)
    assert hw.gpus() == ()
    assert hw.render_nodes == ("renderD128",)
    assert hw.vulkan_icds == ("panfrost_icd.aarch64.json",)
    assert hw.cpu_vendor == "0x41" and "asimddp" in hw.cpu_flags


def test_bare_cpu_host(tmp_path: Path) -> None:
    hw = detect_hardware(fake_roots.bare_cpu(tmp_path), _LINUX)
    assert hw.gpus() == () and hw.render_nodes == () and hw.fact(LOADER) is None
    assert [d.vendor_name for d in hw.pci] == ["Intel", "virtio"]  # host bridge, NIC
    assert (hw.cpu_vendor, hw.macos_version, hw.facts) == ("AuthenticAMD", None, {})


def test_an_empty_or_missing_root_sees_nothing_and_never_raises(tmp_path: Path) -> None:
    hw = detect_hardware(tmp_path / "absent", _LINUX)
    assert hw.to_dict() == {
        "platform": "linux", "machine": "x86_64", "gpus": [], "accelerators": [],
        "render_nodes": [], "facts": {}, "macos_version": None,
        "vulkan_icds": [], "cpu_vendor": None, "cpu_flags": [],
    }  # fmt: skip


def test_unreadable_and_malformed_files_are_skipped(tmp_path: Path) -> None:
    fake_roots.pci(tmp_path, "0000:01:00.0", 0x10DE, 0x2335, 0x030200)
    (tmp_path / "sys/bus/pci/devices/0000:01:00.0/class").write_text("not hex\n")
    plist = tmp_path / "System/Library/CoreServices/SystemVersion.plist"
    plist.parent.mkdir(parents=True)
    plist.write_text("<not a plist")
    hw = detect_hardware(tmp_path, _LINUX)
    assert hw.pci == () and hw.macos_version is None


def test_the_root_comes_from_the_environment(tmp_path: Path) -> None:
    env = {**_LINUX, HARDWARE_ROOT_ENV: str(fake_roots.nvidia(tmp_path))}
    assert detect_hardware(environ=env).fact(DRIVER) == "580.65.06"


@pytest.mark.parametrize(("value", "expected"), [(" darwin ", "darwin"), ("  ", None)])
def test_platform_overrides_read_as_the_host_facts_read_them(
    tmp_path: Path, value, expected
) -> None:
    """The hardware scan and the host facts took ``ORTPLUG_OVERRIDE_PLATFORM`` by two rules."""
    import sys
    import warnings

    from ortplug.testing import make_plugin_host

    environ = {"ORTPLUG_OVERRIDE_PLATFORM": value}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hardware = detect_hardware(tmp_path, environ).platform
        host = make_plugin_host(environ=environ).host_capabilities().platform
    assert hardware == host == (expected or sys.platform)
    blank = [w for w in caught if "ORTPLUG_OVERRIDE_PLATFORM" in str(w.message)]
    assert bool(blank) is (expected is None)


_ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b"  # retitle the terminal, clear it, a C1 CSI


def test_names_read_from_the_root_are_printable(tmp_path: Path) -> None:
    """A GPU model, CPU vendor, render node or ICD name with terminal escapes comes out as
    ``?`` marks: ``doctor`` prints them."""
    root = fake_roots.nvidia(tmp_path)
    (root / "proc/driver/nvidia/gpus/0000:19:00.0/information").write_text(
        f"Model: \t NVIDIA H200{_ESCAPES}\n"
    )
    (root / "proc/cpuinfo").write_text(
        f"vendor_id\t: Authentic{_ESCAPES}AMD\nflags\t\t: a{_ESCAPES}\n"
    )
    fake_roots.vulkan(root, f"x{_ESCAPES}.json")
    (root / f"sys/class/drm/renderD128{_ESCAPES}").mkdir(parents=True)
    hw = detect_hardware(root, _LINUX)
    assert [g.describe() for g in hw.gpus()] == ["NVIDIA H200?]0;owned??[2J?"]
    assert (hw.cpu_vendor, hw.cpu_flags) == ("Authentic?]0;owned??[2J?AMD", {"a?]0;owned??[2J?"})
    assert hw.vulkan_icds == ("x?]0;owned??[2J?.json",)
    assert hw.render_nodes == ("renderD128?]0;owned??[2J?",)
    assert not any(c in hw.describe() + str(hw.to_dict()) for c in "\x1b\x07\x9b")


def test_bidi_and_zero_width_characters_in_names_print_as_marks(tmp_path: Path) -> None:
    """A right-to-left override (U+202E), a zero-width space (U+200B) and a left-to-right
    isolate (U+2066) in a GPU name printed as they are (``doctor --fix`` showed the name
    reversed, as another); other letters beyond ASCII stay as they are."""
    root = fake_roots.nvidia(tmp_path)
    name = "NVIDIA \u202eH200 gnirts\u200b\u2066X \u00dcn\u00ef\u2122 \u3164"
    information = root / "proc/driver/nvidia/gpus/0000:19:00.0/information"
    information.write_text(f"Model: {name}\n", encoding="utf-8")
    shown = "NVIDIA ?H200 gnirts??X \u00dcn\u00ef\u2122 ?"
    assert [g.describe() for g in detect_hardware(root, _LINUX).gpus()] == [shown]
    done = subprocess.run(
        [sys.executable, "-m", "ortplug.cli.main", "doctor", "--fix"], capture_output=True,
        encoding="utf-8", env={**os.environ, **_LINUX, HARDWARE_ROOT_ENV: str(root)}, timeout=300,
    )  # fmt: skip
    assert done.stdout.startswith(f"hardware  linux x86_64: {shown}, NVIDIA driver"), done.stdout


_DETECT = "from ortplug.fit.hardware import detect_hardware as d; print(d({!r}).to_dict())"


def _detect_in_a_child(root: Path) -> subprocess.CompletedProcess[str]:
    """``detect_hardware(root)`` in a process held to 2 GiB of memory and 60 s."""

    def limit_memory() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run(
        [sys.executable, "-c", _DETECT.format(str(root))], capture_output=True, text=True,
        timeout=60, preexec_fn=limit_memory,
    )  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and /dev/zero")
@pytest.mark.timeout(120)
def test_only_plain_files_are_read_and_only_so_much(tmp_path: Path) -> None:
    """A FIFO (no writer: opening it waited forever) and ``/dev/zero`` (never ends: read whole,
    it raised MemoryError) under the root are not seen; a huge file is read only so far."""
    root = fake_roots.nvidia(tmp_path / "fifo")
    (root / "proc/cpuinfo").unlink()
    os.mkfifo(root / "proc/cpuinfo")
    started = time.perf_counter()
    try:
        done = _detect_in_a_child(root)
    except subprocess.TimeoutExpired:
        pytest.fail("a FIFO as proc/cpuinfo made the hardware scan wait for a writer")
    assert done.returncode == 0, done.stderr
    assert "'cpu_vendor': None" in done.stdout and "'gpus': ['NVIDIA H200']" in done.stdout
    assert time.perf_counter() - started < 30

    root = fake_roots.nvidia(tmp_path / "zero")
    for relative in ("proc/cpuinfo", "proc/driver/nvidia/version"):
        (root / relative).unlink()
        (root / relative).symlink_to("/dev/zero")
    plist = root / "System/Library/CoreServices/SystemVersion.plist"
    plist.parent.mkdir(parents=True)
    plist.symlink_to("/dev/zero")
    done = _detect_in_a_child(root)
    assert done.returncode == 0, done.stderr[-500:]
    assert "'facts': {}" in done.stdout and "'cpu_vendor': None" in done.stdout

    huge = tmp_path / "huge" / "proc/cpuinfo"
    huge.parent.mkdir(parents=True)
    with huge.open("w") as file:
        file.write("vendor_id\t: GenuineIntel\nflags\t\t: avx2\n")
        file.truncate(64 << 30)  # sparse: 64 GB that take no room
    done = _detect_in_a_child(tmp_path / "huge")
    assert done.returncode == 0, done.stderr[-500:]
    assert "'cpu_vendor': 'GenuineIntel'" in done.stdout and "'cpu_flags': ['avx2']" in done.stdout


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_a_folder_where_a_file_is_read_is_not_seen_and_leaves_no_descriptor(
    tmp_path: Path,
) -> None:
    """``mkdir ROOT/proc/cpuinfo`` made ``doctor``, ``info`` and ``doctor --fix`` fail with
    ``error: [Errno 21] Is a directory`` (a folder opens, reading it raises), and the
    descriptor opened for it was never closed."""
    root = fake_roots.nvidia(tmp_path / "root")
    for relative in ("proc/cpuinfo", "proc/driver/nvidia/version"):
        (root / relative).unlink()
        (root / relative).mkdir()
    open_before = len(os.listdir("/proc/self/fd"))
    hw = detect_hardware(root, _LINUX)
    assert len(os.listdir("/proc/self/fd")) == open_before
    assert hw.cpu_vendor is None and hw.fact(DRIVER) is None
    assert [g.describe() for g in hw.gpus()] == ["NVIDIA H200"]
    for command in (["doctor"], ["info"], ["doctor", "--fix"]):
        done = subprocess.run(
            [sys.executable, "-m", "ortplug.cli.main", *command], capture_output=True, text=True,
            env={**os.environ, **_LINUX, HARDWARE_ROOT_ENV: str(root)}, timeout=300,
        )  # fmt: skip
        said = done.stdout + done.stderr
        assert "Errno" not in said and "onnxruntime-gpu[cuda" in done.stdout, (command, said)
