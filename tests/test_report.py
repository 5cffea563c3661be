"""backend.report: requested and realized chain, placement, reasons, declines; the share check."""

from __future__ import annotations

import models
import numpy as np
import ortplug_azuretest
import pytest
from ortplug import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    OnnxBackend,
    ProviderNotRealizedError,
    Verification,
    VerificationWarning,
)

AZURE_META = CheckpointMetadata(
    input_names=["a", "b"], output_names=["c"], extra={"ortplug_azuretest": True}
)


@pytest.fixture
def azure_host(all_plugins):
    assert all_plugins.register(ortplug_azuretest, name="azuretest")
    return all_plugins


def test_report_of_a_policy_chain(all_plugins) -> None:
    backend = OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(models.add_model()).resolve(), plugins=all_plugins
    )
    report = backend.report
    assert report.requested == report.realized == ("CPUExecutionProvider",)
    assert report.nodes == {"CPUExecutionProvider": 1}
    assert report.accelerator_share == 0.0
    assert report.reasons[0][0] == "cpu" and report.reasons[0][1].endswith("[cpu]")
    declined = dict(report.declined)
    assert set(declined) == {"cuda", "tensorrt", "coreml"}
    assert declined["coreml"] == "CoreML runs on macOS only [coreml]"
    assert report.host["facts"]["cpu"]["usable_cpus"] >= 1
    assert report.provider_options == {"CPUExecutionProvider": {}}
    data = report.to_dict()
    assert data["nodes"] == {"CPUExecutionProvider": 1} and data["accelerator_share"] == 0.0
    lines = report.lines()
    assert lines[0] == "requested  CPUExecutionProvider"
    assert any(line.startswith("declined   coreml: CoreML runs on macOS only") for line in lines)


def test_an_accelerator_that_takes_no_nodes_fails_the_share_check(azure_host) -> None:
    checkpoint = InMemoryCheckpoint(models.add_model(), AZURE_META).resolve()
    loose = OnnxBackend.from_checkpoint(checkpoint, providers=["azure", "cpu"], plugins=azure_host)
    assert loose.report.realized == ("AzureExecutionProvider", "CPUExecutionProvider")
    assert loose.report.accelerator_share == 0.0  # "an Azure session" that runs on CPU
    with pytest.raises(
        ProviderNotRealizedError,
        match=r"took 0% of the graph's nodes \(CPUExecutionProvider 1\), below min_accelerator_share=0.5",
    ):
        OnnxBackend.from_checkpoint(
            checkpoint,
            providers=["azure", "cpu"],
            plugins=azure_host,
            verify=Verification(min_accelerator_share=0.5),
        )
    # A policy's choice below the share is a rejected candidate: the CPU reference serves.
    with pytest.warns(VerificationWarning, match="its accelerators took no node of the graph"):
        backend = OnnxBackend.from_checkpoint(
            checkpoint, plugins=azure_host, verify=Verification(min_accelerator_share=0.5)
        )
    assert backend.providers == ("CPUExecutionProvider",)
    one = np.ones((1, 4), np.float32)
    assert backend.run({"a": one, "b": one})["c"].sum() == 8  # still usable


def test_the_share_check_validates_its_argument(all_plugins) -> None:
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    OnnxBackend.from_checkpoint(
        checkpoint, plugins=all_plugins, verify=Verification(min_accelerator_share=0.9)
    )  # CPU only: nothing to check
    with pytest.raises(
        ValueError, match="min_accelerator_share: expected a number from 0 to 1, got 2"
    ):
        OnnxBackend.from_checkpoint(
            checkpoint, plugins=all_plugins, verify=Verification(min_accelerator_share=2)
        )
