"""Really installed plugin distributions, seen through the ``ortplug`` entry-point group."""

from __future__ import annotations

from importlib.metadata import distribution

import models
import numpy as np
import pytest
from ortplug import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    OnnxBackend,
    PluginHost,
    VerificationWarning,
)


def test_cpu_plugin_distribution_declares_its_entry_point() -> None:
    points = [ep for ep in distribution("ortplug-cpu").entry_points if ep.group == "ortplug"]
    assert [(ep.name, ep.value) for ep in points] == [("cpu", "ortplug_cpu.plugin")]


def test_installed_third_party_plugin_is_discovered_and_used() -> None:
    host = PluginHost(environ={})
    infos = {p.name: p for p in host.plugin_infos()}
    assert infos["azuretest"].distribution == "ortplug-azuretest"
    assert "azure" in host.provider_registry().kinds()
    meta = CheckpointMetadata(
        input_names=["a", "b"], output_names=["c"], extra={"ortplug_azuretest": True}
    )
    checkpoint = InMemoryCheckpoint(models.add_model(), meta).resolve()
    # Unverified, the policy uses it; verified (the default), it takes no node and the CPU serves.
    backend = OnnxBackend.from_checkpoint(checkpoint, plugins=host, verify=False)
    assert backend.providers == ("AzureExecutionProvider", "CPUExecutionProvider")
    one = np.ones((1, 4), np.float32)
    assert backend.run({"a": one, "b": one})["c"][0, 0] == 2.0
    with pytest.warns(VerificationWarning, match="took no node of the graph"):
        verified = OnnxBackend.from_checkpoint(checkpoint, plugins=host)
    assert verified.providers == ("CPUExecutionProvider",)


def test_disable_list_blocks_the_third_party_plugin() -> None:
    host = PluginHost(environ={"ORTPLUG_DISABLE_PLUGINS": "azuretest"})
    assert "azure" not in host.provider_registry().kinds()
    assert {p.name: p.status for p in host.plugin_infos()}["azuretest"] == "blocked"


def test_removing_the_cpu_plugin_removes_its_provider() -> None:
    host = PluginHost(environ={"ORTPLUG_PLUGINS": "azuretest"})
    assert host.provider_registry().kinds() == ["azure"]


def test_provider_plugins_are_discovered_from_their_distributions() -> None:
    host = PluginHost(environ={})
    infos = {p.name: p for p in host.plugin_infos()}
    for name in ("cpu", "cuda", "tensorrt", "coreml"):
        assert infos[name].distribution == f"ortplug-{name}"
        assert infos[name].status == "active"
    assert {"cpu", "cuda", "tensorrt", "coreml"} <= set(host.provider_registry().kinds())


def test_disabling_a_provider_plugin_removes_only_its_providers() -> None:
    host = PluginHost(environ={"ORTPLUG_DISABLE_PLUGINS": "cuda,coreml"})
    kinds = host.provider_registry().kinds()
    assert "cuda" not in kinds and "coreml" not in kinds
    assert {"cpu", "tensorrt"} <= set(kinds)
    assert "cuda" not in host.host_capabilities().facts  # its probe is gone too
