"""One test per hook spec (named test_hook_<spec>) and the meta-tests that demand them."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import models
import numpy as np
import pytest
from ortplug import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    OnnxBackend,
    PluginHost,
    SessionOptionsConfig,
    hookimpl,
)
from ortplug.plugins import hookspecs
from ortplug_cpu import CpuProvider
from plugin_objects import ChainOverride, FakeCudaPlugin, FakeCudaProvider

SPECS = sorted(name for name in dir(hookspecs) if name.startswith("ortplug_"))
README = Path(__file__).resolve().parents[1] / "README.md"
META = CheckpointMetadata(input_names=["a", "b"], output_names=["c"])


def test_every_hook_spec_has_a_test() -> None:
    tests = {name for name in globals() if name.startswith("test_hook_")}
    assert SPECS and {f"test_hook_{spec}" for spec in SPECS} <= tests


@pytest.mark.parametrize("spec", SPECS)
def test_every_hook_spec_is_documented_with_its_exact_arguments(spec: str) -> None:
    function = getattr(hookspecs, spec)
    assert function.__doc__ and len(function.__doc__.strip()) > 40
    args = ", ".join(inspect.signature(function).parameters)
    assert f"`{spec}({args})`" in README.read_text(), f"README lacks `{spec}({args})`"


def test_hook_ortplug_provider_types(plugin_host: PluginHost) -> None:
    assert plugin_host.register(FakeCudaPlugin(), name="fakecuda")
    registry = plugin_host.provider_registry()
    assert registry.kinds() == ["cpu", "fakecuda"]
    assert registry.lookup("gpu").plugin == "fakecuda"


def test_hook_ortplug_host_probes(plugin_host: PluginHost) -> None:
    assert plugin_host.register(FakeCudaPlugin(), name="fakecuda")
    host = plugin_host.host_capabilities()
    assert host.fact("fakecuda", "devices") == 0
    assert host.fact("cpu", "usable_cpus") >= 1
    assert plugin_host.host_capabilities() is host  # probed once


def test_hook_ortplug_offer_providers(plugin_host: PluginHost, cpu_host) -> None:
    assert plugin_host.register(FakeCudaPlugin(), name="fakecuda")
    gpu_host = _with_fact(cpu_host, "fakecuda", devices=1)
    offers = plugin_host.offer_providers(META, gpu_host)
    assert {(o.plugin, o.config.kind) for o in offers} == {("cpu", "cpu"), ("fakecuda", "fakecuda")}
    assert {o.config.kind for o in plugin_host.offer_providers(META, cpu_host)} == {"cpu"}


def test_hook_ortplug_provider_chain(plugin_host: PluginHost, cpu_host) -> None:
    assert plugin_host.register(FakeCudaPlugin(), name="fakecuda")
    gpu_host = _with_fact(cpu_host, "fakecuda", devices=1)
    offers = plugin_host.offer_providers(META, gpu_host)
    assert plugin_host.provider_chain(offers, META, gpu_host) == [FakeCudaProvider(), CpuProvider()]
    assert plugin_host.register(ChainOverride(), name="site")
    assert plugin_host.provider_chain(offers, META, gpu_host) == [CpuProvider()]


class _DeterministicPlugin:
    @hookimpl
    def ortplug_adjust_session_options(self, session_options):
        return session_options.with_config_entries({"session.use_deterministic_compute": "1"})


def test_hook_ortplug_adjust_session_options(plugin_host: PluginHost, cpu_host) -> None:
    assert plugin_host.register(_DeterministicPlugin(), name="deterministic")
    limited = _with_fact(cpu_host, "cpu", usable_cpus=2)
    options = plugin_host.adjust_session_options(
        SessionOptionsConfig(), [CpuProvider(allow_spinning=False)], META, limited
    )
    assert options.intra_op_num_threads == 2  # from the CPU plugin
    assert options.config_entries == {
        "session.use_deterministic_compute": "1",
        "session.intra_op.allow_spinning": "0",
    }
    # and it reaches the real session
    backend = OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(models.add_model()).resolve(), plugins=plugin_host
    )
    one = np.ones((1, 4), np.float32)
    assert backend.run({"a": one, "b": one})["c"].sum() == 8.0


def _with_fact(host, probe: str, **facts):
    import attrs

    merged = {k: dict(v) for k, v in host.facts.items()}
    merged.setdefault(probe, {}).update(facts)
    return attrs.evolve(host, facts=merged)


def test_readme_hook_headings_match_the_specs() -> None:
    documented = set(re.findall(r"`(ortplug_[a-z_]+)\(", README.read_text()))
    assert documented == set(SPECS)
