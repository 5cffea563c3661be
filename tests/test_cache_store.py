"""The one record store (issue 29, item 5): bad JSON, another schema, an untrusted file or folder
are one warning and an ignored record, never an error nor a rewrite; writes are atomic; a record
read is touched; and the record kinds built on it apply the same trust check."""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

import attrs
import models
import pytest
from ortplug import InMemoryCheckpoint
from ortplug.cache import index as cache_index
from ortplug.cache.store import RecordStore
from ortplug.errors import CacheError, OrtplugCacheWarning
from ortplug.selection.autotune import TunedSetting, lookup, save

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
STORE = RecordStore("verify", 7, "test record", "it is made again")


@attrs.frozen
class _Point:
    x: int
    label: str


def _point(record: dict[str, Any]) -> _Point:
    if set(record) != {"schema", "x", "label"} or not isinstance(record["x"], int):
        raise ValueError(f"x {str(record.get('x'))[:20]!r} is not a whole number")
    return _Point(record["x"], str(record["label"]))


def _saved(ortplug_cache: Path) -> Path:
    path = STORE.save("k1", _Point(3, "three"))
    assert path == ortplug_cache / "verify" / "k1.json"
    return path


def test_a_record_is_saved_with_its_schema_and_read_back(ortplug_cache: Path) -> None:
    path = _saved(ortplug_cache)
    assert json.loads(path.read_text()) == {"schema": 7, "x": 3, "label": "three"}
    assert STORE.load("k1", _point) == _Point(3, "three")
    assert STORE.load("absent", _point) is None


@pytest.mark.parametrize(
    ("content", "defect"),
    [
        ("{not json", "Expecting property name"),
        ('{"schema": 6, "x": 3, "label": "three"}', r"not an ortplug test record \(schema 7\)"),
        ('{"schema": true, "x": 3, "label": "three"}', r"not an ortplug test record \(schema 7\)"),
        ("[7]", r"not an ortplug test record \(schema 7\)"),
        ('{"schema": 7, "x": "3", "label": "three"}', "x '3' is not a whole number"),
        ("[" * 30_000, "nested too deeply"),
    ],
)
def test_a_bad_record_is_one_warning_and_left_as_it_is(
    ortplug_cache: Path, content: str, defect: str
) -> None:
    path = _saved(ortplug_cache)
    path.write_text(content)
    with pytest.warns(
        OrtplugCacheWarning, match=f"ignoring test record {path}: .*{defect}"
    ) as seen:
        assert STORE.load("k1", _point) is None
    assert len([w for w in seen if issubclass(w.category, OrtplugCacheWarning)]) == 1
    assert "\n" not in str(seen[0].message)
    assert path.read_text() == content  # never rewritten nor removed by a read


def test_a_quiet_store_logs_a_bad_record_instead_of_warning(ortplug_cache: Path, caplog) -> None:
    quiet = attrs.evolve(STORE, warn=False)
    _saved(ortplug_cache).write_text("{not json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with caplog.at_level(logging.DEBUG, logger="ortplug"):
            assert quiet.load("k1", _point) is None
    assert "test record" in caplog.text and "ignored" in caplog.text


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_record_file_every_user_can_write_is_ignored(ortplug_cache: Path) -> None:
    path = _saved(ortplug_cache)
    path.chmod(0o666)
    with pytest.warns(OrtplugCacheWarning, match="is writable by every user"):
        assert STORE.load("k1", _point) is None


def test_a_record_that_is_a_symbolic_link_is_never_followed(ortplug_cache: Path, tmp_path) -> None:
    path = _saved(ortplug_cache)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(path.read_text())
    path.unlink()
    path.symlink_to(elsewhere)
    with pytest.warns(OrtplugCacheWarning, match="is a symbolic link"):
        assert STORE.load("k1", _point) is None


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_folder_every_user_can_write_is_not_read(ortplug_cache: Path) -> None:
    folder = _saved(ortplug_cache).parent
    folder.chmod(0o777)
    try:
        with pytest.warns(OrtplugCacheWarning, match="is writable by every user"):
            assert STORE.load("k1", _point) is None
    finally:
        folder.chmod(0o700)


def test_a_write_replaces_a_record_in_one_step_and_leaves_no_temporary(
    ortplug_cache: Path,
) -> None:
    path = _saved(ortplug_cache)
    before = path.stat().st_ino
    STORE.save("k1", {"x": 4, "label": "four"})
    assert STORE.load("k1", _point) == _Point(4, "four")
    assert path.stat().st_ino != before  # a new file renamed over the old one, not rewritten
    (path.parent / "k2.json").mkdir()  # what os.replace cannot replace
    with pytest.raises(CacheError, match="cannot write ortplug cache file .*k2.json"):
        STORE.save("k2", {"x": 5, "label": "five"})
    assert sorted(p.name for p in path.parent.iterdir()) == ["k1.json", "k2.json"]


@pytest.mark.skipif(AS_ROOT, reason="root writes into a read-only folder")
def test_a_failed_write_keeps_the_old_record(ortplug_cache: Path) -> None:
    path = _saved(ortplug_cache)
    STORE.save("k1", {"x": 4, "label": "four"})
    path.parent.chmod(0o500)
    try:
        with pytest.raises(CacheError, match=f"cannot write ortplug cache file {path}"):
            STORE.save("k1", {"x": 5, "label": "five"})
        with pytest.warns(OrtplugCacheWarning, match="test record is not cached"):
            STORE.keep("k1", {"x": 5, "label": "five"})
    finally:
        path.parent.chmod(0o700)
    assert STORE.load("k1", _point) == _Point(4, "four")
    assert sorted(p.name for p in path.parent.iterdir()) == ["k1.json"]  # no temporary left


def test_a_key_is_one_plain_file_name(ortplug_cache: Path) -> None:
    with pytest.raises(
        ValueError, match=r"test record key: expected letters, digits, - or _, got '\.\./x'"
    ):
        STORE.save("../x", {"x": 1, "label": "one"})


def test_a_record_read_is_touched(ortplug_cache: Path) -> None:
    path = _saved(ortplug_cache)
    os.utime(path, (1_000_000, 1_000_000))
    assert STORE.load("k1", _point) is not None
    assert path.stat().st_mtime > 1_000_000
    os.utime(path, (1_000_000, 1_000_000))
    path.write_text("{not json")
    os.utime(path, (1_000_000, 1_000_000))
    with pytest.warns(OrtplugCacheWarning):
        STORE.load("k1", _point)
    assert path.stat().st_mtime == 1_000_000  # an ignored record is not kept alive


def test_clear_removes_the_records_only(ortplug_cache: Path) -> None:
    path = _saved(ortplug_cache)
    (path.parent / "notes.txt").write_text("mine")
    assert STORE.clear() == 1
    assert [p.name for p in path.parent.iterdir()] == ["notes.txt"]


# -- the record kinds apply the one check (regression: a record file every user could write
#    was read, and listed as a valid entry by `ortplug cache list`/`prune`) -----------------------


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_an_autotune_record_every_user_can_write_is_ignored_and_listed_unreadable(
    plugin_host, ortplug_cache: Path
) -> None:
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    host = plugin_host.host_capabilities()
    path = save(checkpoint, host, TunedSetting(("cpu",), 1, 1.2, 0.01))
    assert lookup(checkpoint, host) is not None
    path.chmod(0o666)
    with pytest.warns(OrtplugCacheWarning, match=f"ignoring autotune record {path}: .*every user"):
        assert lookup(checkpoint, host) is None
    (listed,) = [e for e in cache_index.entries() if e.path == path]
    assert listed.stale == "unreadable"


def test_a_store_keeps_its_records_where_ortplug_cache_lists_them() -> None:
    with pytest.raises(ValueError, match="record folder: expected one of .*'verify'.*, got 'mine'"):
        RecordStore("mine", 1, "test record")


class _ClearAt:
    """An audit hook that runs ``ortplug cache clear``'s own function (the real removal) at the
    ``at``-th time the process lists or opens something under ``root``: the worst moment for the
    listing or the read it comes just before. Python cannot remove an audit hook: once the test
    is over, ``root`` is ``None`` and the hook does nothing."""

    def __init__(self) -> None:
        self.root: str | None = None
        self.at, self.seen, self.busy = -1, 0, False
        self.accesses: list[str] = []

    def arm(self, root: Path, at: int) -> None:
        self.root, self.at, self.seen, self.accesses = str(root), at, 0, []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.root is None or self.busy or event not in ("open", "os.scandir", "os.listdir"):
            return
        if not args or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        path = os.fsdecode(args[0])
        if not path.startswith(self.root):
            return
        self.accesses.append(f"{event} {path[len(self.root) :]}")
        if self.seen == self.at:
            self.busy = True
            try:
                cache_index.clear()
            finally:
                self.busy = False
        self.seen += 1


_CLEAR_AT = _ClearAt()


def test_a_cache_clear_at_any_moment_of_a_build_is_a_miss(ortplug_cache: Path) -> None:
    """Regression (issue 37, T8): a build raised ``FileNotFoundError`` when ``ortplug cache
    clear`` removed the autotune folder between its check and its listing (2 of 35,915 builds),
    and a record removed between its check and its read was warned about as a bad record. The
    clear is run at each of the build's accesses to the cache in turn: every build succeeds,
    and nothing is said (a record gone is a cache miss)."""
    import sys

    from ortplug import OnnxBackend
    from ortplug.plugin_host.manager import get_plugin_host, reset_plugin_host

    sys.addaudithook(_CLEAR_AT)
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()

    def warmed() -> None:  # the plugin scan, probe facts and an autotune record all cached
        reset_plugin_host()
        host = get_plugin_host().host_capabilities()
        save(checkpoint, host, TunedSetting(("cpu",), 1, 1.8, 0.01))

    for fresh_host in (False, True):
        warmed()
        _CLEAR_AT.arm(ortplug_cache, -1)  # count the accesses of a build without clearing
        if fresh_host:
            reset_plugin_host()
        OnnxBackend.from_checkpoint(checkpoint)
        accesses, _CLEAR_AT.root = list(_CLEAR_AT.accesses), None
        listed = "os.scandir /autotune"
        assert listed in accesses and any(a.startswith("open /autotune/") for a in accesses)
        assert fresh_host is any(a.startswith("open /probes/") for a in accesses)
        for at in range(len(accesses)):
            warmed()
            if fresh_host:
                reset_plugin_host()
            _CLEAR_AT.arm(ortplug_cache, at)
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    backend = OnnxBackend.from_checkpoint(checkpoint)
            finally:
                _CLEAR_AT.root = None
            said = [str(w.message) for w in caught if w.category is OrtplugCacheWarning]
            assert said == [], (accesses[at], said)
            assert backend.providers == ("CPUExecutionProvider",)
