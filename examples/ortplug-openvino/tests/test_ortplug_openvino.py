"""The example plugin on a real onnxruntime-ep-openvino wheel: registered, discovered, run or declined."""

from __future__ import annotations

from importlib.metadata import distribution
from importlib.resources import files

import numpy as np
import ortplug_openvino
import pytest
from ortplug import (
    DefaultProviderPolicy,
    InMemoryCheckpoint,
    OnnxBackend,
    PluginHost,
    ProviderNotRealizedError,
    parse_provider,
)
from ortplug_openvino import OpenVinoProvider

DEMO = InMemoryCheckpoint((files("ortplug.data") / "demo.onnx").read_bytes())


@pytest.fixture
def host() -> PluginHost:
    import ortplug_cpu.plugin

    plugins = PluginHost(load_entry_points=False, environ={})
    assert plugins.register(ortplug_cpu.plugin, name="cpu")
    assert plugins.register(ortplug_openvino.plugin, name="openvino")
    return plugins


def test_the_entry_point_is_installed_and_discovered() -> None:
    points = [ep for ep in distribution("ortplug-openvino").entry_points if ep.group == "ortplug"]
    assert [(ep.name, ep.value) for ep in points] == [("openvino", "ortplug_openvino:plugin")]
    discovered = PluginHost(environ={})
    assert "openvino" in discovered.provider_registry().kinds()
    assert {p.name: p.status for p in discovered.plugin_infos()}["openvino"] == "active"


def test_options_parse_as_strings(host) -> None:
    config = parse_provider(
        {"kind": "openvino", "options": {"load_config": "{}", "flag": True}}, plugins=host
    )
    assert config == OpenVinoProvider()  # options do not take part in equality
    assert config.to_ort() == ("OpenVINOExecutionProvider", {"load_config": "{}", "flag": "1"})


def test_offered_when_the_library_has_a_device_else_declined_with_the_reason(host) -> None:
    facts = host.host_capabilities()
    devices = facts.fact("openvino", "devices", [])
    selection = DefaultProviderPolicy(host).explain(DEMO.resolve().metadata, facts)
    kinds = [c.kind for c in selection.chain]
    if devices:
        assert kinds == ["openvino", "cpu"]
        assert "from onnxruntime_ep_openvino offers" in selection.reason_for(selection.chain[0])
    else:
        assert kinds == ["cpu"]
        (decline,) = [d for d in selection.declined if d.kind == "openvino"]
        assert "offers no device on this host" in decline.reason or facts.fact("openvino", "error")


def test_a_session_runs_on_openvino_where_it_has_a_device(host) -> None:
    devices = host.host_capabilities().fact("openvino", "devices", [])
    checkpoint = DEMO.resolve()
    x = np.ones((2, 8), np.float32)
    if not devices:  # e.g. an AMD host: the strict chain says so, naming the provider
        with pytest.raises(ProviderNotRealizedError, match="OpenVINOExecutionProvider"):
            OnnxBackend.from_checkpoint(checkpoint, providers=["openvino", "cpu"], plugins=host)
        return
    # f32: OpenVINO's default on a CPU with AMX or AVX512-BF16 is bf16, which the strict
    # fp32 verification rightly refuses
    openvino = OpenVinoProvider(inference_precision="f32")
    with OnnxBackend.from_checkpoint(
        checkpoint, providers=[openvino, "cpu"], plugins=host
    ) as backend:
        assert backend.providers[0] == "OpenVINOExecutionProvider"
        assert backend.node_assignment().get("OpenVINOExecutionProvider", 0) > 0
        reference = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"], plugins=host)
        np.testing.assert_allclose(
            backend.run({"x": x})["probs"], reference.run({"x": x})["probs"], atol=1e-3
        )
