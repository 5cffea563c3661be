"""The cache as untrusted input (issue 24, items 23 and 27): a planted entry-point row never makes
ortplug import a module, planted probe facts are refused, a folder other users can write is not
used, and an unusable cache folder is one warning, never a failed run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from ortplug import HostProbe, LocalCheckpoint, OnnxBackend, PluginHost, hookimpl
from ortplug.cache import cache_dir, trusted_folder
from ortplug.errors import CacheError, OrtplugCacheWarning, VerificationWarning
from ortplug.plugins import _entry_points
from ortplug.testing import make_plugin_host
from variant_models import mlp_with_variants

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
        ["planted", "planted_zen", None, None, "{declaration}"],  # a real file that does not declare it
        ["planted", "planted_zen", None, None, "/tmp/x.dist-info/entry_points.txt"],
        ["planted", "planted_zen", None, None],  # the earlier form, without a declaration
    ],
)
def test_a_planted_entry_point_row_is_never_imported(ortplug_cache, planted_module, row) -> None:
    real = {point.name for point in _entry_points.discover("ortplug")}
    record = _record(ortplug_cache)
    rows = json.loads(record.read_text())
    declaration = rows[0][4]
    rows.append([part.format(declaration=declaration) if isinstance(part, str) else part for part in row])
    record.write_text(json.dumps(rows))
    assert {point.name for point in _entry_points.discover("ortplug")} == real  # scanned again
    host = PluginHost(environ={})
    assert "planted" not in {info.name for info in host.plugin_infos()}
    assert not planted_module.exists() and "planted_zen" not in sys.modules
    assert "planted" not in record.read_text()  # the scan replaced the record


def test_a_remembered_row_is_used_while_its_distribution_declares_it(ortplug_cache) -> None:
    first = _entry_points.discover("ortplug")
    record = _record(ortplug_cache)
    stamp = record.stat().st_mtime_ns
    assert _entry_points.discover("ortplug") == first
    assert record.stat().st_mtime_ns == stamp  # read, not written again


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
    assert message.startswith(f"ortplug goes on without its cache: {ortplug_cache} is writable")
    assert f"chmod go-w {ortplug_cache}" in message and "\n" not in message
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
    assert checkpoint.weights_path is not None
    return checkpoint.weights_path


def _no_verification_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, VerificationWarning)]


def test_an_unusable_verdict_folder_is_one_warning_and_the_build_goes_on(
    ortplug_cache, variants
) -> None:
    ortplug_cache.mkdir()
    (ortplug_cache / "verify").write_text("")  # a file where the folder should be
    plugins = make_plugin_host(environ=VNNI)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            backend = OnnxBackend.from_checkpoint(LocalCheckpoint(variants), plugins=plugins)
            assert backend.report.verification is not None
            assert backend.report.verification.passed and not backend.report.verification.cached
    lines = [str(w.message) for w in caught if issubclass(w.category, OrtplugCacheWarning)]
    assert lines == [
        f"ortplug goes on without its cache: {ortplug_cache / 'verify'} is not a directory; "
        f"set ORTPLUG_CACHE_DIR to a writable directory (now: {ortplug_cache})"
    ]
    assert not _no_verification_warnings(caught)


@pytest.mark.skipif(AS_ROOT and not shutil.which("chattr"), reason="root writes anywhere")
def test_a_read_only_cache_without_a_verdict_still_verifies(ortplug_cache, variants) -> None:
    ortplug_cache.mkdir(mode=0o700)
    if AS_ROOT:
        made = subprocess.run(["chattr", "+i", str(ortplug_cache)], check=False)
        if made.returncode != 0:
            pytest.skip("cannot make a folder immutable here")
    else:
        ortplug_cache.chmod(0o500)
    try:
        with pytest.warns(OrtplugCacheWarning, match="goes on without its cache: .*verify cannot be created"):
            backend = OnnxBackend.from_checkpoint(
                LocalCheckpoint(variants), plugins=make_plugin_host(environ=VNNI)
            )
        assert backend.report.verification is not None and backend.report.verification.passed
    finally:
        if AS_ROOT:
            subprocess.run(["chattr", "-i", str(ortplug_cache)], check=False)
        ortplug_cache.chmod(0o700)


def test_cli_verify_and_run_go_on_with_a_cache_root_that_is_a_file(tmp_path: Path, variants) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    env = {**os.environ, **VNNI, "ORTPLUG_PLUGINS": "cpu", "ORTPLUG_CACHE_DIR": str(blocker)}
    for command in (["verify", str(variants)], ["run", str(variants), "--repeat", "1"]):
        done = subprocess.run([ORTPLUG, *command], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        warned = [line for line in done.stderr.splitlines() if "without its cache" in line]
        assert len(warned) == 1 and f"{blocker} is not a directory" in warned[0], done.stderr
    assert blocker.read_text() == ""
