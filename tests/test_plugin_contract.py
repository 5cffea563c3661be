"""The plugin contract, enforced at the door: what a plugin cannot do to the host."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import threading
import time
import warnings
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
    NoProviderError,
    OnnxBackend,
    OrtplugPluginWarning,
    PluginHost,
    ProviderDecline,
    ProviderOffer,
    ProviderType,
    hookimpl,
)
from ortplug.errors import OrtplugConfigWarning, PluginConflictError
from ortplug.plugins import hookspecs
from ortplug.plugins.hookspecs import CONTRACTS, MAX_ITEMS
from ortplug_cpu import CpuProvider

CORE = Path(__file__).resolve().parents[1] / "core" / "src" / "ortplug"
META = CheckpointMetadata(input_names=["a", "b"], output_names=["c"])


# -- declared beside the spec -------------------------------------------------------------------


def test_every_hook_spec_declares_its_call_mode() -> None:
    specs = {name for name in dir(hookspecs) if name.startswith("ortplug_")}
    assert specs, "no hook specs found"
    assert specs == set(CONTRACTS), f"specs without a declared call mode: {specs - set(CONTRACTS)}"


def test_the_core_has_no_import_cycle() -> None:
    """Every run-time import between core modules, deferred ones included, forms no cycle."""
    modules = {
        ".".join(path.relative_to(CORE.parent).with_suffix("").parts).removesuffix(
            ".__init__"
        ): path
        for path in CORE.rglob("*.py")
    }
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        type_only = {
            id(inner)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
            for inner in ast.walk(block)
        }
        for node in ast.walk(tree):
            if id(node) in type_only:  # annotations only: no import at run time
                continue
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                base = package.split(".")
                if node.level:
                    base = base[: len(base) - node.level + 1]
                    target = ".".join([*base, node.module] if node.module else base)
                else:
                    target = node.module or ""
                for alias in node.names:  # ``from pkg import submodule`` imports the submodule
                    submodule = f"{target}.{alias.name}"
                    imported = submodule if submodule in modules else target
                    if imported in modules and imported != name:
                        graph[name].add(imported)
    visiting: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> None:
        if node in done:
            return
        if node in visiting:
            cycle = [*visiting[visiting.index(node) :], node]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        visiting.append(node)
        for target in sorted(graph[node]):
            visit(target)
        visiting.pop()
        done.add(node)

    for name in sorted(graph):
        visit(name)


def test_no_code_switches_on_policy_classes() -> None:
    offenders = [
        f"{path.relative_to(CORE)}:{number}"
        for path in CORE.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "isinstance(policy" in line or "type(policy)" in line
    ]
    assert offenders == []


# -- refused at registration --------------------------------------------------------------------


class _NoHooks:
    def ortplug_offer_providers(self):  # not marked with @hookimpl
        return []


class _DefaultArgument:
    @hookimpl
    def ortplug_offer_providers(self, metadata, host=None):
        return []


class _UnknownArgument:
    @hookimpl
    def ortplug_offer_providers(self, metadata, hots):
        return []


def test_an_object_without_hook_implementations_is_refused(plugin_host: PluginHost) -> None:
    with pytest.warns(OrtplugPluginWarning, match="has no @hookimpl-marked ortplug_\\* function"):
        assert plugin_host.register(_NoHooks(), name="nohooks") is False
    assert "nohooks" not in plugin_host.plugin_names()


def test_an_implementation_with_defaults_is_refused(plugin_host: PluginHost) -> None:
    with pytest.warns(OrtplugPluginWarning, match=r"gives argument\(s\) \['host'\] a default"):
        assert plugin_host.register(_DefaultArgument(), name="defaults") is False


def test_pluggy_validation_message_is_kept_whole(plugin_host: PluginHost) -> None:
    with pytest.warns(OrtplugPluginWarning) as caught:
        assert plugin_host.register(_UnknownArgument(), name="typo") is False
    message = str(caught[0].message)
    assert "\n" not in message  # one line
    for part in ("'typo'", "ortplug_offer_providers", "hots"):
        assert part in message
    (failure,) = plugin_host.failures
    assert "hots" in failure.error


# -- isolated at run time -----------------------------------------------------------------------


@attrs.frozen
class _GhostConfig:
    kind: ClassVar[str] = "ghostly"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "GhostlyExecutionProvider", {}


class _OffersUnregisteredKind:
    @hookimpl
    def ortplug_offer_providers(self):
        yield ProviderOffer(_GhostConfig(), preference=99, reason="never registered")
        yield ProviderDecline("phantom", "never registered either")


def test_offers_of_unregistered_kinds_are_dropped_naming_the_plugin(
    plugin_host: PluginHost, cpu_host
) -> None:
    assert plugin_host.register(_OffersUnregisteredKind(), name="ghostly")
    with pytest.warns(OrtplugPluginWarning) as caught:
        answers = plugin_host.offer_providers(META, cpu_host)
    assert {type(a).__name__ for a in answers} == {"ProviderOffer"}
    assert [a.config.kind for a in answers] == ["cpu"]
    messages = [str(w.message) for w in caught]
    assert any("'ghostly'" in m and "kind 'ghostly' is not registered" in m for m in messages)
    assert any("kind 'phantom' is not registered" in m for m in messages)


class _EmptyChain:
    @hookimpl(tryfirst=True)
    def ortplug_provider_chain(self, offers):
        return []


def test_an_empty_chain_names_the_chain_hook(plugin_host: PluginHost) -> None:
    assert plugin_host.register(_EmptyChain(), name="sitepolicy")
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    with pytest.raises(NoProviderError, match="provider-chain hook of plugin 'sitepolicy'"):
        OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)


class _ExitsOnOffer:
    @hookimpl
    def ortplug_offer_providers(self):
        sys.exit(3)


class _ExitsOnProbe:
    @hookimpl
    def ortplug_host_probes(self):
        def bail():
            raise SystemExit("probe quit")

        yield HostProbe(name="quitter", facts=("x",), detect=bail)


def test_system_exit_in_a_hook_or_probe_is_isolated(plugin_host: PluginHost, cpu_host) -> None:
    assert plugin_host.register(_ExitsOnOffer(), name="exiter")
    assert plugin_host.register(_ExitsOnProbe(), name="quitter")
    with pytest.warns(OrtplugPluginWarning, match="SystemExit"):
        answers = plugin_host.offer_providers(META, cpu_host)
        host = plugin_host.host_capabilities()
    assert [a.config.kind for a in answers] == ["cpu"]
    assert host.fact("quitter", "x") is None
    assert host.fact("cpu", "usable_cpus") >= 1


def test_system_exit_at_import_is_isolated(tmp_path: Path) -> None:
    """A real installed entry point whose module calls sys.exit(): the CLI still works."""
    dist_info(tmp_path, "ortplug-exits", {"exits": "ortplug_exits"})
    (tmp_path / "ortplug_exits.py").write_text("import sys\nsys.exit('plugin says bye')\n")
    script = textwrap.dedent(
        f"""
        import sys, warnings
        sys.path.insert(0, {str(tmp_path)!r})
        warnings.simplefilter("always")
        from ortplug import PluginHost
        host = PluginHost()
        print("alive", "cpu" in host.plugin_names())
        print([f.phase for f in host.failures if f.plugin == "exits"])
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "alive True" in done.stdout
    assert "['import']" in done.stdout


class _Endless:
    @hookimpl
    def ortplug_doctor_checks(self):
        from ortplug import DoctorCheck

        number = 0
        while True:  # an endless generator: the host must stop reading it
            number += 1
            yield DoctorCheck(f"check {number}", True, "fine")


def test_a_collecting_hook_is_cut_at_the_bound(plugin_host: PluginHost, cpu_host) -> None:
    assert plugin_host.register(_Endless(), name="endless")
    with pytest.warns(OrtplugPluginWarning, match=f"more than {MAX_ITEMS} items"):
        checks = [c for c in plugin_host.doctor_checks(cpu_host) if c.plugin == "endless"]
    assert len(checks) == MAX_ITEMS


# -- probes with a deadline ---------------------------------------------------------------------


class _HangingProbe:
    def __init__(self) -> None:
        self.release = threading.Event()

    @hookimpl
    def ortplug_provider_types(self):
        yield ProviderType("hangs", "HangsExecutionProvider", _HangsConfig)

    @hookimpl
    def ortplug_host_probes(self):
        def hang():
            self.release.wait(30)
            return {"ready": True}

        yield HostProbe(name="hangs", facts=("ready",), detect=hang, timeout=0.3)


@attrs.frozen
class _HangsConfig:
    kind: ClassVar[str] = "hangs"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "HangsExecutionProvider", {}


def test_a_hanging_probe_costs_its_deadline_once_and_is_reported(plugin_host: PluginHost) -> None:
    plugin = _HangingProbe()
    assert plugin_host.register(plugin, name="hangs")
    try:
        with pytest.warns(OrtplugPluginWarning, match="'hangs'.*no answer within 0.3 s"):
            started = time.monotonic()
            host = plugin_host.host_capabilities()
        first = time.monotonic() - started
        assert host.fact("hangs", "ready") is None
        assert host.fact("cpu", "usable_cpus") >= 1  # the other probes answered
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            started = time.monotonic()
            plugin_host.unregister("hangs")
            assert plugin_host.register(plugin, name="hangs")
            plugin_host.host_capabilities()  # the hung run is not waited for again
        again = time.monotonic() - started
        assert first >= 0.3
        assert again < first + 5  # generous: only that it does not wait a fresh deadline twice
    finally:
        plugin.release.set()


def test_an_explicit_chain_runs_only_the_probes_it_needs(plugin_host: PluginHost) -> None:
    plugin = _HangingProbe()
    assert plugin_host.register(plugin, name="hangs")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the hanging probe is never waited for
            backend = OnnxBackend.from_checkpoint(
                InMemoryCheckpoint(models.add_model()).resolve(),
                providers=["cpu"],
                plugins=plugin_host,
            )
        assert backend.providers == ("CPUExecutionProvider",)
        assert "hangs" not in backend.report.host.get("facts", {})
    finally:
        plugin.release.set()


# -- conflicts ----------------------------------------------------------------------------------


class _SecondCpuProbe:
    @hookimpl
    def ortplug_host_probes(self):
        yield HostProbe(name="cpu", facts=("usable_cpus",), detect=lambda: {"usable_cpus": 999})


def test_a_probe_name_claimed_twice_skips_the_later_plugin(plugin_host: PluginHost) -> None:
    assert plugin_host.register(_SecondCpuProbe(), name="impostor")
    with pytest.warns(
        OrtplugPluginWarning, match="probe name 'cpu' is already claimed by plugin 'cpu'"
    ):
        host = plugin_host.host_capabilities()
    assert host.fact("cpu", "usable_cpus") != 999
    status = {p.name: p.status for p in plugin_host.plugin_infos()}
    assert status["impostor"] == "failed" and status["cpu"] == "active"


@attrs.frozen
class _AcmeConfig:
    kind: ClassVar[str] = "acme"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "AzureExecutionProvider", {}


class _Acme:
    """A plugin object offering kind ``acme`` (registered directly: no distribution)."""

    @hookimpl
    def ortplug_provider_types(self):
        yield ProviderType("acme", "AzureExecutionProvider", _AcmeConfig)


def test_a_kind_claimed_twice_names_both_plugins_and_calls_neither_the_core() -> None:
    """It said the first claimant was "the core" (any plugin without a distribution was), and
    PluginConflictError, which the hook specs promise, could not reach a user."""
    host = PluginHost(load_entry_points=False, environ={})
    assert host.register(_Acme(), name="first") and host.register(_Acme(), name="second")
    with pytest.warns(OrtplugPluginWarning) as caught:
        assert host.provider_registry().has_kind("acme")
    (message,) = [str(w.message) for w in caught if "already claimed" in str(w.message)]
    assert "already claimed by plugin 'first' (no distribution); plugin 'second' " in message
    assert "the core" not in message
    strict = PluginHost(load_entry_points=False, environ={"ORTPLUG_STRICT_PLUGINS": "1"})
    assert strict.register(_Acme(), name="first") and strict.register(_Acme(), name="second")
    with pytest.raises(PluginConflictError, match="already claimed by plugin 'first'"):
        strict.provider_registry()


# -- overrides ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("ORTPLUG_OVERRIDE_PLATFORM", "", "a non-empty platform"),
        ("ORTPLUG_OVERRIDE_CPU_USABLE_CPUS", "many", "a JSON int"),
        ("ORTPLUG_OVERRIDE_CPU_USABLE_CPUS", "true", "a JSON int"),
    ],
)
def test_a_bad_override_is_one_warning_and_ignored(variable, value, expected) -> None:
    from ortplug.testing import make_plugin_host

    plugins = make_plugin_host(environ={variable: value})
    with pytest.warns(OrtplugConfigWarning, match=f"ignoring {variable}=.*expected {expected}"):
        host = plugins.host_capabilities()
    assert host.platform == sys.platform
    assert isinstance(host.fact("cpu", "usable_cpus"), int)


def test_typed_fields_of_a_library_provider_reach_onnx_runtime() -> None:
    from ortplug.errors import OptionError
    from ortplug.plugins.ep_package import LibraryProvider
    from ortplug.providers.options import bool_field

    @attrs.frozen(kw_only=True)
    class AcmeProvider(LibraryProvider):
        kind: ClassVar[str] = "acme"
        ort_name: ClassVar[str] = "AcmeExecutionProvider"
        known_options: ClassVar[frozenset[str] | None] = frozenset({"cache_dir"})
        fast: bool | None = bool_field()

    assert AcmeProvider(fast=True, options={"cache_dir": "/c"}).to_ort() == (
        "AcmeExecutionProvider",
        {"fast": "1", "cache_dir": "/c"},
    )
    with pytest.raises(
        OptionError, match=r"unknown option\(s\) \['fsat'\]; allowed: cache_dir, fast"
    ):
        AcmeProvider(options={"fsat": "1"})
    with pytest.raises(OptionError, match=r"\['fast'\] given both"):
        AcmeProvider(fast=True, options={"fast": "0"})
    with pytest.raises(ValueError, match="fast"):
        AcmeProvider(fast="yes")  # type: ignore[arg-type]


def test_an_uninstalled_shipped_provider_names_its_distribution(plugin_host: PluginHost) -> None:
    from ortplug.errors import OptionError

    for name in ("cuda", "CUDAExecutionProvider"):
        with pytest.raises(OptionError) as caught:
            OnnxBackend.from_checkpoint(
                InMemoryCheckpoint(models.add_model()).resolve(),
                providers=[name, "cpu"],
                plugins=plugin_host,
            )
        message = str(caught.value)
        assert "ortplug-cuda" in message and "/core[cuda]' " in message  # the checkout's install
        assert "cpuexecutionprovider" not in message.lower()


def test_the_cpu_config_is_what_the_host_parses(plugin_host: PluginHost) -> None:
    assert plugin_host.provider_registry().parse({"kind": "cpu", "threads": 2}) == CpuProvider(
        threads=2
    )


def test_two_installed_plugins_claiming_one_kind_fail_only_in_doctor(tmp_path: Path) -> None:
    """Real distributions: the later one is skipped; doctor names both; other commands work."""
    import json
    import os

    for name in ("first", "second"):
        dist_info(tmp_path, f"ortplug-claim-{name}", {f"claim{name}": f"ortplug_claim_{name}"})
        (tmp_path / f"ortplug_claim_{name}.py").write_text(
            textwrap.dedent(
                """
                from typing import ClassVar
                import attrs
                from ortplug import ProviderType, hookimpl

                @attrs.frozen
                class AcmeProvider:
                    kind: ClassVar[str] = "acme"
                    def to_ort(self):
                        return "AzureExecutionProvider", {}

                @hookimpl
                def ortplug_provider_types():
                    yield ProviderType("acme", "AzureExecutionProvider", AcmeProvider)
                """
            )
        )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "ORTPLUG_CACHE_DIR": str(tmp_path / "c")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ortplug.cli.main", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env)

    doctor = cli("doctor", "--json")
    assert doctor.returncode == 1
    failed = [c for c in json.loads(doctor.stdout)["checks"] if not c["ok"]]
    details = " ".join(f"{c['name']} {c['detail']}" for c in failed)
    assert "ortplug-claim-first 1.0" in details and "ortplug-claim-second 1.0" in details
    plugins = {p["name"]: p["status"] for p in json.loads(cli("plugins", "--json").stdout)}
    assert sorted(s for n, s in plugins.items() if n.startswith("claim")) == ["active", "failed"]
    run = cli("run", "--providers", "acme,cpu", "--repeat", "1")
    assert run.returncode == 0, run.stderr
