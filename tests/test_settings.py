"""The one settings value (issue 29, item 5): every core ``ORTPLUG_*`` variable typed and checked
in one place, read once per process, and the manual's table (docs/environment.md) kept in step
with it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ortplug.errors import OptionError
from ortplug.settings import OVERRIDES, VARIABLES, Settings, refresh_settings, settings

ROOT = Path(__file__).resolve().parents[1]
ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"


def _tables() -> tuple[dict[str, str], dict[str, str]]:
    """The manual's core table (variable -> default) and plugin table (variable -> plugin)."""
    section = (ROOT / "docs" / "environment.md").read_text()
    core, plugins = section.split("The plugins' own variables", 1)
    row = re.compile(r"^\| `(ORTPLUG_[A-Z_<>]+)[=`][^|]*\| ([^|]+) \|", re.MULTILINE)
    return (
        {name: default.strip() for name, default in row.findall(core)},
        {name: plugin.strip() for name, plugin in row.findall(plugins)},
    )


def test_the_manual_lists_every_core_variable_with_its_default() -> None:
    core, _ = _tables()
    table = {v.name: v.default for v in (*VARIABLES, *OVERRIDES)}
    assert sorted(core) == sorted(table)
    assert core == table


def test_the_plugins_variables_are_listed_apart_and_read_by_their_plugin() -> None:
    core, plugins = _tables()
    assert plugins and not set(plugins) & set(core)
    for name, plugin in plugins.items():
        folder = ROOT / "plugins" / plugin.removeprefix("ortplug-") / "src"
        assert any(name in p.read_text() for p in folder.rglob("*.py")), name
    assert not set(plugins) & {v.name for v in VARIABLES}


def test_nothing_set_is_the_defaults() -> None:
    assert Settings.from_environ({}) == Settings()
    assert Settings().measure and Settings().plugins is None and Settings().spot_check == 0.01


def test_each_variable_is_typed() -> None:
    found = Settings.from_environ(
        {
            "ORTPLUG_PLUGINS": "cpu, acme,",
            "ORTPLUG_STRICT_PLUGINS": "1",
            "ORTPLUG_CACHE_DIR": "~/c",
            "ORTPLUG_CACHE_MAX_MB": "-0",
            "ORTPLUG_MEASURE": "off",
            "ORTPLUG_REAL_TRAFFIC_CHECKS": "3",
            "ORTPLUG_SPOT_CHECK": "0.5",
            "ORTPLUG_DEBUG": "0",
            "ORTPLUG_OVERRIDE_CPU_USABLE_CPUS": "2",
            "ORTPLUG_SPOT_CHECKS": "ignored: not a variable",
            "HOME": "/home/x",
        }
    )
    assert found.plugins == ("cpu", "acme") and found.strict_plugins
    assert found.cache_dir == Path("~/c").expanduser() and found.cache_max_mb == 0.0
    assert not found.measure and not found.debug
    assert (found.real_traffic_checks, found.spot_check) == (3, 0.5)
    assert dict(found.overrides) == {"ORTPLUG_OVERRIDE_CPU_USABLE_CPUS": "2"}
    assert Settings.from_environ({"ORTPLUG_PLUGINS": ""}).plugins == ()  # lists none
    assert Settings.from_environ({"ORTPLUG_MEASURE": " "}).measure  # blank: the default
    for text, on in (("ON", True), ("Yes", True), ("2", True), ("00", False), ("False", False)):
        assert Settings.from_environ({"ORTPLUG_DEBUG": text}).debug is on


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("ORTPLUG_SPOT_CHECK", "2", "a share of calls from 0 to 1"),
        ("ORTPLUG_REAL_TRAFFIC_CHECKS", "-1", "a whole number of requests >= 0"),
        ("ORTPLUG_CACHE_MAX_MB", "lots", r"a size in MB \(a finite number >= 0\)"),
        # regression (issue 37): any word but 0/false/no/off was on, `disable` too
        ("ORTPLUG_MEASURE", "disable", r"a flag \(1 or 0, true or false, yes or no, on or off\)"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(name: str, value: str, expected: str) -> None:
    with pytest.raises(OptionError, match=f"^{name}: expected {expected}, got '{value}'$"):
        Settings.from_environ({name: value})
    lenient = Settings.from_environ({name: value}, strict=False)
    assert lenient.problem(name) is not None and "\n" not in str(lenient.problem(name))
    assert lenient == Settings(invalid={name: lenient.problem(name) or ""})  # the default used


@contextlib.contextmanager
def _raw_variable(name: str) -> Iterator[None]:
    """Change ``os.environ[name]`` in the block without refreshing the settings (monkeypatch
    refreshes them here); put back, and the settings read again, after it."""
    saved = os.environ.get(name)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved
        refresh_settings()


def test_the_settings_follow_the_environment_without_a_refresh() -> None:
    """Regression (issue 37, item 8): a variable set after the first read was not seen until
    :func:`refresh_settings`; an unchanged environment is still read once (the same value)."""
    with _raw_variable("ORTPLUG_SPOT_CHECK"):
        os.environ["ORTPLUG_SPOT_CHECK"] = "0.25"
        first = settings()
        assert first.spot_check == 0.25
        assert settings() is first  # nothing changed: not parsed again
        os.environ["ORTPLUG_SPOT_CHECK"] = "0.5"
        assert settings().spot_check == 0.5
        os.environ["ORTPLUG_UNRELATED_TO_SETTINGS"] = "x"  # another variable: the same value
        try:
            assert settings() is settings() and settings().spot_check == 0.5
        finally:
            del os.environ["ORTPLUG_UNRELATED_TO_SETTINGS"]
        del os.environ["ORTPLUG_SPOT_CHECK"]
        assert settings().spot_check == 0.01


def test_a_cache_dir_set_after_import_is_where_the_build_writes(tmp_path) -> None:
    """Regression (issue 37): ``ORTPLUG_CACHE_DIR`` set by a program (or a test's plain
    ``os.environ``) after ``import ortplug`` and before its first build was ignored: the build's
    records went to the cache the settings were first read from (a user's real cache)."""
    from ortplug import LocalCheckpoint, OnnxBackend
    from ortplug.testing import demo_model

    before = settings().cache_dir
    assert before is not None and before.is_dir()
    moved = tmp_path / "moved-cache"
    with _raw_variable("ORTPLUG_CACHE_DIR"):
        os.environ["ORTPLUG_CACHE_DIR"] = str(moved)
        OnnxBackend.from_checkpoint(LocalCheckpoint(demo_model()).resolve())
        written = sorted(p.name for p in moved.iterdir())
    assert "probes" in written and "ortplug-cache.json" in written
    assert not list(before.iterdir())  # nothing in the cache of the first read


def test_a_cache_dir_set_after_import_is_the_cli_commands(tmp_path, capsys) -> None:
    """A CLI command run in-process (``ortplug.cli.main.main``) reads the environment as it is."""
    from ortplug.cli.main import main

    settings()
    moved = tmp_path / "cli-cache"
    with _raw_variable("ORTPLUG_CACHE_DIR"):
        os.environ["ORTPLUG_CACHE_DIR"] = str(moved)
        capsys.readouterr()
        assert main(["cache", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["root"] == str(moved)


def test_monkeypatch_changes_refresh_the_settings(monkeypatch) -> None:
    monkeypatch.setenv("ORTPLUG_CACHE_MAX_MB", "12")
    assert settings().cache_max_mb == 12.0
    monkeypatch.delenv("ORTPLUG_CACHE_MAX_MB")
    assert settings().cache_max_mb is None


def test_a_monkeypatch_undone_refreshes_the_settings() -> None:
    """Regression: a test's ``setenv`` outlived it in the settings (its monkeypatch put the
    environment back without a refresh), so the next module-scoped fixture built its plugin host
    under the previous test's ``ORTPLUG_PLUGINS``."""
    from ortplug.testing import follow_environment

    before = refresh_settings().plugins
    patch = pytest.MonkeyPatch()
    follow_environment(patch)
    patch.setenv("ORTPLUG_PLUGINS", "azuretest")
    assert settings().plugins == ("azuretest",)
    patch.undo()
    assert settings().plugins == before


def test_debug_zero_is_off(tmp_path) -> None:
    """Regression: any non-empty ``ORTPLUG_DEBUG``, ``0`` too, turned on the CLI's tracebacks."""
    model = tmp_path / "bad.onnx"
    model.write_text("garbage")
    done = subprocess.run(
        [ORTPLUG, "run", str(model)],
        capture_output=True,
        text=True,
        env={**os.environ, "ORTPLUG_DEBUG": "0"},
        timeout=120,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().startswith(f"ortplug run: error: {model} is not a valid ONNX model")


def test_the_plugin_host_reads_the_process_settings_not_the_environment() -> None:
    """The plugin host's allow/deny lists come from the settings value (they were read from
    ``os.environ`` by the host itself, so one process could hold two views of them)."""
    from ortplug.plugin_host.manager import PluginHost

    with _raw_variable("ORTPLUG_DISABLE_PLUGINS"):
        os.environ["ORTPLUG_DISABLE_PLUGINS"] = "cpu"
        host = PluginHost()
        assert host.blocked_by() == {"cpu": "ORTPLUG_DISABLE_PLUGINS=cpu"}
        os.environ.pop("ORTPLUG_DISABLE_PLUGINS")
        assert host.blocked_by() == {"cpu": "ORTPLUG_DISABLE_PLUGINS=cpu"}  # the host's own view
        assert "cpu" not in PluginHost().blocked_by()  # a new host: the settings as they are now
        given = PluginHost(environ={"ORTPLUG_DISABLE_PLUGINS": "cpu"}).blocked_by()
        assert given == {"cpu": "ORTPLUG_DISABLE_PLUGINS=cpu"}  # a host given its own variables


def test_a_bad_override_is_said_at_the_users_line() -> None:
    """A warning of ortplug's lower layers points at the caller's line, as the build's do (a
    fixed stacklevel pointed inside ortplug on this path)."""
    import warnings

    from ortplug.errors import OrtplugConfigWarning
    from ortplug.plugin_host.manager import PluginHost

    host = PluginHost(environ={"ORTPLUG_OVERRIDE_CPU_USABLE_CPUS": "lots"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        host.host_capabilities()
    said = [w for w in caught if w.category is OrtplugConfigWarning]
    assert said and "ORTPLUG_OVERRIDE_CPU_USABLE_CPUS" in str(said[0].message)
    assert {Path(w.filename).name for w in said} == {Path(__file__).name}


@pytest.mark.parametrize("given", ["~/c", " /tmp/x ", "", "  "])
def test_the_cache_root_reads_its_variable_as_the_settings_do(given) -> None:
    from ortplug.cache.root import cache_root

    environ = {"ORTPLUG_CACHE_DIR": given, "HOME": "/home/x"}
    found = Settings.from_environ(environ).cache_dir
    assert cache_root(environ) == (found if found is not None else cache_root({}))
