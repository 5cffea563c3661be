"""Declared plugins: imported only when in play, held to their word, and shipped plugins first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dists import dist_info
from ortplug import CheckpointMetadata, OptionError, OrtplugPluginWarning, PluginHost
from ortplug.plugins import ProviderDecline, ProviderOffer
from ortplug.plugins.declaration import MAX_BYTES
from ortplug.testing import make_host

META = CheckpointMetadata(input_names=["x"], output_names=["y"])
ACCELERATOR_MODULES = (
    "ortplug_cuda",
    "ortplug_tensorrt",
    "ortplug_coreml",
    "ortplug_webgpu",
    "ortplug_openvino",
)

_PLUGIN = """\
from typing import ClassVar
import attrs
from ortplug import ProviderDecline, ProviderOffer, hookimpl

@attrs.frozen
class Config:
    kind: ClassVar[str] = {kind!r}
    ort_name: ClassVar[str] = {ort_name!r}
    def to_ort(self):
        return self.ort_name, {{}}

def detect():
    return {{"devices": {devices!r}}}

@hookimpl
def ortplug_offer_providers(host):
    if host.fact({probe!r}, "devices"):
        yield ProviderOffer(Config(), preference=10, reason="a device")
    else:
        yield ProviderDecline({kind!r}, "no device")
"""
#: What a plugin without a manifest (the hook form) adds: its kind and probe by hook.
_HOOK_FORM = """\
from ortplug import HostProbe, ProviderType

@hookimpl
def ortplug_provider_types():
    yield ProviderType({kind!r}, {ort_name!r}, Config, aliases={aliases!r})

@hookimpl
def ortplug_host_probes():
    yield HostProbe(name={probe!r}, facts=("devices",), detect=detect)
"""


def _declaration(
    name: str, kind: str, ort_name: str, aliases: list[str], probe: str
) -> dict[str, object]:
    module = f"ortplug_{name}.plugin"
    return {
        "kinds": [
            {
                "kind": kind,
                "ort_name": ort_name,
                "config": f"{module}:Config",
                "aliases": aliases,
                "requires": [f"{probe}.devices"],
            }
        ],
        "probes": [
            {
                "name": probe,
                "facts": ["devices"],
                "detect": f"{module}:detect",
                "identity": {"env": ["ACME_HOME"]},
            }
        ],
        "hooks": ["ortplug_offer_providers"],
    }


def _install(
    site: Path,
    name: str,
    *,
    kind: str | None = None,
    ort_name: str | None = None,
    aliases: tuple[str, ...] = (),
    probe: str | None = None,
    devices: list[str] | None = None,
    declared: dict[str, object] | bool | None = True,
    hook_form: bool | None = None,
) -> str:
    """A distribution ``ortplug-<name>``, entry point ``<name>``, as pip leaves it; its module.

    ``hook_form``: the module gives its kind and probe by hook too (default: when undeclared).
    """
    kind, probe = kind or name, probe or name
    ort_name = ort_name or f"{name.capitalize()}ExecutionProvider"
    dist_info(site, f"ortplug-{name}", {name: f"ortplug_{name}.plugin"})
    package = site / f"ortplug_{name}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    values = {"kind": kind, "ort_name": ort_name, "aliases": aliases, "probe": probe}
    body = _PLUGIN.format(**values, devices=devices or [])
    if not declared if hook_form is None else hook_form:
        body += _HOOK_FORM.format(**values)
    (package / "plugin.py").write_text(body)
    if declared:
        fields = declared if isinstance(declared, dict) else None
        fields = fields or _declaration(name, kind, ort_name, list(aliases), probe)
        text = json.dumps({"ortplug": 1, "plugins": {name: fields}})
        (package / "ortplug.json").write_text(text)
    return f"ortplug_{name}.plugin"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_a_declared_plugin_is_imported_when_a_name_it_declares_is_looked_up(site: Path) -> None:
    module = _install(site, "acmea", aliases=("npua",))
    host = PluginHost(environ={})
    registry = host.provider_registry()
    assert "acmea" in registry.kinds() and registry.has_kind("acmea")
    assert module not in sys.modules
    assert host.metadata_problems(META) == []
    assert module not in sys.modules
    assert registry.parse("NPUA").kind == "acmea"
    assert module in sys.modules


def test_cached_facts_rule_a_declared_plugin_out_without_importing_it(site: Path) -> None:
    module = _install(site, "acmeb")
    first = PluginHost(environ={})
    assert first.host_capabilities().fact("acmeb", "devices") == []  # probed, and cached
    del sys.modules[module]  # imported by the first host; the second must not import it again
    second = PluginHost(environ={})
    host = second.host_capabilities()
    assert host.facts["acmeb"] == {"devices": []}  # the cached facts, shown unimported
    answers = second.offer_providers(META, host)
    (decline,) = [a for a in answers if getattr(a, "kind", None) == "acmeb"]
    assert decline == ProviderDecline(
        "acmeb",
        "needs acmeb.devices, which is [] here (declared; the plugin is not imported)",
        "acmeb",
    )
    assert module not in sys.modules


def test_an_override_brings_a_ruled_out_plugin_back_in_play(site: Path) -> None:
    _install(site, "acmec")
    PluginHost(environ={}).host_capabilities()  # caches "no device"
    forced = PluginHost(environ={"ORTPLUG_OVERRIDE_ACMEC_DEVICES": '["npu0"]'})
    answers = forced.offer_providers(META, forced.host_capabilities())
    offers = [a for a in answers if isinstance(a, ProviderOffer) and a.config.kind == "acmec"]
    assert [o.reason for o in offers] == ["a device"]


def test_an_offer_is_testable_with_injected_facts_and_no_cache(site: Path) -> None:
    _install(site, "acmed")
    host = PluginHost(environ={})
    answers = host.offer_providers(META, make_host(acmed={"devices": ["npu0"]}))
    offers = [a for a in answers if isinstance(a, ProviderOffer) and a.config.kind == "acmed"]
    assert [o.reason for o in offers] == ["a device"]
    answers = host.offer_providers(META, make_host(acmed={"devices": []}))
    (decline,) = [a for a in answers if getattr(a, "kind", None) == "acmed"]
    assert decline.reason == "no device"  # the plugin's own reason: it is imported by now


def test_a_plugin_unlike_its_declaration_is_skipped_with_one_line(site: Path) -> None:
    declared = _declaration("acmee", "acmee", "AcmeeExecutionProvider", ["npue"], "acmee")
    declared["hooks"] = ["ortplug_offer_providers", "ortplug_doctor_checks"]
    _install(site, "acmee", declared=declared)
    host = PluginHost(environ={})
    with (
        pytest.warns(OrtplugPluginWarning) as caught,
        pytest.raises(OptionError, match="its plugin 'acmee' failed in declaration"),
    ):
        host.provider_registry().parse("acmee")
    (message,) = [str(w.message) for w in caught if "'acmee'" in str(w.message)]
    assert "\n" not in message
    assert "ortplug_acmee/ortplug.json declares hooks" in message
    assert "['ortplug_doctor_checks', 'ortplug_offer_providers']" in message
    assert "implements ['ortplug_offer_providers']" in message


def test_a_declared_plugin_that_also_gives_its_kinds_by_hook_is_one_line_with_the_fix(
    site: Path,
) -> None:
    """The mixed form (a manifest, and kinds and probes by hook too) is refused, not merged."""
    _install(site, "acmem", hook_form=True)
    host = PluginHost(environ={})
    with (
        pytest.warns(OrtplugPluginWarning) as caught,
        pytest.raises(OptionError, match="its plugin 'acmem' failed in declaration"),
    ):
        host.provider_registry().parse("acmem")
    (message,) = [str(w.message) for w in caught if "'acmem'" in str(w.message)]
    assert "\n" not in message
    assert (
        "plugin 'acmem' (ortplug_acmem/ortplug.json) implements ortplug_host_probes, "
        "ortplug_provider_types, hooks of the hook form; a plugin is one form: declare its "
        "probes (each with its 'detect' function by import path) and kinds (each with its "
        "'config' class by import path) in ortplug.json and delete those hooks, or delete "
        "ortplug.json (the hook form); disable it with ORTPLUG_DISABLE_PLUGINS=acmem"
    ) in message


def test_a_broken_declaration_names_the_plugin_and_the_plugin_still_works(site: Path) -> None:
    _install(site, "acmef", declared={"hooks": ["ortplug_offer_provider"]}, hook_form=True)
    with pytest.warns(OrtplugPluginWarning, match=r"'acmef' .*failed in declaration: .*unknown"):
        host = PluginHost(environ={})
    assert host.provider_registry().parse("acmef").kind == "acmef"


def _nested_declaration(name: str) -> str:
    """A declaration of plugin ``name`` whose hooks are lists nested 100,000 deep."""
    deep = "[" * 100_000 + "]" * 100_000
    return '{"ortplug": 1, "plugins": {"' + name + '": {"hooks": ' + deep + "}}}"


@pytest.mark.parametrize(
    ("problem", "said"),
    [
        ("nested", "expected at most 32 levels of nesting, got more"),
        ("big", f"expected at most 256 KiB ({MAX_BYTES} bytes), got {MAX_BYTES + 1} bytes"),
    ],
)
def test_a_declaration_too_deep_or_too_big_is_one_line_and_the_rest_works(
    site: Path, problem: str, said: str
) -> None:
    """A 100,000-deep ortplug.json raised RecursionError out of every command, naming nothing;
    one over the size limit (valid, but parsed again at every start) was read whole."""
    name = f"acmen{problem}"  # a module once imported is found again by its name
    _install(site, name)
    declaration = site / f"ortplug_{name}" / "ortplug.json"
    if problem == "nested":
        declaration.write_text(_nested_declaration(name))
    else:
        text = declaration.read_text()
        declaration.write_text(text + " " * (MAX_BYTES + 1 - len(text)))
    with pytest.warns(OrtplugPluginWarning) as caught:
        host = PluginHost(environ={})
        registry = host.provider_registry()
    (message,) = [str(w.message) for w in caught if f"'{name}'" in str(w.message)]
    assert "\n" not in message
    assert f"(ortplug-{name} 1.0) failed in declaration" in message
    assert f"ortplug_{name}/ortplug.json: {said}" in message
    assert registry.parse("cpu").kind == "cpu"


def test_run_works_beside_a_plugin_whose_declaration_is_nested_too_deep(
    site: Path, tmp_path: Path
) -> None:
    """``ortplug run --providers cpu`` failed with ``maximum recursion depth exceeded``."""
    _install(site, "acmeo")
    (site / "ortplug_acmeo" / "ortplug.json").write_text(_nested_declaration("acmeo"))
    env = {**os.environ, "PYTHONPATH": str(site), "ORTPLUG_CACHE_DIR": str(tmp_path / "cache")}
    code = "import sys\nfrom ortplug.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    args = ["run", "--providers", "cpu", "--repeat", "1", "--json"]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"]
    (line,) = [line for line in done.stderr.splitlines() if "'acmeo'" in line]
    assert "ortplug_acmeo/ortplug.json: expected at most 32 levels of nesting" in line


def test_an_edited_declaration_is_read_again(site: Path) -> None:
    """The remembered scan is keyed by the sys.path folders, which an edited ortplug.json (an
    editable install, a new release of the code and its declaration) does not change."""
    module = _install(site, "acmeh")
    first = PluginHost(environ={})
    assert first.provider_registry().has_kind("acmeh") and module not in sys.modules
    package = site / "ortplug_acmeh"
    plugin = package / "plugin.py"
    plugin.write_text(plugin.read_text().replace("aliases=()", "aliases=('npuh',)"))
    declared = json.loads((package / "ortplug.json").read_text())
    declared["plugins"]["acmeh"]["kinds"][0]["aliases"] = ["npuh"]
    (package / "ortplug.json").write_text(json.dumps(declared))
    second = PluginHost(environ={})
    assert second.provider_registry().parse("npuh").kind == "acmeh"
    assert module in sys.modules and not second.failures


def test_an_undeclared_plugin_is_imported_at_start_and_listed_with_the_fix(site: Path) -> None:
    module = _install(site, "acmeg", declared=False)
    host = PluginHost(environ={})
    assert module in sys.modules
    (row,) = [row for row in host.plugin_infos() if row.name == "acmeg"]
    assert row.status == "active"
    assert row.note is not None and "ortplug.json" in row.note
    assert all(r.note is None for r in host.plugin_infos() if r.name == "cuda")


@pytest.mark.parametrize("declared", [False, True])
def test_a_slow_plugin_import_is_named_with_its_cost(site: Path, declared: bool) -> None:
    """What a plugin's import costs every process it is imported in is said, not paid silently."""
    module = _install(site, f"acmes{int(declared)}", declared=declared)
    plugin_file = site / module.replace(".", "/")
    plugin_file = plugin_file.with_suffix(".py")
    plugin_file.write_text("import time\ntime.sleep(0.2)\n" + plugin_file.read_text())
    host = PluginHost(environ={})
    (row,) = [row for row in host.plugin_infos() if row.name == f"acmes{int(declared)}"]
    assert row.note is not None
    milliseconds = int(row.note.split(" ms")[0].split()[-1].lstrip("("))
    assert 200 <= milliseconds < 5000, row.note
    assert ("ortplug.json" in row.note) is not declared


# -- precedence: the shipped plugins' names are theirs ----------------------------------------


@pytest.mark.parametrize("declared", [True, False])
def test_a_third_party_cannot_take_a_shipped_kind(site: Path, declared: bool) -> None:
    _install(site, "zcpu", kind="cpu", ort_name="CPUExecutionProvider", declared=declared)
    with pytest.warns(OrtplugPluginWarning) as caught:
        host = PluginHost(environ={})
        spec = host.provider_registry().lookup("cpu")
        host.plugin_infos()
    assert spec.plugin == "cpu"
    (message,) = [str(w.message) for w in caught if "'zcpu'" in str(w.message)]
    assert "already claimed by plugin 'cpu' (ortplug-cpu" in message
    assert "plugin 'zcpu' (ortplug-zcpu 1.0) is skipped" in message


def test_a_third_party_cannot_take_a_shipped_probe_name(site: Path) -> None:
    _install(site, "zprobe", probe="cuda")
    with pytest.warns(OrtplugPluginWarning, match="probe name 'cuda' is already claimed by plugin"):
        host = PluginHost(environ={})
        host.provider_registry().kinds()
    assert {row.name: row.status for row in host.plugin_infos()}["cuda"] == "active"


def test_a_blocked_provider_says_what_blocks_it() -> None:
    host = PluginHost(environ={"ORTPLUG_PLUGINS": "cpu"})
    with pytest.raises(OptionError) as caught:
        host.provider_registry().parse("cuda")
    assert "its plugin 'cuda' is blocked by ORTPLUG_PLUGINS=" in str(caught.value)
    host = PluginHost(environ={"ORTPLUG_DISABLE_PLUGINS": "tensorrt"})
    with pytest.raises(OptionError, match="blocked by ORTPLUG_DISABLE_PLUGINS="):
        host.provider_registry().parse("trt")


# -- a CPU-only host imports no accelerator plugin ---------------------------------------------

_BUILD = """\
import sys
import numpy as np
from ortplug import LocalCheckpoint, OnnxBackend
from ortplug.testing import demo_model
providers = None if sys.argv[1] == "policy" else sys.argv[1].split(",")
backend = OnnxBackend.from_checkpoint(LocalCheckpoint(demo_model()).resolve(), providers=providers)
backend.run({"x": np.zeros((1, 8), np.float32)})
print(" ".join(sorted({m.partition(".")[0] for m in sys.modules if m.startswith("ortplug_")})))
"""

#: Which plugins offered a provider here (an Intel host's OpenVINO may): they are in play.
_OFFERING = """from ortplug import LocalCheckpoint, ProviderOffer, get_plugin_host
from ortplug.testing import demo_model
plugins = get_plugin_host()
checkpoint = LocalCheckpoint(demo_model()).resolve()
answers = plugins.offer_providers(checkpoint.metadata, plugins.host_capabilities(), checkpoint)
print(" ".join(f"ortplug_{a.plugin}" for a in answers if isinstance(a, ProviderOffer)))
"""

_CLI = """\
import sys
from ortplug.cli.main import main
main(["run", "--repeat", "1", "--json"])
print(" ".join(sorted({m.partition(".")[0] for m in sys.modules if m.startswith("ortplug_")})))
"""


def _imported(code: str, *args: str, cache: Path) -> set[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ORTPLUG_OVERRIDE_", "ORTPLUG_WEBGPU_"))
    }
    env["ORTPLUG_CACHE_DIR"] = str(cache)
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.splitlines()[-1].split())


def test_a_cpu_only_build_imports_no_accelerator_plugin(tmp_path: Path, monkeypatch) -> None:
    """Once the probes' facts are cached, a build and ``ortplug run`` import only what can run.

    Checked in fresh processes: the policy's build and ``ortplug run`` import no
    accelerator plugin that offers nothing here; an explicit ``cpu`` chain none at all.
    """
    monkeypatch.delenv("ORTPLUG_DISABLE_PLUGINS")  # about every installed plugin, the example too
    first = _imported(_BUILD, "policy", cache=tmp_path)  # probes run, their facts are cached
    assert set(ACCELERATOR_MODULES) - {"ortplug_coreml"} <= first
    offering = _imported(_OFFERING, cache=tmp_path)
    for code, args in ((_BUILD, ("policy",)), (_CLI, ())):
        imported = _imported(code, *args, cache=tmp_path)
        assert "ortplug_cpu" in imported
        assert not (imported & set(ACCELERATOR_MODULES)) - offering, (code, args)
    assert not _imported(_BUILD, "cpu", cache=tmp_path) & set(ACCELERATOR_MODULES)


def test_a_declared_plugin_adjusts_only_the_sessions_of_its_kinds(site: Path) -> None:
    """A manifest plugin owns the kinds it declares: its ortplug_adjust_session_options is asked
    for a chain with its kind, not for every session (it was: its kinds come by no hook)."""
    from ortplug.plugins import SessionOptionsConfig
    from ortplug.testing import make_host as hand_made

    declared = _declaration("acmeadj", "acmeadj", "AcmeadjExecutionProvider", [], "acmeadj")
    declared["hooks"] = ["ortplug_adjust_session_options", "ortplug_offer_providers"]
    module = _install(site, "acmeadj", declared=declared)
    plugin_file = site / "ortplug_acmeadj" / "plugin.py"
    plugin_file.write_text(
        plugin_file.read_text()
        + "\n@hookimpl\ndef ortplug_adjust_session_options(session_options):\n"
        "    return session_options.evolve(inter_op_num_threads=3)\n"
    )
    host = PluginHost(environ={})
    registry = host.provider_registry()
    mine = registry.parse("acmeadj")  # imports the plugin: its hooks are registered
    cpu_only = host.adjust_session_options(
        SessionOptionsConfig(), [registry.parse("cpu")], META, hand_made()
    )
    assert cpu_only.inter_op_num_threads is None
    own = host.adjust_session_options(
        SessionOptionsConfig(),
        [mine, registry.parse("cpu")],
        META,
        hand_made(),
    )
    assert own.inter_op_num_threads == 3 and module in sys.modules
