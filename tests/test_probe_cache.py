"""Slow probes run once per boot and installation, not once per process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dists import dist_info
from ortplug import HostProbe, PluginHost, hookimpl
from ortplug.testing import make_plugin_host


class _CountingProbe:
    """A probe that counts its runs; its facts depend on ``self.identity_value``."""

    def __init__(self) -> None:
        self.runs = 0
        self.identity_value = "driver-1"

    def _detect(self) -> dict[str, object]:
        self.runs += 1
        return {"devices": [{"name": "Acme X1"}], "driver": self.identity_value}

    @hookimpl
    def ortplug_host_probes(self):
        yield HostProbe(
            name="acme",
            facts=("devices", "driver"),
            detect=self._detect,
            identity=lambda: {"driver": self.identity_value},
        )


def _host(probe: _CountingProbe, environ: dict[str, str] | None = None) -> PluginHost:
    return make_plugin_host(("acme", probe), environ=environ)


def test_a_second_host_reads_the_facts_instead_of_probing(ortplug_cache: Path) -> None:
    probe = _CountingProbe()
    first = _host(probe).host_capabilities()
    second = _host(probe).host_capabilities()
    assert probe.runs == 1
    assert second.fact("acme", "devices") == first.fact("acme", "devices") == [{"name": "Acme X1"}]
    assert len(list((ortplug_cache / "probes").glob("*.json"))) == 1


def test_a_changed_identity_probes_again(ortplug_cache: Path) -> None:
    probe = _CountingProbe()
    _host(probe).host_capabilities()
    probe.identity_value = "driver-2"
    assert _host(probe).host_capabilities().fact("acme", "driver") == "driver-2"
    assert probe.runs == 2


def test_refresh_forgets_every_entry(ortplug_cache: Path) -> None:
    probe = _CountingProbe()
    host = _host(probe)
    host.host_capabilities()
    assert host.refresh_probes() == 1
    host.host_capabilities()
    assert probe.runs == 2


def test_overrides_apply_on_top_of_cached_facts(ortplug_cache: Path) -> None:
    probe = _CountingProbe()
    _host(probe).host_capabilities()
    overridden = _host(probe, {"ORTPLUG_OVERRIDE_ACME_DRIVER": "forced"}).host_capabilities()
    assert overridden.fact("acme", "driver") == "forced"
    assert probe.runs == 1


def test_a_corrupt_or_foreign_entry_is_probed_over(ortplug_cache: Path) -> None:
    probe = _CountingProbe()
    _host(probe).host_capabilities()
    (entry,) = (ortplug_cache / "probes").glob("*.json")
    for garbage in ("{not json", '{"schema": 99, "facts": {}}', "[" * 100_000):
        entry.write_text(garbage)
        assert _host(probe).host_capabilities().fact("acme", "driver") == "driver-1"
    assert probe.runs == 4


def test_probes_without_identity_run_in_every_host(ortplug_cache: Path) -> None:
    class Plain(_CountingProbe):
        @hookimpl
        def ortplug_host_probes(self):
            yield HostProbe(name="acme", facts=("devices",), detect=self._detect)

    probe = Plain()
    _host(probe).host_capabilities()
    _host(probe).host_capabilities()
    assert probe.runs == 2
    assert not (ortplug_cache / "probes").exists()


def _install(folder: Path, name: str) -> None:
    """A minimal distribution with one ortplug entry point, as pip would leave it."""
    dist_info(folder, f"ortplug-{name}", {name: f"ortplug_{name}"})
    (folder / f"ortplug_{name}.py").write_text(
        "from ortplug import hookimpl\n\n@hookimpl\ndef ortplug_doctor_checks():\n    return []\n"
    )


def test_the_plugin_scan_is_remembered_until_a_distribution_changes(
    ortplug_cache: Path, tmp_path: Path, monkeypatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "first")
    monkeypatch.syspath_prepend(str(site))
    assert "first" in PluginHost(environ={}).plugin_names()
    assert len(list((ortplug_cache / "entry-points").glob("*.json"))) == 1
    _install(site, "second")  # a new dist-info folder: the folder's mtime changes
    names = PluginHost(environ={}).plugin_names()
    assert {"first", "second"} <= set(names)
    assert len(list((ortplug_cache / "entry-points").glob("*.json"))) == 2


_SCRIPT = """\
import sys
from ortplug import PluginHost

names = PluginHost(environ={}).plugin_names()
print("scanned" if "importlib.metadata" in sys.modules else "remembered", *sorted(names))
"""


def test_a_script_folder_that_changes_keeps_the_remembered_scan(ortplug_cache: Path, tmp_path):
    # sys.path[0] is the script's folder: files written there must not cost a scan per start,
    # while a distribution installed there is still seen
    (tmp_path / "app.py").write_text(_SCRIPT)

    def start() -> list[str]:
        done = subprocess.run(
            [sys.executable, "app.py"], cwd=tmp_path, capture_output=True, text=True,
            timeout=120, env={**os.environ, "ORTPLUG_CACHE_DIR": str(ortplug_cache)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    first = start()
    assert first[0] == "scanned" and "cpu" in first
    (tmp_path / "app.log").write_text("written beside the script")
    assert start() == ["remembered", *first[1:]]
    _install(tmp_path, "beside")
    assert start() == ["scanned", *sorted([*first[1:], "beside"])]
    assert len(list((ortplug_cache / "entry-points").glob("*.json"))) == 2
