"""Choosing and enforcing chains: explicit chains are strict, policy chains graceful."""

from __future__ import annotations

import warnings

import models
import numpy as np
import ortplug_cpu.plugin
import pytest
from ortplug import (
    CheckpointMetadata,
    DefaultProviderPolicy,
    InMemoryCheckpoint,
    OnnxBackend,
    PluginHost,
    ProviderFallbackWarning,
    ProviderNotRealizedError,
)
from ortplug_cpu import CpuProvider
from plugin_objects import FakeCudaPlugin, FakeCudaProvider


@pytest.fixture
def gpu_plugins() -> PluginHost:
    """CPU plugin plus a CUDA-named provider whose probe is overridden to report one GPU."""
    host = PluginHost(load_entry_points=False, environ={"ORTPLUG_OVERRIDE_FAKECUDA_DEVICES": "1"})
    assert host.register(ortplug_cpu.plugin, name="cpu")
    assert host.register(FakeCudaPlugin(), name="fakecuda")
    assert host.host_capabilities().fact("fakecuda", "devices") == 1
    return host


CHECKPOINT = InMemoryCheckpoint(models.add_model())


def test_explicit_chain_with_missing_accelerator_raises_naming_cause(gpu_plugins) -> None:
    with pytest.raises(ProviderNotRealizedError) as info:
        OnnxBackend.from_checkpoint(
            CHECKPOINT.resolve(), providers=["fakecuda", "cpu"], plugins=gpu_plugins
        )
    error = info.value
    assert error.missing == ("CUDAExecutionProvider",)
    assert error.realized == ("CPUExecutionProvider",)
    assert "not in available provider names" in error.cause
    assert "CUDAExecutionProvider" in str(error) and "realized chain" in str(error)


def test_policy_chain_with_missing_accelerator_only_warns(gpu_plugins) -> None:
    policy = DefaultProviderPolicy(gpu_plugins)
    meta = CHECKPOINT.resolve().metadata
    assert policy.select(meta, gpu_plugins.host_capabilities()) == [
        FakeCudaProvider(),
        CpuProvider(),
    ]
    with pytest.warns(ProviderFallbackWarning, match="no accelerator was realized"):
        backend = OnnxBackend.from_checkpoint(CHECKPOINT.resolve(), policy=policy)
    assert backend.providers == ("CPUExecutionProvider",)
    assert backend.requested_providers == ("CUDAExecutionProvider", "CPUExecutionProvider")
    one = np.ones((1, 4), np.float32)
    assert backend.run({"a": one, "b": one})["c"][0, 0] == 2.0


def test_cpu_only_chain_neither_warns_nor_raises(plugin_host) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backend = OnnxBackend.from_checkpoint(
            CHECKPOINT.resolve(), providers=["CPUExecutionProvider"], plugins=plugin_host
        )
    assert backend.providers == ("CPUExecutionProvider",)


def test_no_offer_at_all_says_what_to_install() -> None:
    bare = PluginHost(load_entry_points=False, environ={})
    with pytest.raises(RuntimeError, match=r"no plugin offered a provider.*(ortplug|core)\[cpu\]"):
        OnnxBackend.from_checkpoint(CHECKPOINT.resolve(), plugins=bare)


def test_explicit_provider_list_must_be_a_list(plugin_host) -> None:
    with pytest.raises(TypeError, match=r"expected a list such as \['cuda', 'cpu'\]"):
        OnnxBackend.from_checkpoint(CHECKPOINT.resolve(), providers="cpu", plugins=plugin_host)
    with pytest.raises(ValueError, match="at least one provider"):
        OnnxBackend.from_checkpoint(CHECKPOINT.resolve(), providers=[], plugins=plugin_host)


def test_selection_explains_each_provider(gpu_plugins) -> None:
    meta = CheckpointMetadata(input_names=["a", "b"], output_names=["c"], precision="int8")
    selection = DefaultProviderPolicy(gpu_plugins).explain(meta, gpu_plugins.host_capabilities())
    assert selection.reason_for(FakeCudaProvider()) == "a GPU is present [fakecuda]"
    assert "int8" in selection.reason_for(CpuProvider())


def test_backend_keeps_the_reason_for_each_provider(gpu_plugins) -> None:
    with pytest.warns(ProviderFallbackWarning):
        backend = OnnxBackend.from_checkpoint(CHECKPOINT.resolve(), plugins=gpu_plugins)
    assert backend.chain_reasons[0] == ("fakecuda", "a GPU is present [fakecuda]")
    assert backend.chain_reasons[1][0] == "cpu"
    explicit = OnnxBackend.from_checkpoint(
        CHECKPOINT.resolve(), providers=["cpu"], plugins=gpu_plugins
    )
    assert explicit.chain_reasons == (("cpu", "requested explicitly (strict)"),)
