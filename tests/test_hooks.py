"""One test per hook spec (named test_hook_<spec>) and the meta-tests that demand them."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import models
import numpy as np
import ortplug_cpu.plugin as cpu_plugin
import pytest
from ortplug import (
    CheckpointMetadata,
    DefaultProviderPolicy,
    DoctorCheck,
    InMemoryCheckpoint,
    OnnxBackend,
    OrtplugPluginWarning,
    PluginHost,
    ProviderDecline,
    ProviderOffer,
    SessionOptionsConfig,
    hookimpl,
)
from ortplug.plugins import ProviderType, hookspecs
from ortplug.session.plan import plan_session
from ortplug.testing import make_plugin_host
from ortplug_cpu import CpuProvider
from plugin_objects import ChainOverride, FakeCudaPlugin, FakeCudaProvider

SPECS = sorted(name for name in dir(hookspecs) if name.startswith("ortplug_"))
#: The plugin guide, where each hook is documented with its arguments.
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"
META = CheckpointMetadata(input_names=["a", "b"], output_names=["c"])


def test_every_hook_spec_has_a_test() -> None:
    tests = {name for name in globals() if name.startswith("test_hook_")}
    assert SPECS and {f"test_hook_{spec}" for spec in SPECS} <= tests


@pytest.mark.parametrize("spec", SPECS)
def test_every_hook_spec_is_documented_with_its_exact_arguments(spec: str) -> None:
    function = getattr(hookspecs, spec)
    assert function.__doc__ and len(function.__doc__.strip()) > 40
    args = ", ".join(inspect.signature(function).parameters)
    assert f"`{spec}({args})`" in GUIDE.read_text(), f"docs/plugins.md lacks `{spec}({args})`"


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
    here = plugin_host.offer_providers(META, cpu_host)
    assert {o.config.kind for o in here if isinstance(o, ProviderOffer)} == {"cpu"}
    assert [(d.kind, d.reason, d.plugin) for d in here if isinstance(d, ProviderDecline)] == [
        ("fakecuda", "no pretend GPU on this host", "fakecuda")
    ]


class _CheckpointAwareOffers:
    @hookimpl
    def ortplug_offer_providers(self, checkpoint):
        if checkpoint is not None and checkpoint.metadata.precision == "fp32":
            yield ProviderOffer(CpuProvider(threads=1), preference=5, reason="seen the weights")


def test_offers_see_the_checkpoint_when_the_policy_has_one(
    plugin_host: PluginHost, cpu_host
) -> None:
    assert plugin_host.register(_CheckpointAwareOffers(), name="aware")
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    policy = DefaultProviderPolicy(plugin_host)
    assert policy.explain(checkpoint.metadata, cpu_host).chain == (CpuProvider(),)
    assert policy.explain(checkpoint.metadata, cpu_host, checkpoint).chain == (
        CpuProvider(threads=1),
    )


def test_hook_ortplug_provider_chain(plugin_host: PluginHost, cpu_host) -> None:
    assert plugin_host.register(FakeCudaPlugin(), name="fakecuda")
    gpu_host = _with_fact(cpu_host, "fakecuda", devices=1)
    offers = plugin_host.offer_providers(META, gpu_host)
    assert plugin_host.provider_chain(offers, META, gpu_host)[0] == [
        FakeCudaProvider(),
        CpuProvider(),
    ]
    assert plugin_host.register(ChainOverride(), name="site")
    assert plugin_host.provider_chain(offers, META, gpu_host)[0] == [CpuProvider()]


@hookimpl
def _prepare_threads(config, checkpoint):
    """Fills the CPU thread count from the model; rejects a config that cannot work."""
    if config.threads is None:
        return CpuProvider(threads=len(checkpoint.input_shapes()))
    if config.threads == 7:
        raise ValueError("threads=7 cannot work for this checkpoint")
    return None


@hookimpl
def _prepare_broken(config):
    raise KeyError("bug")


@hookimpl
def _prepare_wrong_kind(config):
    return FakeCudaProvider()


@hookimpl
def _cpu_type():
    """The ``cpu`` kind as a hook gives it (the CPU plugin declares it in its ortplug.json)."""
    yield ProviderType("cpu", CpuProvider.ort_name, CpuProvider, concurrent_runs=True)


def _cpu_preparing_with(prepare: object) -> PluginHost:
    """A host whose ``cpu`` plugin is the CPU plugin plus ``prepare`` (only a kind's owner prepares it)."""

    class Cpu:
        ortplug_provider_types = staticmethod(_cpu_type)
        ortplug_offer_providers = staticmethod(cpu_plugin.ortplug_offer_providers)
        ortplug_adjust_session_options = staticmethod(cpu_plugin.ortplug_adjust_session_options)
        ortplug_prepare_provider = staticmethod(prepare)

    return make_plugin_host(("cpu", Cpu()), cpu=False)


def test_hook_ortplug_prepare_provider(cpu_host) -> None:
    plugin_host = _cpu_preparing_with(_prepare_threads)
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()  # inputs a and b
    assert plugin_host.prepare_provider(CpuProvider(), checkpoint, cpu_host) == CpuProvider(
        threads=2
    )
    assert plugin_host.prepare_provider(
        CpuProvider(threads=3), checkpoint, cpu_host
    ) == CpuProvider(threads=3)
    # it runs before the session is built, for explicit and policy chains alike
    for providers in (None, ["cpu"]):
        plan = plan_session(checkpoint, providers, None, None, plugin_host)
        assert plan.chain == (CpuProvider(threads=2),)
        assert plan.options.intra_op_num_threads == 2
    # a ValueError is the user's error and reaches them as is
    with pytest.raises(ValueError, match="threads=7 cannot work"):
        OnnxBackend.from_checkpoint(
            checkpoint, providers=[CpuProvider(threads=7)], plugins=plugin_host
        )


class _PreparesOthers:
    @hookimpl
    def ortplug_prepare_provider(self, config):
        raise AssertionError("asked to prepare a kind it does not own")


def test_only_the_plugin_that_owns_a_kind_prepares_it(plugin_host: PluginHost, cpu_host) -> None:
    assert plugin_host.register(_PreparesOthers(), name="others")
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    assert plugin_host.prepare_provider(CpuProvider(), checkpoint, cpu_host) == CpuProvider()
    assert plugin_host.failures == ()


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (_prepare_broken, "'cpu' failed in ortplug_prepare_provider: KeyError: 'bug'"),
        (
            _prepare_wrong_kind,
            "'cpu' failed in ortplug_prepare_provider: TypeError: expected a 'cpu'",
        ),
    ],
)
def test_a_broken_or_wrong_prepare_is_a_plugin_failure(prepare, message, cpu_host) -> None:
    plugin_host = _cpu_preparing_with(prepare)
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    with pytest.warns(OrtplugPluginWarning, match=re.escape(message)):
        assert plugin_host.prepare_provider(CpuProvider(), checkpoint, cpu_host) == CpuProvider()


class _DoctorPlugin:
    @hookimpl
    def ortplug_doctor_checks(self, host):
        usable = host.fact("cpu", "usable_cpus")
        yield DoctorCheck("acme npu", usable > 100, f"{usable} CPUs", fix="buy a bigger host")


def test_hook_ortplug_doctor_checks(plugin_host: PluginHost, cpu_host) -> None:
    assert plugin_host.register(_DoctorPlugin(), name="acme")
    checks = {c.name: c for c in plugin_host.doctor_checks(cpu_host)}
    assert checks["acme npu"] == DoctorCheck(
        "acme npu", False, "8 CPUs", "buy a bigger host", "acme"
    )
    assert checks["cpu threads"].ok and checks["cpu threads"].plugin == "cpu"
    from ortplug.cli._doctor import run_checks

    names = [c.name for c in run_checks(plugin_host)]
    assert names[0] == "onnxruntime" and "acme npu" in names


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
    documented = set(re.findall(r"`(ortplug_[a-z_]+)\(", GUIDE.read_text()))
    assert documented == set(SPECS)


class _KeysPlugin:
    @hookimpl
    def ortplug_metadata_keys(self):
        from ortplug import MetadataKey

        yield MetadataKey("acme_tiles", int, "tile count")


def test_hook_ortplug_metadata_keys(plugin_host: PluginHost) -> None:
    assert plugin_host.register(_KeysPlugin(), name="acme")
    keys = plugin_host.metadata_keys()
    assert keys["acme_tiles"].plugin == "acme" and keys["dim_ranges"].plugin == "ortplug"
    meta = CheckpointMetadata(
        input_names=["a"], output_names=["c"], extra={"acme_tiles": 2.5, "acme_tile": 2}
    )
    problems = plugin_host.metadata_problems(meta)
    assert problems[0].startswith("metadata extra 'acme_tiles': expected int")
    assert "did you mean 'acme_tiles'" in problems[1]
