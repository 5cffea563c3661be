"""Hardened caches and environment: corrupt records, non-regular files, racing writers, unusable dirs.

Each test reproduces a finding that crashed, hung, lost data or lied on the
code before: a bad file or variable is named and ignored, never fatal.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import hosts
import models
import pytest
from ortplug import (
    CheckpointMetadata,
    DefaultProviderPolicy,
    InMemoryCheckpoint,
    LocalCheckpoint,
    OnnxBackend,
)
from ortplug.cache.root import (
    atomic_write,
    cache_problem,
    check_writable,
    read_cache_file,
)
from ortplug.cli._doctor import run_checks
from ortplug.errors import CacheError, CheckpointError, OrtplugCacheWarning, OrtplugConfigWarning
from ortplug.plugin_host.manager import get_plugin_host
from ortplug.selection.autotune import TunedSetting, lookup, save, stale_records
from ortplug.testing import make_plugin_host

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


def _checkpoint() -> Any:
    return InMemoryCheckpoint(models.add_model()).resolve()


def _cli(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORTPLUG, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=timeout
    )


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """Run ``call`` in a daemon thread; fail (instead of hanging the suite) if it blocks."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# --- 1. corrupt autotune records and metadata files --------------------------------------


def _set(**changes: Any) -> Callable[[dict[str, Any]], str]:
    def edit(record: dict[str, Any]) -> str:
        for key, value in changes.items():
            if key in ("schema", "host", "setting"):
                record[key] = value
            else:
                record["setting"][key] = value
        return json.dumps(record)

    return edit


CORRUPT = {
    "threads true": (_set(intra_op_num_threads=True), "intra_op_num_threads: expected a thread count .* got True"),
    "threads 400 digits": (_set(intra_op_num_threads=10**400), "intra_op_num_threads: expected .* got 1000"),
    "threads zero": (_set(intra_op_num_threads=0), "intra_op_num_threads: expected a thread count .* got 0;"),
    "speedup 400 digits": (_set(speedup=10**400), "speedup 1000.* is not a number"),
    "speedup bool": (_set(speedup=True), "speedup True is not a number"),
    "median NaN": (lambda r: json.dumps(r).replace("0.01", "NaN"), "NaN is not a finite number"),
    "median negative": (_set(median_ms=-1.0), "median_ms -1.0 is not a number"),
    "schema true": (_set(schema=True), "not an ortplug autotune record"),
    "chain empty": (_set(chain=[]), "chain \\[\\] is not a list"),
    "chain duplicates": (_set(chain=["cpu", "cpu"]), "distinct provider kinds"),
    "chain huge kind": (_set(chain=["x" * 5000]), "chain .*\\.\\.\\. is not a list"),
    "chain nested": (_set(chain=[[["cpu"]]]), "chain .* is not a list"),
    "setting list": (_set(setting=[1, 2]), "setting \\[1, 2\\] is not an object"),
    "setting missing": (lambda r: json.dumps({k: v for k, v in r.items() if k != "setting"}), "setting None"),
    "other host": (_set(host={"platform": "win32"}), "belongs to another host"),
    "deep nesting": (lambda r: "[" * 100_000 + "]" * 100_000, "too deeply|at most"),
    "deep nesting in bounds": (lambda r: "[" * 30_000, "nested too deeply"),
    "deep in setting": (_set(setting={"chain": ["cpu"], "x": json.loads("[" * 500 + "]" * 500)}), "intra_op|speedup"),
    "oversized": (lambda r: json.dumps(r) + " " * 100_000, "bytes, expected at most 65536"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CORRUPT), ids=list(CORRUPT))
def test_a_corrupt_record_is_named_ignored_and_never_fatal(plugin_host, case) -> None:
    edit, reason = CORRUPT[case]
    checkpoint = _checkpoint()
    path = save(checkpoint, plugin_host.host_capabilities(), TunedSetting(("cpu",), 1, 1.2, 0.01))
    path.write_text(edit(json.loads(path.read_text())))
    expected = rf"ignoring autotune record {re.escape(str(path))}: .*({reason})"
    with pytest.warns(OrtplugCacheWarning, match=expected):
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)
    assert not backend.chain_reasons[0][1].startswith("autotuned")  # the policy decided
    unreadable = case in ("deep nesting", "deep nesting in bounds", "oversized", "median NaN")
    assert stale_records(plugin_host.host_capabilities().ort_version) == (
        [path] if unreadable else []
    )


def test_a_deeply_nested_record_does_not_break_run_or_doctor(tmp_path) -> None:
    model = models.write(tmp_path, "m.onnx", models.add_model())
    host = get_plugin_host().host_capabilities()  # the one the CLI builds: same record name
    path = save(LocalCheckpoint(model).resolve(), host, TunedSetting(("cpu",), 1, 1.2, 0.01))
    path.write_text("[" * 20_000 + "]" * 20_000)
    run = _cli("run", str(model), "--json", "--repeat", "1")
    assert run.returncode == 0, run.stderr
    assert f"ignoring autotune record {path}" in run.stderr
    assert "RecursionError" not in run.stderr
    doctor = _cli("doctor", "--json")
    cache = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["cache"]
    assert not cache["ok"] and str(path) in cache["fix"]


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"input_names": ["a"], "output_names": ["y"], "extra": {"x": '
        + "[" * 990
        + "]" * 990
        + "}}",
    ],
    ids=["unparseable", "deep extra"],
)
def test_a_deeply_nested_metadata_file_is_a_checkpoint_error_naming_it(tmp_path, text) -> None:
    model = models.write(tmp_path, "m.onnx", models.add_model())
    meta = tmp_path / "m.metadata.json"
    meta.write_text(text)
    with pytest.raises(CheckpointError, match=re.escape(str(meta))):
        LocalCheckpoint(model).resolve()


# --- 2. non-regular files are never opened -----------------------------------------------


@needs_fifo
def test_a_fifo_in_the_cache_is_listed_not_opened(ortplug_cache) -> None:
    folder = ortplug_cache / "autotune"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "pipe.json")
    (folder / "dir.json").mkdir()
    stale = _within(10, lambda: stale_records("1.0"))
    assert stale == [folder / "dir.json", folder / "pipe.json"]
    with pytest.raises(CacheError, match="is a FIFO, expected a regular file"):
        _within(10, lambda: read_cache_file(folder / "pipe.json"))


@needs_fifo
def test_doctor_does_not_hang_on_a_fifo(tmp_path) -> None:
    (tmp_path / "autotune").mkdir()
    os.mkfifo(tmp_path / "autotune" / "pipe.json")
    done = _cli("doctor", "--json", timeout=60, ORTPLUG_CACHE_DIR=str(tmp_path))
    cache = {c["name"]: c for c in json.loads(done.stdout)["checks"]}["cache"]
    assert not cache["ok"] and "pipe.json" in cache["fix"]


@needs_fifo
def test_a_fifo_at_the_record_name_is_named_and_ignored(plugin_host) -> None:
    checkpoint, host = _checkpoint(), plugin_host.host_capabilities()
    path = save(checkpoint, host, TunedSetting(("cpu",), 1, 1.2, 0.01))
    path.unlink()
    os.mkfifo(path)
    with pytest.warns(
        OrtplugCacheWarning, match=f"ignoring autotune record {re.escape(str(path))}: .*FIFO"
    ):
        assert _within(10, lambda: lookup(checkpoint, host)) is None


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_link_to_a_device_is_refused(tmp_path) -> None:
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(CacheError, match="is a character device, expected a regular file"):
        read_cache_file(link)
    (tmp_path / "big.json").write_bytes(b" " * 2048)
    with pytest.raises(CacheError, match="has 2048 bytes, expected at most 1024"):
        read_cache_file(tmp_path / "big.json", max_bytes=1024)


# --- 3. one atomic writer -----------------------------------------------------------------


def test_racing_savers_lose_nothing_and_readers_never_see_a_partial_record(plugin_host) -> None:
    checkpoint, host = _checkpoint(), plugin_host.host_capabilities()
    folder = save(checkpoint, host, TunedSetting(("cpu",), 1, 1.0, 0.5)).parent
    stop = threading.Event()
    seen: list[TunedSetting | None] = []

    def read() -> None:
        while not stop.is_set():
            seen.append(lookup(checkpoint, host))

    def write(worker: int) -> None:
        for step in range(40):
            save(checkpoint, host, TunedSetting(("cpu",), 1 + worker, 1.0 + step, 0.5))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = threading.Thread(target=read)
        reader.start()
        try:
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(write, range(8)))  # re-raises any writer's error
        finally:
            stop.set()
            reader.join(30)
    assert [w for w in caught if issubclass(w.category, OrtplugCacheWarning)] == []
    assert seen and all(s is not None for s in seen)  # the record never vanished mid-replace
    final = lookup(checkpoint, host)
    assert final is not None and final.speedup == 40.0  # every writer's last save was whole
    assert [p.name for p in folder.iterdir()] == [final_name(folder)]  # no temp file left


def final_name(folder: Path) -> str:
    (name,) = [p.name for p in folder.glob("*.json")]
    return name


_WRITER = """
import sys
from ortplug.cache.root import atomic_write
path, char = sys.argv[1], sys.argv[2]
for _ in range(150):
    atomic_write(path, char * 65536)
"""


def test_racing_processes_leave_one_whole_file(tmp_path) -> None:
    target = tmp_path / "record.json"
    atomic_write(target, "0" * 65536)
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(target), char]) for char in "abcd"
    ]
    reads = 0
    while any(w.poll() is None for w in writers) and reads < 5000:
        data = read_cache_file(target)
        assert len(data) == 65536 and len(set(data)) == 1, "a reader saw a partial file"
        reads += 1
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0, 0]
    assert read_cache_file(target) in {c.encode() * 65536 for c in "abcd"}
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]  # no temp file left behind


@pytest.mark.skipif(os.name != "posix", reason="directory fsync is POSIX only")
def test_atomic_write_syncs_the_file_and_its_directory(tmp_path, monkeypatch) -> None:
    synced: list[bool] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic_write(tmp_path / "a.json", b"{}")
    assert synced == [False, True]  # the data first, then the rename


def test_a_failed_write_names_the_file_and_leaves_no_temp(tmp_path) -> None:
    (tmp_path / "a.json").mkdir()  # os.replace cannot put a file over a directory
    with pytest.raises(
        CacheError, match=f"cannot write ortplug cache file {re.escape(str(tmp_path / 'a.json'))}"
    ):
        atomic_write(tmp_path / "a.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
    with pytest.raises(CacheError, match="ORTPLUG_CACHE_DIR"):
        atomic_write(tmp_path / "missing" / "a.json", "{}")


# --- 4. an unusable cache is found early -------------------------------------------------


@pytest.fixture
def _undo_immutable() -> Any:
    """Folders made immutable (root ignores permission bits) are made mutable again after the test."""
    made: list[Path] = []
    yield made
    for folder in made:
        subprocess.run(["chattr", "-i", str(folder)], check=False)


def _unusable(kind: str, root: Path, immutable: list[Path]) -> Path:
    """Make ``root/autotune`` unusable in one way; returns the path doctor should name."""
    root.mkdir(parents=True, exist_ok=True)
    folder = root / "autotune"
    if kind == "file":
        folder.write_text("")
    elif kind == "loop":
        folder.symlink_to(root / "loop")
        (root / "loop").symlink_to(folder)
    elif kind == "dangling":
        folder.symlink_to(root / "nowhere")
    elif kind == "read-only":
        folder.mkdir()
        folder.chmod(0o555)
        if AS_ROOT:  # root writes through permission bits, not into an immutable folder
            subprocess.run(["chattr", "+i", str(folder)], check=True)
            immutable.append(folder)
    return folder


UNUSABLE = {
    "file": "is not a directory",
    "loop": "cannot be used \\(Too many levels of symbolic links\\)",
    "dangling": "is a symbolic link to a missing target",
    "read-only": "is not writable \\(.+\\)",
}


@pytest.mark.parametrize("kind", list(UNUSABLE))
def test_doctor_flags_an_unusable_autotune_folder(
    plugin_host, ortplug_cache, kind, _undo_immutable
) -> None:
    folder = _unusable(kind, ortplug_cache, _undo_immutable)
    assert re.fullmatch(
        f"{re.escape(str(folder))} {UNUSABLE[kind]}", cache_problem("autotune") or ""
    )
    checks = {check.name: check for check in run_checks(plugin_host)}
    assert not checks["cache"].ok
    assert re.search(UNUSABLE[kind], checks["cache"].detail)
    assert checks["cache"].fix == "set ORTPLUG_CACHE_DIR to a writable directory"
    with pytest.raises(CacheError, match="set ORTPLUG_CACHE_DIR to a writable directory"):
        check_writable("autotune")


def test_a_missing_cache_is_usable_and_checking_creates_nothing(tmp_path) -> None:
    root = tmp_path / "not" / "yet"
    assert cache_problem("autotune", environ={"ORTPLUG_CACHE_DIR": str(root)}) is None
    assert check_writable("x", environ={"ORTPLUG_CACHE_DIR": str(root)}) == root / "x"
    assert list(tmp_path.iterdir()) == []
    root.mkdir(parents=True)
    assert cache_problem(environ={"ORTPLUG_CACHE_DIR": str(root)}) is None
    assert list(root.iterdir()) == []  # the write test cleaned up after itself


def test_bench_save_fails_before_benchmarking(tmp_path) -> None:
    model = models.write(tmp_path, "mm.onnx", models.matmul_model())
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = _cli("bench", str(model), "--save", "--rounds", "100000", "--threads", "1",
                timeout=60, ORTPLUG_CACHE_DIR=str(blocker))  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{blocker} is not a directory" in lines[0]
    assert "set ORTPLUG_CACHE_DIR to a writable directory" in lines[0]


@pytest.mark.parametrize("kind", ["file", "loop"])
def test_tensorrt_is_declined_with_the_fix_when_its_cache_is_unusable(
    monkeypatch, ortplug_cache, kind
) -> None:
    plugins = make_plugin_host("cuda", "tensorrt")
    metadata = CheckpointMetadata(input_names=["x"], output_names=["y"], extra={"tensorrt": True})
    policy = DefaultProviderPolicy(plugins)
    chosen = policy.explain(metadata, hosts.linux_gpu_tensorrt())
    assert chosen.chain[0].kind == "tensorrt"  # a usable cache: opted in, offered
    ortplug_cache.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        blocker = ortplug_cache / "blocker"
        blocker.write_text("")
        monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(blocker))
    else:
        (ortplug_cache / "tensorrt").symlink_to(ortplug_cache / "tensorrt")
    selection = policy.explain(metadata, hosts.linux_gpu_tensorrt())
    assert [c.kind for c in selection.chain] == ["cuda", "cpu"]
    reason = selection.decline_reasons()["tensorrt"]
    assert reason.startswith("the TensorRT engines cache cannot be written (")
    assert "set ORTPLUG_CACHE_DIR to a writable directory" in reason


def test_coreml_runs_without_its_model_cache_when_the_cache_is_unusable(
    monkeypatch, tmp_path
) -> None:
    from ortplug_coreml import CoreMLProvider

    plugins = make_plugin_host("coreml")
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(blocker))
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    with pytest.warns(
        OrtplugCacheWarning, match="CoreML compiles .* again for every session: .*ORTPLUG_CACHE_DIR"
    ):
        prepared = plugins.prepare_provider(CoreMLProvider(), checkpoint, hosts.mac("arm64"))
    assert prepared.model_cache is False and prepared.model_cache_directory is None


# --- 6. bad ORTPLUG_OVERRIDE_* values: one warning, exit 0 --------------------------------


def _one_warning(done: subprocess.CompletedProcess[str], variable: str) -> None:
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if f"ignoring {variable}=" in line]
    assert len(warned) == 1, done.stderr


BAD_ENV = {
    "ORTPLUG_OVERRIDE_PLATFORM": "",
    "ORTPLUG_OVERRIDE_CPU_USABLE_CPUS": "four",
}


@pytest.mark.parametrize("variable", list(BAD_ENV))
def test_info_and_bench_survive_a_bad_override(tmp_path, variable) -> None:
    env = {variable: BAD_ENV[variable]}
    info = subprocess.run(
        [sys.executable, "-m", "ortplug.cli.main", "info"],
        capture_output=True, text=True, timeout=120, env={**os.environ, **env},
    )  # fmt: skip
    _one_warning(info, variable)
    model = models.write(tmp_path, "mm.onnx", models.matmul_model())
    bench = _cli("bench", str(model), "--providers", "cpu", "--rounds", "1", "--calls", "1", **env)
    _one_warning(bench, variable)


def test_plugin_probes_declare_the_type_of_their_facts() -> None:
    env = {
        "ORTPLUG_OVERRIDE_CPU_USABLE_CPUS": "true",
        "ORTPLUG_OVERRIDE_CUDA_DEVICE_COUNT": '"two"',
        "ORTPLUG_OVERRIDE_CUDA_DEVICES": "3",
        "ORTPLUG_OVERRIDE_TENSORRT_VERSION": "[10]",
        "ORTPLUG_OVERRIDE_COREML_APPLE_SILICON": "1",
        # well-typed values still apply
        "ORTPLUG_OVERRIDE_CUDA_DRIVER_CUDA_VERSION": "12.4",
        "ORTPLUG_OVERRIDE_COREML_MACOS_VERSION": '"14.5"',
        "ORTPLUG_OVERRIDE_CPU_ISA_FLAGS": '["avx2"]',
    }
    plugins = make_plugin_host("cuda", "tensorrt", "coreml", environ=env)
    with pytest.warns(OrtplugConfigWarning) as caught:
        host = plugins.host_capabilities()
    named = sorted(
        str(w.message).partition("=")[0].removeprefix("ignoring ")
        for w in caught
        if issubclass(w.category, OrtplugConfigWarning)
    )
    assert named == sorted(list(env)[:5])
    assert isinstance(host.fact("cpu", "usable_cpus"), int)
    assert host.fact("cuda", "driver_cuda_version") == 12.4
    assert host.fact("coreml", "macos_version") == "14.5"
    assert host.fact("cpu", "isa_flags") == ["avx2"]
