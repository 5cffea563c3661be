"""The plugin host: isolation of broken plugins, strict mode, allow/deny lists, validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import attrs
import models
import pytest
from dists import dist_info
from ortplug import (
    CheckpointMetadata,
    HostProbe,
    InMemoryCheckpoint,
    OnnxBackend,
    OrtplugPluginWarning,
    PluginError,
    PluginHost,
    ProviderOffer,
    ProviderType,
    hookimpl,
)
from ortplug.providers.session_options import SessionOptionsConfig
from plugin_objects import RaisingOffers

FAKE_DISTS = Path(__file__).parent / "data" / "fake_dists"
META = CheckpointMetadata(input_names=["a", "b"], output_names=["c"])


class _RaisingProbe:
    @hookimpl
    def ortplug_host_probes(self):
        def explode():
            raise OSError("nvml crashed")

        yield HostProbe(name="broken", facts=("devices",), detect=explode)


class _RaisingTypes:
    @hookimpl
    def ortplug_provider_types(self):
        raise ImportError("vendor SDK missing")


class _Wrapper:
    @hookimpl(wrapper=True)
    def ortplug_provider_chain(self, offers):
        return (yield)


class _Typo:
    @hookimpl
    def ortplug_provider(self):
        return []


def test_raising_offer_hook_is_isolated_and_named(plugin_host: PluginHost, cpu_host) -> None:
    plugin_host.register(RaisingOffers(), name="raiser")
    with pytest.warns(OrtplugPluginWarning, match=r"'raiser' failed in ortplug_offer_providers"):
        offers = plugin_host.offer_providers(META, cpu_host)
    assert [o.config.kind for o in offers] == ["cpu"]
    assert "ORTPLUG_DISABLE_PLUGINS=raiser" in plugin_host.failures[0].message()


def test_raising_probe_leaves_facts_none_and_host_working(plugin_host: PluginHost) -> None:
    plugin_host.register(_RaisingProbe(), name="broken")
    with pytest.warns(OrtplugPluginWarning, match=r"host probe 'broken'.*OSError: nvml crashed"):
        host = plugin_host.host_capabilities()
    assert host.fact("broken", "devices") is None
    assert host.fact("cpu", "usable_cpus") >= 1
    backend = OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(models.add_model()).resolve(), plugins=plugin_host
    )
    assert backend.providers == ("CPUExecutionProvider",)


def _itself() -> list[object]:
    value: list[object] = []
    value.append(value)
    return value


class _OddFacts:
    """A probe whose ``devices`` fact is given by the test."""

    def __init__(self, devices: object) -> None:
        self.devices = devices

    @hookimpl
    def ortplug_host_probes(self):
        yield HostProbe(name="odd", facts=("devices",), detect=lambda: {"devices": self.devices})


@pytest.mark.parametrize(
    ("devices", "said"),
    [
        (object(), "fact 'devices': expected a JSON value (null, bool, number, string, list"),
        ([{"name": "npu", "memory": {1: 2}}], "fact 'devices[0].memory': expected string keys"),
        (_itself(), "fact 'devices': expected at most 100000 values nested at most 32 deep"),
        ([10**5000], "fact 'devices[0]': expected an integer JSON readers keep (below 2**64"),
        ({"n": -(2**64)}, "fact 'devices.n': expected an integer JSON readers keep"),
    ],
    ids=["object", "int-key", "itself", "huge-int", "big-negative"],
)
def test_a_probe_whose_facts_are_not_json_fails_with_one_line(
    plugin_host: PluginHost, devices: object, said: str
) -> None:
    """``ortplug info --json`` raised ``TypeError: Object of type object is not JSON
    serializable`` (or printed a repr as if it were the fact); a fact that contains itself
    recursed without end. The facts are JSON or the probe fails, as one that raises does."""
    plugin_host.register(_OddFacts(devices), name="odd")
    with pytest.warns(OrtplugPluginWarning) as caught:
        host = plugin_host.host_capabilities()
    (message,) = [str(w.message) for w in caught if "'odd'" in str(w.message)]
    assert f"failed in host probe 'odd': TypeError: {said}" in message
    assert host.fact("odd", "devices") is None
    assert json.loads(json.dumps(host.to_dict(), allow_nan=False))["facts"]["odd"] == {
        "devices": None
    }


_ODD_PLUGIN = """\
from ortplug import HostProbe, hookimpl

@hookimpl
def ortplug_host_probes():
    yield HostProbe(name="odd", facts=("devices",), detect=lambda: {"devices": object()})
"""


def _site_plugin(
    tmp_path: Path, name: str, files: dict[str, str], module: str | None = None
) -> dict[str, str]:
    """Install distribution ``ortplug-NAME`` 1.0 (package ``ortplug_NAME`` of ``files``, entry
    point ``NAME`` at its ``module``) in a site folder; the environment of a process that sees it."""
    site = tmp_path / "site"
    package = site / f"ortplug_{name}"
    package.mkdir(parents=True)
    for file, text in files.items():
        (package / file).write_text(text)
    target = f"ortplug_{name}" + (f".{module}" if module else "")
    dist_info(site, f"ortplug-{name}", {name: target})
    return {**os.environ, "PYTHONPATH": str(site), "ORTPLUG_CACHE_DIR": str(tmp_path / "cache")}


def _ortplug(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``ortplug ARGS`` in a fresh process with ``env``."""
    code = "import sys\nfrom ortplug.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_info_json_shows_a_probe_with_facts_not_json_as_failed(tmp_path: Path) -> None:
    """The installed plugin's probe is reported, and ``--json`` holds no repr as a fact."""
    env = _site_plugin(tmp_path, "odd", {"__init__.py": "", "plugin.py": _ODD_PLUGIN}, "plugin")
    done = _ortplug(env, "info", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["host"]["facts"]["odd"] == {"devices": None}
    (line,) = [line for line in done.stderr.splitlines() if "'odd'" in line]
    assert "failed in host probe 'odd': TypeError: fact 'devices': expected a JSON value" in line


_HOSTILE_PLUGIN = """\
from ortplug import HostProbe, hookimpl

@hookimpl
def ortplug_host_probes():
    yield HostProbe(name="huge", facts=("count",), detect=lambda: {"count": 10**5000})
    yield HostProbe(name="named", facts=("model",), detect=lambda: {"model": "\\x1b]0;T\\x07\\x1b[2J"})
"""


def test_info_survives_a_huge_integer_fact_and_prints_no_escapes_of_a_fact(tmp_path: Path) -> None:
    """A fact of ``10**5000`` made ``info`` and ``info --json`` exit 1 ("Exceeds the limit
    (4300 digits)"); a string fact holding escapes retitled and cleared the terminal."""
    env = _site_plugin(tmp_path, "hostile", {"__init__.py": _HOSTILE_PLUGIN})
    shown = {}
    for args in (["info", "--json"], ["info"]):
        done = _ortplug(env, *args)
        assert done.returncode == 0, done.stderr
        assert "failed in host probe 'huge': TypeError: fact 'count': expected an integer" in (
            done.stderr
        )
        shown[args[-1]] = done.stdout
    facts = json.loads(shown["--json"])["host"]["facts"]
    assert facts["huge"] == {"count": None} and facts["named"]["model"].startswith("\x1b]0;T")
    assert "fact         named.model = ?]0;T??[2J\n" in shown["info"]
    assert "\x1b" not in shown["info"] and "\x07" not in shown["info"]


def test_raising_provider_types_hook_keeps_other_kinds(plugin_host: PluginHost) -> None:
    plugin_host.register(_RaisingTypes(), name="sdkless")
    with pytest.warns(OrtplugPluginWarning, match="sdkless"):
        assert plugin_host.provider_registry().kinds() == ["cpu"]


def test_strict_mode_names_plugin_hook_and_exception_type() -> None:
    host = PluginHost(load_entry_points=False, environ={"ORTPLUG_STRICT_PLUGINS": "1"})
    host.register(_RaisingProbe(), name="broken")
    with pytest.raises(PluginError) as caught:
        host.host_capabilities()
    assert str(caught.value) == (
        "ortplug plugin 'broken' failed in host probe 'broken': OSError: nvml crashed"
    )
    assert isinstance(caught.value.__cause__, OSError)


def test_wrapper_implementations_are_refused(plugin_host: PluginHost) -> None:
    with pytest.warns(OrtplugPluginWarning, match="is a wrapper"):
        assert plugin_host.register(_Wrapper(), name="wrapper") is False
    assert "wrapper" not in plugin_host.plugin_names()


def test_misspelt_hook_names_are_refused(plugin_host: PluginHost) -> None:
    with pytest.warns(OrtplugPluginWarning, match="ortplug_provider"):
        assert plugin_host.register(_Typo(), name="typo") is False
    assert "typo" not in plugin_host.plugin_names()


def test_unregister_removes_a_plugins_providers(plugin_host: PluginHost) -> None:
    assert plugin_host.provider_registry().kinds() == ["cpu"]
    plugin_host.unregister("cpu")
    assert plugin_host.provider_registry().kinds() == []


# -- entry points of a distribution on sys.path (a dist-info folder, as pip leaves it) --------


@pytest.fixture
def fake_dists(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(FAKE_DISTS))
    monkeypatch.delenv("ORTPLUG_TEST_FAKE_IMPORTED", raising=False)
    return FAKE_DISTS


def test_entry_point_failures_are_reported_not_raised(fake_dists) -> None:
    env = {"ORTPLUG_DISABLE_PLUGINS": "fake_never_imported"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        host = PluginHost(environ=env)
        caps = host.host_capabilities()
        host.offer_providers(META, caps)
    messages = [str(w.message) for w in caught if w.category is OrtplugPluginWarning]
    assert any("'fake_import_error' (ortplug-fakes 1.0) failed in import" in m for m in messages)
    assert any("fake_probe_error" in m and "driver query crashed" in m for m in messages)
    assert any("fake_offer_error" in m and "KeyError" in m for m in messages)
    status = {p.name: p.status for p in host.plugin_infos()}
    assert status["fake_import_error"] == "failed"
    assert status["fake_never_imported"] == "blocked"
    assert status["cpu"] == "active"


def test_denied_plugins_are_never_imported(fake_dists) -> None:
    import os

    PluginHost(environ={"ORTPLUG_PLUGINS": "cpu"})
    assert "ORTPLUG_TEST_FAKE_IMPORTED" not in os.environ
    PluginHost(environ={"ORTPLUG_PLUGINS": "cpu,fake_never_imported"})
    assert os.environ.get("ORTPLUG_TEST_FAKE_IMPORTED") == "1"


def test_allow_list_loads_only_named_plugins(fake_dists) -> None:
    host = PluginHost(environ={"ORTPLUG_PLUGINS": "cpu"})
    active = {p.name for p in host.plugin_infos() if p.status == "active"}
    assert active == {"cpu", "ortplug"}
    assert host.failures == ()


def test_two_distributions_with_one_entry_point_name_are_reported(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(FAKE_DISTS.parent / "fake_dists_dup"))
    with pytest.warns(OrtplugPluginWarning, match=r"entry point 'dup' of ortplug-dup-\w.*taken"):
        host = PluginHost(environ={})
    assert "dup" in host.plugin_names()  # the first one found is used


def test_a_refused_registration_leaves_the_plugin_of_that_name_in_place(
    plugin_host: PluginHost, cpu_host
) -> None:
    # A second plugin under the name "cpu" used to be refused by unregistering the first:
    # the CPU plugin vanished while the cached registry still listed its kind.
    with pytest.warns(OrtplugPluginWarning, match=r"plugin name 'cpu' is already taken"):
        assert not plugin_host.register(RaisingOffers(), name="cpu")
    assert "cpu" in plugin_host.plugin_names()
    assert [o.config.kind for o in plugin_host.offer_providers(META, cpu_host)] == ["cpu"]


def test_registering_under_a_blocked_name_is_refused_not_reported_done(fake_dists) -> None:
    # pluggy ignores a plugin registered under a blocked name; register() said True for it
    blocked = "fake_never_imported"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the other fake distributions' own failures
        host = PluginHost(environ={"ORTPLUG_DISABLE_PLUGINS": blocked})
    with pytest.warns(OrtplugPluginWarning, match=f"'{blocked}' is blocked by ORTPLUG_DISABLE"):
        assert not host.register(RaisingOffers(), name=blocked)
    assert blocked not in host.plugin_names()


class _RaisingAdjust:
    @hookimpl(tryfirst=True)
    def ortplug_adjust_session_options(self, session_options):
        raise RuntimeError("adjust bug")


class _FixedOptions:  # does not take the value it replaces
    @hookimpl
    def ortplug_adjust_session_options(self, chain):
        return SessionOptionsConfig().with_config_entries({"fixed": str(len(chain))})


class _Deterministic:
    @hookimpl(trylast=True)
    def ortplug_adjust_session_options(self, session_options):
        return session_options.with_config_entries({"session.use_deterministic_compute": "1"})


def test_a_fold_goes_on_past_a_raising_plugin_each_seeing_the_value_so_far(
    plugin_host: PluginHost, cpu_host
) -> None:
    for name, plugin in [("raiser", _RaisingAdjust()), ("fixed", _FixedOptions())]:
        assert plugin_host.register(plugin, name=name)
    assert plugin_host.register(_Deterministic(), name="deterministic")
    with pytest.warns(OrtplugPluginWarning, match=r"'raiser' failed in ortplug_adjust_session"):
        options = plugin_host.adjust_session_options(SessionOptionsConfig(), [], META, cpu_host)
    assert options.config_entries["fixed"] == "0"  # replaced without being taken
    assert options.config_entries["session.use_deterministic_compute"] == "1"  # saw "fixed"
    assert [f.plugin for f in plugin_host.failures] == ["raiser"]


def test_a_failure_is_recorded_and_warned_once(plugin_host: PluginHost, cpu_host) -> None:
    plugin_host.register(RaisingOffers(), name="raiser")
    with pytest.warns(OrtplugPluginWarning):
        plugin_host.offer_providers(META, cpu_host)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plugin_host.offer_providers(META, cpu_host)  # same failure again: no new warning
    assert len(plugin_host.failures) == 1


class _BadOffer:
    @hookimpl
    def ortplug_offer_providers(self):
        yield ProviderOffer(config="cpu", preference=1, reason="a string is no config")


def test_an_offer_without_a_provider_config_is_a_plugin_failure(plugin_host, cpu_host) -> None:
    plugin_host.register(_BadOffer(), name="badoffer")
    with pytest.warns(
        OrtplugPluginWarning, match="ProviderOffer.config: expected a provider config"
    ):
        offers = plugin_host.offer_providers(META, cpu_host)
    assert [o.plugin for o in offers] == ["cpu"]


@attrs.frozen
class _Acme:
    kind: ClassVar[str] = "acme"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "AcmeExecutionProvider", {}


@attrs.frozen
class _Acme2:
    kind: ClassVar[str] = "acme2"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "Acme2ExecutionProvider", {}


class _TwiceAcme:
    """A plugin whose second provider type takes its first one's kind as an alias."""

    @hookimpl
    def ortplug_provider_types(self) -> Iterator[ProviderType]:
        yield ProviderType("acme", "AcmeExecutionProvider", _Acme)
        yield ProviderType("acme2", "Acme2ExecutionProvider", _Acme2, aliases=("acme",))


def test_a_plugin_claiming_a_name_twice_is_not_told_to_uninstall_one_of_the_two() -> None:
    """A plugin that names one provider twice was said to lose it to itself ("already claimed
    by plugin 'twice' ...; plugin 'twice' is skipped: uninstall one of the two")."""
    host = PluginHost(environ={"ORTPLUG_PLUGINS": "cpu"})
    host.register(_TwiceAcme(), name="twice")
    with pytest.warns(OrtplugPluginWarning) as caught:
        assert host.provider_registry().kinds() == ["cpu"]
    (line,) = [str(w.message) for w in caught if "'twice'" in str(w.message)]
    assert "provider name 'acme' is claimed twice by plugin 'twice'" in line
    assert "uninstall" not in line and "\n" not in line
