"""``ortplug cache``: every entry with what it belongs to; stale ones and the least recently used go."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import models
import onnxruntime
import pytest
from ortplug import LocalCheckpoint
from ortplug.cache.index import ENTRY_FILE, describe, entries, max_mb, prune
from ortplug.cache.root import cache_dir
from ortplug.errors import OptionError, OrtplugConfigWarning
from ortplug.selection import autotune
from ortplug.testing import make_host

ORT = onnxruntime.__version__


def _folder(name: str, size: int, age_s: float, **record: object) -> Path:
    folder = cache_dir("tensorrt", "engines", name)
    (folder / "model.engine").write_bytes(b"x" * size)
    (folder / ENTRY_FILE).write_text(json.dumps({"kind": "TensorRT engine", **record}))
    past = time.time() - age_s
    for path in [*folder.iterdir(), folder]:
        os.utime(path, (past, past))
    return folder


def test_a_record_whose_model_is_gone_is_stale_and_pruned(
    ortplug_cache: Path, tmp_path: Path
) -> None:
    model = tmp_path / "gone.onnx"
    model.write_bytes(models.add_model())
    checkpoint = LocalCheckpoint(model).resolve()
    setting = autotune.TunedSetting(("cpu",), 1, 1.5, 0.1)
    record = autotune.save(checkpoint, make_host(ort_version=ORT), setting)
    (entry,) = entries()
    assert entry.kind == "autotune record" and entry.stale is None and entry.model == str(model)
    model.unlink()
    (entry,) = entries()
    assert entry.stale == f"its model {model} is gone"
    assert [e.path for e in prune()] == [record]
    assert not record.exists()


def test_an_entry_for_another_onnx_runtime_is_stale(ortplug_cache: Path) -> None:
    old = _folder("old", 10, 0, ort_version="0.0.1")
    current = _folder("current", 10, 0, ort_version=ORT)
    stale = {e.path: e.stale for e in entries(runtime=ORT)}
    assert stale[old] == f"written for ONNX Runtime 0.0.1, {ORT} is installed"
    assert stale[current] is None
    assert all(e.stale is None for e in entries())  # no runtime told: none is another's
    prune(runtime=ORT)
    assert not old.exists() and current.exists()


def test_the_cap_removes_least_recently_used_first_never_one_in_use(ortplug_cache: Path) -> None:
    oldest = _folder("oldest", 400_000, age_s=3 * 86400)
    older = _folder("older", 400_000, age_s=2 * 86400)
    in_use = _folder("in-use", 400_000, age_s=5)
    removed = prune(limit_mb=0.5)  # 1.2 MB held, 0.5 MB allowed
    assert [e.path for e in removed] == [oldest, older]
    assert in_use.exists()  # over the cap still, but used minutes ago
    assert {e.path for e in entries()} == {in_use}


def test_an_unreadable_description_is_stale(ortplug_cache: Path) -> None:
    folder = _folder("broken", 10, 0)
    (folder / ENTRY_FILE).write_text("{not json")
    (entry,) = entries()
    assert entry.stale == "its description is unreadable"


def test_describe_records_model_and_runtime(ortplug_cache: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(models.add_model())
    folder = cache_dir("coreml", "key")
    describe(
        folder, kind="CoreML model", checkpoint=LocalCheckpoint(model).resolve(), ort_version=ORT
    )
    (entry,) = entries()
    assert (entry.kind, entry.model, entry.ort_version, entry.stale) == (
        "CoreML model",
        str(model),
        ORT,
        None,
    )


@pytest.mark.parametrize("value", ["lots", "-1", "nan", "inf", "1e400"])
def test_the_cap_variable_names_itself_when_wrong(value: str) -> None:
    assert max_mb({"ORTPLUG_CACHE_MAX_MB": "512"}) == 512.0
    assert max_mb({}) is None
    with pytest.raises(
        OptionError, match=r"ORTPLUG_CACHE_MAX_MB: expected a size in MB \(a finite"
    ):
        max_mb({"ORTPLUG_CACHE_MAX_MB": value})


def test_a_negative_zero_cap_is_zero() -> None:
    assert str(max_mb({"ORTPLUG_CACHE_MAX_MB": "-0"})) == "0.0"


def test_the_command_lists_prunes_and_clears(ortplug_cache: Path) -> None:
    _folder("old", 10, 0, ort_version="0.0.1")
    _folder("ok", 10, 0, ort_version=ORT)

    def cli(*args: str) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-m", "ortplug.cli.main", "cache", *args, "--json"],
            capture_output=True,
            text=True,
            env={**os.environ, "ORTPLUG_CACHE_DIR": str(ortplug_cache)},
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    listed = cli("list")["entries"]
    assert sorted(bool(e["stale"]) for e in listed) == [False, True]  # type: ignore[index, union-attr]
    assert len(cli("prune")["removed"]) == 1  # type: ignore[arg-type]
    assert cli("clear") == {"cleared": 1}
    assert cli("list")["entries"] == []


def test_with_a_cap_each_use_keeps_the_cache_under_it(ortplug_cache: Path, monkeypatch) -> None:
    oldest = _folder("oldest", 400_000, age_s=3 * 86400)
    older = _folder("older", 400_000, age_s=2 * 86400)
    fresh = cache_dir("tensorrt", "engines", "fresh")
    (fresh / "model.engine").write_bytes(b"x" * 400_000)
    describe(fresh, kind="TensorRT engine")  # no cap: nothing goes
    assert oldest.exists() and older.exists()
    monkeypatch.setenv("ORTPLUG_CACHE_MAX_MB", "0.9")  # 1.2 MB held
    describe(fresh, kind="TensorRT engine")
    assert not oldest.exists() and older.exists() and fresh.exists()


def test_a_bad_cap_warns_and_removes_nothing(ortplug_cache: Path, monkeypatch) -> None:
    old = _folder("old", 400_000, age_s=3 * 86400)
    monkeypatch.setenv("ORTPLUG_CACHE_MAX_MB", "lots")
    with pytest.warns(OrtplugConfigWarning, match="ORTPLUG_CACHE_MAX_MB: expected a size in MB"):
        describe(cache_dir("coreml", "key"), kind="CoreML model")
    assert old.exists()


def test_prune_says_why_what_is_left_is_still_over_the_cap(ortplug_cache: Path) -> None:
    old = _folder("old", 400_000, age_s=3 * 86400)
    _folder("in-use", 400_000, age_s=5)
    done = subprocess.run(
        [sys.executable, "-m", "ortplug.cli.main", "cache", "prune", "--max-mb", "0.1"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "ORTPLUG_CACHE_DIR": str(ortplug_cache)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(
        rf"removed 1 entry \(39\d\.\d KB\) from {re.escape(str(ortplug_cache))}", lines[0]
    )
    assert re.fullmatch(
        r"still 39\d\.\d KB, over 0\.1 MB: what is left was used in the last ten minutes, "
        r"and a running process may be reading it",
        lines[-1],
    )
    assert not old.exists()


def _command(cache: Path, *args: str, cap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ortplug.cli.main", *args],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "ORTPLUG_CACHE_DIR": str(cache), "ORTPLUG_CACHE_MAX_MB": cap},
    )  # fmt: skip


def test_the_listing_shows_the_cap_and_names_a_bad_one(ortplug_cache: Path) -> None:
    _folder("ok", 10, 0, ort_version=ORT)
    capped = _command(ortplug_cache, "cache", cap="512")
    assert capped.returncode == 0, capped.stderr
    assert capped.stdout.splitlines()[0].endswith(", 0 stale, capped at 512 MB")
    assert json.loads(_command(ortplug_cache, "cache", "--json", cap="512").stdout)["max_mb"] == 512
    bad = _command(ortplug_cache, "cache", cap="lots")
    assert bad.returncode == 0
    assert bad.stdout.splitlines()[0].endswith(", 0 stale")
    assert bad.stderr.strip() == (
        "ortplug: warning: ORTPLUG_CACHE_MAX_MB: expected a size in MB (a finite number >= 0), "
        "got 'lots'; the cache is not capped"
    )


def test_prune_warns_about_a_bad_cap_as_the_listing_does(ortplug_cache: Path) -> None:
    old = _folder("old", 400_000, age_s=3 * 86400, ort_version=ORT)
    done = _command(ortplug_cache, "cache", "prune", cap="lots")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith("got 'lots'; the cache is not capped")
    assert old.exists()
    refused = _command(ortplug_cache, "cache", "prune", "--max-mb", "inf", "--json", cap="")
    assert refused.returncode == 2
    assert "argument --max-mb: expected a finite number >= 0, got 'inf'" in refused.stderr


def test_doctor_fails_a_bad_cap_with_the_fix_and_still_checks_the_records(
    ortplug_cache: Path,
) -> None:
    records = ortplug_cache / "autotune"
    records.mkdir(parents=True)
    (records / "old.json").write_text(json.dumps({"schema": 1, "ort_version": "1.0.0"}))
    done = _command(ortplug_cache, "doctor", "--json", cap="lots")
    cap, stale = [c for c in json.loads(done.stdout)["checks"] if c["name"] == "cache"]
    assert cap == {
        "name": "cache",
        "ok": False,
        "detail": "ORTPLUG_CACHE_MAX_MB: expected a size in MB (a finite number >= 0), "
        "got 'lots'; the cache is not capped",
        "fix": "set ORTPLUG_CACHE_MAX_MB to a number of MB, or unset it for no cap",
        "plugin": "",
    }
    assert not stale["ok"] and stale["detail"].startswith("1 autotune record(s) from another")
