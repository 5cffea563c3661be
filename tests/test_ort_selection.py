"""Bridges to ONNX Runtime's own selection: its device policies, and ortplug policies as its delegate."""

from __future__ import annotations

from importlib.resources import files

import numpy as np
import onnxruntime as ort
import ortplug_openvino
import pytest
from ortplug import DefaultProviderPolicy, InMemoryCheckpoint, OnnxBackend
from ortplug.selection.ort_device import DEVICE_POLICIES, OrtDevicePolicy, ort_delegate

DEMO = (files("ortplug.data") / "demo.onnx").read_bytes()
X = np.ones((2, 8), np.float32)


@pytest.mark.parametrize("name", sorted(DEVICE_POLICIES))
def test_onnxruntime_device_policies_build_working_sessions(all_plugins, name) -> None:
    assert all_plugins.register(ortplug_openvino.plugin, name="openvino")
    checkpoint = InMemoryCheckpoint(DEMO).resolve()
    backend = OnnxBackend.from_checkpoint(
        checkpoint, policy=OrtDevicePolicy(name), plugins=all_plugins
    )
    assert backend.requested_providers == ()
    assert backend.providers[-1] == "CPUExecutionProvider"
    assert all(reason.startswith("chosen by ONNX Runtime's") for _, reason in backend.chain_reasons)
    assert sum(backend.report.nodes.values()) == 4  # every node placed somewhere
    reference = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"], plugins=all_plugins)
    np.testing.assert_allclose(
        backend.run({"x": X})["probs"], reference.run({"x": X})["probs"], atol=1e-3
    )


def test_device_policy_names_are_checked() -> None:
    assert OrtDevicePolicy("PREFER_GPU").ort_member == "PREFER_GPU"
    with pytest.raises(ValueError, match="OrtDevicePolicy: expected one of default, prefer_cpu"):
        OrtDevicePolicy("fastest")


def test_an_ortplug_policy_as_onnxruntime_delegate(all_plugins) -> None:
    assert all_plugins.register(ortplug_openvino.plugin, name="openvino")
    host = all_plugins.host_capabilities()
    checkpoint = InMemoryCheckpoint(DEMO).resolve()
    policy = DefaultProviderPolicy(all_plugins)
    expected = [c.to_ort()[0] for c in policy.select(checkpoint.metadata, host)]
    options = ort.SessionOptions()
    options.set_provider_selection_policy_delegate(ort_delegate(policy, checkpoint.metadata, host))
    session = ort.InferenceSession(DEMO, options)
    assert session.get_providers() == expected  # the same chain, chosen inside ONNX Runtime
