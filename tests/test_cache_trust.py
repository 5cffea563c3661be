"""The cache as untrusted input (issue 24, items 23 and 27): a planted entry-point row never makes
ortplug import a module, planted probe facts are refused, a folder other users can write is not
used, and an unusable cache folder is one warning, never a failed run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from ortplug import HostProbe, LocalCheckpoint, OnnxBackend, PluginHost, Verification, hookimpl
from ortplug.cache import index as cache_index
from ortplug.cache.root import cache_dir, read_marker, trusted_folder
from ortplug.errors import CacheError, OrtplugCacheWarning, VerificationWarning
from ortplug.plugin_host import entry_points as _entry_points
from ortplug.testing import demo_model, make_plugin_host
from variant_models import INT8_ACCEPTED, mlp_with_variants, set_tolerance

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
VNNI = {"ORTPLUG_OVERRIDE_CPU_ISA_FLAGS": '["avx2", "avx512_vnni"]'}
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# -- a planted entry-point row --------------------------------------------------------------------


@pytest.fixture
def planted_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A module on sys.path that leaves a file behind when it is imported."""
    folder = tmp_path / "site"
    folder.mkdir()
    imported = tmp_path / "imported"
    (folder / "planted_zen.py").write_text(f"open({str(imported)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(folder))
    yield imported
    sys.modules.pop("planted_zen", None)


def _record(cache: Path) -> Path:
    (record,) = (cache / "entry-points").glob("*.json")
    return record


@pytest.mark.parametrize(
    "row",
    [
        ["planted", "planted_zen", None, None, "{declaration}"],  # a real file, not declaring it
        ["planted", "planted_zen", None, None, "/tmp/x.dist-info/entry_points.txt"],
        ["planted", "planted_zen", None, None],  # the earlier form, without a declaration
    ],
)
def test_a_planted_entry_point_row_is_never_imported(ortplug_cache, planted_module, row) -> None:
    real = {point.name for point in _entry_points.discover("ortplug")}
    record = _record(ortplug_cache)
    scan = json.loads(record.read_text())
    declaration = scan["rows"][0][4]
    scan["rows"].append(
        [p.format(declaration=declaration) if isinstance(p, str) else p for p in row]
    )
    record.write_text(json.dumps(scan))
    assert {point.name for point in _entry_points.discover("ortplug")} == real  # scanned again
    host = PluginHost(environ={})
    assert "planted" not in {info.name for info in host.plugin_infos()}
    assert not planted_module.exists() and "planted_zen" not in sys.modules
    assert "planted" not in record.read_text()  # the scan replaced the record


def test_a_remembered_row_is_used_while_its_distribution_declares_it(ortplug_cache) -> None:
    first = _entry_points.discover("ortplug")
    record = _record(ortplug_cache)
    written = record.stat().st_ino, record.read_bytes()
    assert _entry_points.discover("ortplug") == first
    assert (record.stat().st_ino, record.read_bytes()) == written  # read, not written again


# -- planted probe facts --------------------------------------------------------------------------


class _Probe:
    def __init__(self) -> None:
        self.runs = 0

    def _detect(self) -> dict[str, object]:
        self.runs += 1
        return {"device_count": 0}

    @hookimpl
    def ortplug_host_probes(self):
        yield HostProbe(
            name="acme",
            facts=("device_count",),
            detect=self._detect,
            types={"device_count": int},
            identity=lambda: "same",
        )


@pytest.mark.parametrize(
    "forge",
    [
        lambda facts: facts.update(device_count="8"),  # not the declared type
        lambda facts: facts.update(sneaky=1),  # not a declared fact
    ],
)
def test_planted_probe_facts_are_refused(ortplug_cache, forge) -> None:
    probe = _Probe()
    make_plugin_host(("acme", probe)).host_capabilities()
    (record,) = (ortplug_cache / "probes").glob("*.json")
    data = json.loads(record.read_text())
    forge(data["facts"])
    record.write_text(json.dumps(data))
    host = make_plugin_host(("acme", probe)).host_capabilities()
    assert probe.runs == 2 and host.fact("acme", "device_count") == 0


# -- a cache other users can write ----------------------------------------------------------------


def test_a_cache_other_users_can_write_is_not_used(ortplug_cache) -> None:
    probe = _Probe()
    make_plugin_host(("acme", probe)).host_capabilities()
    ortplug_cache.chmod(0o777)
    with pytest.warns(OrtplugCacheWarning) as caught:
        make_plugin_host(("acme", probe)).host_capabilities()
    assert probe.runs == 2  # the facts in it were not read
    (warning,) = [w for w in caught if "writable by every user" in str(w.message)]
    message = str(warning.message)
    assert message.startswith(
        f"the cache is not used, the run goes on without it: {ortplug_cache} is writable"
    )
    assert f"`chmod go-w {ortplug_cache}` makes it yours alone" in message and "\n" not in message
    with pytest.raises(CacheError, match="writable by every user"):
        cache_dir("tensorrt")
    ortplug_cache.chmod(0o700)
    assert trusted_folder("probes") == ortplug_cache / "probes"


def test_a_folder_below_the_root_that_others_can_write_is_refused(ortplug_cache) -> None:
    folder = cache_dir("verify")
    assert folder.stat().st_mode & 0o777 == 0o700  # made private, whatever the umask
    folder.chmod(0o757)
    with pytest.warns(OrtplugCacheWarning, match=f"{folder} is writable by every user"):
        assert trusted_folder("verify") is None


# -- an unusable cache folder ---------------------------------------------------------------------


@pytest.fixture
def variants(tmp_path: Path) -> Path:
    (tmp_path / "model").mkdir()
    checkpoint = mlp_with_variants(tmp_path / "model", "int8")
    set_tolerance(tmp_path / "model", "int8", INT8_ACCEPTED)  # a variant that passes
    assert checkpoint.weights_path is not None
    return checkpoint.weights_path


def _verification_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, VerificationWarning)]


def test_an_unusable_verdict_folder_is_one_warning_and_the_build_goes_on(
    ortplug_cache, variants, monkeypatch
) -> None:
    monkeypatch.setenv("ORTPLUG_REAL_TRAFFIC_CHECKS", "0")  # the int8 variant serves once verified
    ortplug_cache.mkdir()
    (ortplug_cache / "verify").write_text("")  # a file where the folder should be
    plugins = make_plugin_host(environ=VNNI)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            backend = OnnxBackend.from_checkpoint(
                LocalCheckpoint(variants), plugins=plugins, verify=Verification(measure=False)
            )
            assert backend.report.verification is not None
            assert backend.report.verification.passed and not backend.report.verification.cached
    lines = [str(w.message) for w in caught if issubclass(w.category, OrtplugCacheWarning)]
    assert lines == [
        f"the cache is not used, the run goes on without it: {ortplug_cache / 'verify'} is not a "
        "directory; "
        f"set ORTPLUG_CACHE_DIR to a writable directory (now: {ortplug_cache})"
    ]
    assert not _verification_warnings(caught)


@pytest.mark.skipif(AS_ROOT and not shutil.which("chattr"), reason="root writes anywhere")
def test_a_read_only_cache_without_a_verdict_still_verifies(
    ortplug_cache, variants, monkeypatch
) -> None:
    monkeypatch.setenv("ORTPLUG_REAL_TRAFFIC_CHECKS", "0")  # the int8 variant serves once verified
    ortplug_cache.mkdir(mode=0o700)
    if AS_ROOT:
        made = subprocess.run(["chattr", "+i", str(ortplug_cache)], check=False)
        if made.returncode != 0:
            pytest.skip("cannot make a folder immutable here")
    else:
        ortplug_cache.chmod(0o500)
    try:
        unwritable = "goes on without it: .*verify cannot be created"
        with pytest.warns(OrtplugCacheWarning, match=unwritable):
            backend = OnnxBackend.from_checkpoint(
                LocalCheckpoint(variants),
                plugins=make_plugin_host(environ=VNNI),
                verify=Verification(measure=False),
            )
        assert backend.report.verification is not None and backend.report.verification.passed
    finally:
        if AS_ROOT:
            subprocess.run(["chattr", "-i", str(ortplug_cache)], check=False)
        ortplug_cache.chmod(0o700)


def test_cli_verify_and_run_go_on_with_a_cache_root_that_is_a_file(tmp_path, variants) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    env = {**os.environ, **VNNI, "ORTPLUG_PLUGINS": "cpu", "ORTPLUG_CACHE_DIR": str(blocker)}
    for command in (["verify", str(variants)], ["run", str(variants), "--repeat", "1"]):
        done = subprocess.run([ORTPLUG, *command], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        warned = [line for line in done.stderr.splitlines() if "goes on without it" in line]
        assert len(warned) == 1 and f"{blocker} is not a directory" in warned[0], done.stderr
    assert blocker.read_text() == ""


# -- item 25: `ortplug cache clear` removes only what ortplug wrote -------------------------------


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _user_folder(root: Path) -> Path:
    """A folder that is not ortplug's: a home with keys and a project's sources, and one record."""
    (root / ".ssh").mkdir(parents=True)
    (root / ".ssh" / "id_ed25519").write_text("secret")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("print('mine')")
    (root / "verify").mkdir()
    (root / "verify" / "0123.json").write_text("{}")
    return root


def test_clear_refuses_a_root_without_the_marker_that_holds_other_files(
    tmp_path: Path, monkeypatch
) -> None:
    home = _user_folder(tmp_path / "home")
    before = _files(home)
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(home))
    refused = r"no ortplug-cache.json\); nothing was removed: point ORTPLUG_CACHE_DIR at"
    with pytest.raises(CacheError, match=refused):
        cache_index.clear()
    assert _files(home) == before
    done = subprocess.run(
        [ORTPLUG, "cache", "clear"], capture_output=True, text=True,
        env={**os.environ, "ORTPLUG_CACHE_DIR": str(home)},
    )  # fmt: skip
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "is not marked as ortplug's cache" in done.stderr and _files(home) == before


def test_clear_removes_ortplugs_folders_and_nothing_else(ortplug_cache: Path) -> None:
    cache_dir("verify")
    (cache_dir("verify") / "0123.json").write_text("{}")
    engine = cache_dir("tensorrt", "engines", "k")
    cache_index.describe(engine, kind="TensorRT engine")
    assert json.loads((ortplug_cache / "ortplug-cache.json").read_text())["folders"] == [
        "tensorrt",
        "verify",
    ]
    (ortplug_cache / "notes.txt").write_text("mine")
    (ortplug_cache / "mine").mkdir()
    (ortplug_cache / "mine" / "data.bin").write_text("mine")
    assert cache_index.clear() == 2
    assert _files(ortplug_cache) == ["mine", "mine/data.bin", "notes.txt", "ortplug-cache.json"]


@pytest.mark.parametrize("action", ["clear", "prune"])
def test_a_root_without_the_marker_is_refused_however_its_folders_are_named(
    tmp_path: Path, monkeypatch, action: str
) -> None:
    """A project holding only ``verify/`` and ``probes/`` folders of JSON was adopted as an
    earlier ortplug's cache (decided on folder names alone) and ``cache prune`` or ``clear``
    deleted the user's JSON. Only the marker says a root is ortplug's; the refusal says how
    to clear one that is."""
    project = tmp_path / "myproject"
    (project / "verify").mkdir(parents=True)
    (project / "verify" / "results.json").write_text(json.dumps({"model_path": "/gone.onnx"}))
    (project / "probes").mkdir()
    (project / "probes" / "experiment.json").write_text('{"note": "mine"}')
    long_ago = 1_000_000_000
    for path in project.rglob("*.json"):
        os.utime(path, (long_ago, long_ago))
    before = _files(project)
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(project))
    refused = (
        f"{project} is not marked as ortplug's cache (no ortplug-cache.json); nothing was "
        "removed: point ORTPLUG_CACHE_DIR at ortplug's own folder, or if all it holds is "
        "ortplug's, delete it yourself (ortplug makes a marked one on its next use)"
    )
    with pytest.raises(CacheError, match=re.escape(refused)):
        getattr(cache_index, action)()
    assert refused in _refused_by_the_cli(action, project)
    monkeypatch.setenv("ORTPLUG_CACHE_MAX_MB", "0")
    assert refused in _refused_by_the_cli("prune", project)
    assert _files(project) == before and cache_index.entries() == []


def test_a_root_found_empty_is_marked_at_its_first_use(tmp_path: Path, monkeypatch) -> None:
    """``mkdir mycache; ORTPLUG_CACHE_DIR=mycache``: what ortplug writes there is its own."""
    root = tmp_path / "mycache"
    root.mkdir()
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(root))
    (cache_dir("autotune") / "0123.json").write_text("{}")
    assert read_marker(root) == ["autotune"]
    (root / "notes").mkdir()
    cache_dir("verify")  # no longer empty, but marked: listed too
    assert cache_index.clear() == 1
    assert _files(root) == ["notes", "ortplug-cache.json"]


# -- item 26: never listed, measured or removed through a symbolic link ---------------------------


def test_prune_never_follows_a_symlinked_record_folder(ortplug_cache: Path, tmp_path: Path) -> None:
    user = tmp_path / "userdata"
    user.mkdir()
    (user / "notes.json").write_text(json.dumps({"model_path": str(tmp_path / "gone.onnx")}))
    cache_dir("autotune")  # a root ortplug made and marked (prune refuses one it never marked)
    (ortplug_cache / "verify").symlink_to(user)
    assert cache_index.entries() == [] and cache_index.prune() == []
    assert (user / "notes.json").exists()
    from ortplug.host import probe_cache as _probe_cache

    (ortplug_cache / "probes").symlink_to(user)
    with pytest.warns(OrtplugCacheWarning, match="probes is a symbolic link"):
        assert _probe_cache.clear() == 0
    assert (user / "notes.json").exists()


def test_a_symlinked_plugin_folder_is_not_entered(ortplug_cache: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "build").mkdir(parents=True)
    (project / "build" / "ortplug-entry.json").write_text('{"model_path": "/gone.onnx"}')
    (project / "build" / "main.c").write_text("int main;")
    cache_dir("verify")
    (ortplug_cache / "tensorrt").symlink_to(project)
    assert cache_index.entries() == [] and cache_index.prune() == []
    cache_index.clear()
    assert _files(project) == ["build", "build/main.c", "build/ortplug-entry.json"]


# -- item 19: records name their model by an absolute path ----------------------------------------


def test_records_are_never_stale_because_of_the_current_directory(
    ortplug_cache: Path, variants: Path, tmp_path: Path, monkeypatch
) -> None:
    from ortplug.checkpoint import select_variant
    from ortplug.selection import autotune
    from ortplug.testing import make_host

    monkeypatch.chdir(variants.parent)
    checkpoint = LocalCheckpoint(Path(variants.name)).resolve()  # a relative path
    OnnxBackend.from_checkpoint(select_variant(checkpoint, "int8"), providers=["cpu"], verify=True)
    autotune.save(checkpoint, make_host(), autotune.TunedSetting(("cpu",), 1, 1.5, 0.1))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    listed = {e.kind: e for e in cache_index.entries()}
    assert {"verification verdict", "autotune record"} <= set(listed)
    assert all(e.stale is None for e in listed.values())
    for kind in ("verification verdict", "autotune record"):
        model = listed[kind].model
        assert model is not None and Path(model).is_absolute() and Path(model).exists()
    assert cache_index.prune() == []
    old = ortplug_cache / "verify" / "0123.json"  # as an earlier ortplug wrote it: relative
    old.write_text(json.dumps({"model_path": "m.int8.onnx", "ort_version": None}))
    assert {e.path: e.stale for e in cache_index.entries()}[old] is None


def test_doctor_and_plugins_see_a_cache_others_can_write(ortplug_cache: Path) -> None:
    from ortplug.cache.root import cache_problem

    cache_dir("tensorrt")
    ortplug_cache.chmod(0o777)
    assert "is writable by every user (mode 777)" in str(cache_problem("tensorrt", "engines"))
    ortplug_cache.chmod(0o700)
    assert cache_problem("tensorrt", "engines") is None


def _refused(folder: str) -> str:
    """The one warning with which the cache refuses ``folder`` (and reads nothing from it)."""
    with pytest.warns(OrtplugCacheWarning) as caught:
        assert trusted_folder(folder) is None
    (message,) = [str(w.message) for w in caught]
    return message


@pytest.mark.skipif(
    os.getuid() != 0, reason="giving a folder to another user needs root (CI's user)"
)
def test_a_cache_folder_of_another_user_is_refused_naming_whose_it_should_be(ortplug_cache) -> None:
    folder = cache_dir("verify")
    os.chown(folder, 65534, 65534)  # nobody's
    message = _refused("verify")
    assert (
        f"{folder} belongs to another user (uid 65534; expected yours, uid 0, or root)" in message
    )


# -- issue 31, items 1-3: shared hosts ------------------------------------------------------------


def _trusted_as_is(name: str) -> bool:
    """Whether the cache folder ``name`` is trusted with this host's real accounts (no warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrtplugCacheWarning)
        return trusted_folder(name) is not None


@pytest.fixture
def group_writable_verdicts(ortplug_cache: Path) -> Path:
    """The verdict folder, writable by this user's group, which is the user's own private group."""
    folder = cache_dir("verify")
    folder.chmod(0o770)
    if not _trusted_as_is("verify"):
        pytest.skip("this user's group is not a private one: a group-writable folder is refused")
    return folder


def test_a_folder_writable_through_a_primary_group_of_another_account_is_refused(
    group_writable_verdicts: Path, monkeypatch
) -> None:
    import grp
    import pwd

    folder = group_writable_verdicts
    gid = folder.stat().st_gid
    # `useradd -g <this user's group> ortplug-other`: the account is in no group's member list
    other = pwd.struct_passwd(("ortplug-other", "x", 64999, gid, "", "/nonexistent", "/bin/sh"))
    accounts = [*pwd.getpwall(), other]
    monkeypatch.setattr(pwd, "getpwall", lambda: accounts)
    message = _refused("verify")
    assert (
        f"{folder} is writable by its group {grp.getgrgid(gid).gr_name} (mode 770), so by "
        f"ortplug-other, who could plant records in it (`chmod go-w {folder}` makes it yours "
        "alone)"
    ) in message and "\n" not in message
    with pytest.raises(CacheError, match="so by ortplug-other"):
        cache_dir("verify")


def _grant_write(path: Path, uid: int) -> None:
    """What `setfacl -m u:UID:rwx PATH` does: a POSIX ACL entry giving that user write."""
    import struct

    def entry(tag: int, perm: int, ident: int = 0xFFFFFFFF) -> bytes:
        return struct.pack("<HHI", tag, perm, ident)

    owner, group, other = (path.stat().st_mode >> shift & 7 for shift in (6, 3, 0))
    acl = struct.pack("<I", 2) + b"".join(
        [
            entry(0x01, owner),
            entry(0x02, 7, uid),
            entry(0x04, group),
            entry(0x10, 7),
            entry(0x20, other),
        ]
    )
    try:
        os.setxattr(path, "system.posix_acl_access", acl)
    except (AttributeError, OSError) as exc:
        pytest.skip(f"no POSIX ACLs here ({exc})")


def test_a_folder_an_acl_lets_another_user_write_is_refused(ortplug_cache: Path) -> None:
    import pwd

    folder = cache_dir("verify")
    _grant_write(folder, 65534)
    try:
        name = f"user {pwd.getpwuid(65534).pw_name}"
    except KeyError:
        name = "user uid 65534"
    message = _refused("verify")
    assert (
        f"{folder} is writable through its ACL by {name} (mode 770), who could plant records "
        f"in it (`chmod go-w {folder}` makes it yours alone)"
    ) in message
    folder.chmod(0o750)  # the fix it names: the ACL's mask loses write
    assert trusted_folder("verify") == folder


def test_an_acl_giving_only_this_user_write_is_trusted(ortplug_cache: Path) -> None:
    folder = cache_dir("verify")
    _grant_write(folder, os.getuid())  # the group bits now show write: the ACL's mask
    assert folder.stat().st_mode & 0o070 == 0o070 and trusted_folder("verify") == folder


def _notes_under(root: Path) -> Path:
    """A root holding the user's own ``notes/`` and a marker listing it (as if planted)."""
    notes = root / "notes"
    notes.mkdir(parents=True)
    (notes / "todo.txt").write_text("mine")
    (root / "ortplug-cache.json").write_text(json.dumps({"ortplug_cache": 1, "folders": ["notes"]}))
    return notes


def _refused_by_the_cli(action: str, root: Path) -> str:
    done = subprocess.run(
        [ORTPLUG, "cache", action], capture_output=True, text=True,
        env={**os.environ, "ORTPLUG_CACHE_DIR": str(root)},
    )  # fmt: skip
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


@pytest.mark.parametrize("open_up", ["root", "marker"])
def test_clear_and_prune_refuse_a_marker_another_user_could_have_planted(
    ortplug_cache: Path, open_up: str
) -> None:
    notes = _notes_under(ortplug_cache)
    opened = ortplug_cache if open_up == "root" else ortplug_cache / "ortplug-cache.json"
    opened.chmod(0o777 if open_up == "root" else 0o666)
    refused = f"nothing was removed from {ortplug_cache}: {opened} is writable by every user"
    for action in (cache_index.clear, cache_index.prune):
        with pytest.raises(CacheError, match=re.escape(refused)):
            action()
    for action in ("clear", "prune"):
        assert refused in _refused_by_the_cli(action, ortplug_cache)
    assert _files(notes) == ["todo.txt"]
    if open_up == "marker":
        assert read_marker(ortplug_cache) is None  # nor read: what it lists may be another's


def test_a_marker_written_under_an_open_umask_is_still_trusted(ortplug_cache: Path) -> None:
    previous = os.umask(0)
    try:
        cache_dir("verify")
    finally:
        os.umask(previous)
    assert (ortplug_cache / "ortplug-cache.json").stat().st_mode & 0o077 == 0
    assert cache_index.clear() == 0 and _files(ortplug_cache) == ["ortplug-cache.json"]


def test_prune_refuses_a_root_ortplug_never_marked(tmp_path: Path, monkeypatch) -> None:
    project = tmp_path / "myproject"
    (project / "verify").mkdir(parents=True)
    (project / "verify" / "results.json").write_text(json.dumps({"model_path": "/gone.onnx"}))
    (project / "probes").mkdir()
    (project / "probes" / "run.json").write_text("not JSON")
    (project / "main.py").write_text("print('mine')")
    before = _files(project)
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(project))
    refused = r"myproject is not marked as ortplug's cache \(no ortplug-cache.json\); nothing"
    with pytest.raises(CacheError, match=refused):
        cache_index.prune()
    assert "is not marked as ortplug's cache" in _refused_by_the_cli("prune", project)
    assert _files(project) == before
    # nor does the size cap, kept each time a plugin uses a cache folder
    long_ago = 1_000_000_000
    for path in project.rglob("*.json"):
        os.utime(path, (long_ago, long_ago))
    monkeypatch.setenv("ORTPLUG_CACHE_MAX_MB", "0")
    engine = cache_dir("tensorrt", "engines", "k")
    cache_index.describe(engine, kind="TensorRT engine")
    assert set(before) <= set(_files(project))


# -- issue 37, T14: a linked root, a default ACL ---------------------------------------------------


@pytest.mark.skipif(os.getuid() != 0, reason="giving a link to another user needs root (CI's user)")
@pytest.mark.parametrize("chained", [False, True])
def test_a_cache_root_linked_by_another_user_is_not_used(
    tmp_path: Path, monkeypatch, chained: bool
) -> None:
    """Regression (issue 37, T14): a cache root that is a symbolic link another user planted
    (or one of the links it leads through) was followed: its owner could point it at any
    folder that passes the check (one of this user's) and redirect what ortplug writes and
    reads. A link of this user's (a cache moved to another disk) is followed, and what goes
    through it is under the folder it resolves to (a link changed later redirects nothing)."""
    from ortplug.plugin_host.manager import reset_plugin_host

    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    planted = tmp_path / "planted"
    planted.symlink_to(mine)
    os.lchown(planted, 65534, 65534)  # nobody's
    root = planted
    if chained:  # this user's link, to the planted one
        root = tmp_path / "via"
        root.symlink_to(planted)
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(root))
    reset_plugin_host()
    refused = (
        f"{planted} is a symbolic link of another user (uid 65534; expected yours, uid 0, or "
        "root), who could point it at another folder"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        OnnxBackend.from_checkpoint(LocalCheckpoint(demo_model()).resolve())
    said = {str(w.message) for w in caught if w.category is OrtplugCacheWarning}
    assert said == {
        f"the cache is not used, the run goes on without it: {refused}; set ORTPLUG_CACHE_DIR "
        f"to a writable directory (now: {root})"
    }
    assert _files(mine) == []  # nothing went through the link
    with pytest.raises(CacheError, match=re.escape(refused)):
        cache_dir("verify")
    with pytest.raises(CacheError, match=re.escape(refused)):
        cache_index.clear()
    os.lchown(planted, 0, 0)  # now this user's own link
    assert cache_dir("verify") == mine / "verify"
    assert trusted_folder("verify") == mine / "verify"


@pytest.mark.parametrize("through", ["a/inner", "c/up/inner", "b/deeper"])
def test_a_cache_root_through_this_users_links_resolves_as_the_system_does(
    tmp_path: Path, monkeypatch, through: str
) -> None:
    """The walk that follows the cache root's links (each checked for its owner) lands where
    ``os.path.realpath`` does: relative links, a link to a link, ``..`` in a target."""
    (tmp_path / "real" / "inner").mkdir(parents=True, mode=0o700)
    (tmp_path / "a").symlink_to("real")  # relative
    (tmp_path / "b").symlink_to(tmp_path / "a" / "inner")  # absolute, through the link "a"
    (tmp_path / "c").mkdir(mode=0o700)
    (tmp_path / "c" / "up").symlink_to("../a")  # ``..`` in the target
    root = tmp_path / through
    monkeypatch.setenv("ORTPLUG_CACHE_DIR", str(root))
    resolved = Path(os.path.realpath(root))
    assert cache_dir("verify") == resolved / "verify"
    assert (resolved / "verify").is_dir() and not (resolved / "verify").is_symlink()
    assert trusted_folder("verify") == resolved / "verify"


def _default_acl_granting_write(folder: Path, uid: int) -> None:
    """What `setfacl -d -m u:UID:rwx FOLDER` does: what is made in ``folder`` gives that user
    write, whatever the umask, up to the mode it is made with."""
    import struct

    def entry(tag: int, perm: int, ident: int = 0xFFFFFFFF) -> bytes:
        return struct.pack("<HHI", tag, perm, ident)

    acl = struct.pack("<I", 2) + b"".join(
        [entry(0x01, 7), entry(0x02, 7, uid), entry(0x04, 5), entry(0x10, 7), entry(0x20, 5)]
    )
    try:
        os.setxattr(folder, "system.posix_acl_default", acl)
    except (AttributeError, OSError) as exc:
        pytest.skip(f"no POSIX ACLs here ({exc})")


def test_records_written_under_a_default_acl_are_reused(ortplug_cache: Path) -> None:
    """Regression (issue 37, T14): under a cache root with a default ACL naming another user,
    every record ortplug wrote (mode 0666 before the ACL) let that user write it, so the trust
    check refused each one when it was read back: a warning per build, and nothing reused.
    Records are made this user's alone (0600), as its folders are (0700)."""
    import models
    from ortplug import InMemoryCheckpoint
    from ortplug.selection.autotune import TunedSetting, lookup, save

    ortplug_cache.mkdir(mode=0o700, exist_ok=True)
    _default_acl_granting_write(ortplug_cache, 65534)
    host = make_plugin_host().host_capabilities()
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    setting = TunedSetting(("cpu",), 1, 1.8, 0.01)
    path = save(checkpoint, host, setting)
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrtplugCacheWarning)
        assert lookup(checkpoint, host) == setting
    assert path.stat().st_mode & 0o777 == 0o600
