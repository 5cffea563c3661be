"""OpenVINO's inference precision: f32 by default, the device's reduced precision its own candidate.

Host facts are injected (this may be a host whose OpenVINO lists no device, e.g. an AMD CPU):
the plugin's offer hook is asked directly, and the policy ranks its offers as it would.
"""

from __future__ import annotations

import json

import numpy as np
import ortplug_openvino
import pytest
from ortplug import (
    CheckpointMetadata,
    LocalCheckpoint,
    OnnxBackend,
    PluginHost,
    ProviderNotRealizedError,
    ProviderOffer,
)
from ortplug.checkpoint.variants import default_tolerance
from ortplug.errors import OptionError
from ortplug.testing import demo_model, make_host
from ortplug_openvino import OpenVinoProvider

FP32 = CheckpointMetadata(input_names=["x"], output_names=["y"])
XEON = "Intel(R) Xeon(R) Platinum 8480+"


def _device(kind: str) -> dict[str, object]:
    return {"ep_name": "OpenVINOExecutionProvider", "type": kind, "vendor": "Intel",
            "vendor_id": 32902, "device_id": 0, "name": XEON}  # fmt: skip


def _host(device: str, isa: list[str]):
    return make_host(
        cpu={"logical_cpus": 8, "usable_cpus": 8, "isa_flags": isa},
        openvino={"library": "/x/libov.so", "error": None, "devices": [_device(device)]},
    )


def _offers(metadata: CheckpointMetadata, host) -> list[ProviderOffer]:
    items = list(ortplug_openvino.plugin.ortplug_offer_providers(metadata=metadata, host=host))
    assert all(isinstance(item, ProviderOffer) for item in items)
    return items


def _hint(config: OpenVinoProvider) -> dict[str, object]:
    return json.loads(config.to_ort()[1]["load_config"])


def test_the_fp32_offer_runs_at_f32_and_bf16_is_a_separate_candidate_on_amx() -> None:
    exact, bf16 = _offers(FP32, _host("CPU", ["avx2", "avx512_bf16", "amx", "amx_bf16"]))
    assert exact.precision is None and exact.config == OpenVinoProvider(inference_precision="f32")
    assert _hint(exact.config) == {
        "CPU": {"INFERENCE_PRECISION_HINT": "f32"},
        "GPU": {"INFERENCE_PRECISION_HINT": "f32"},
    }
    assert "inference_precision" not in exact.config.to_ort()[1]  # the build refuses unknown keys
    assert bf16.precision == "bf16" and bf16.preference == exact.preference - 1
    assert _hint(bf16.config) == {"CPU": {"INFERENCE_PRECISION_HINT": "bf16"}}
    assert default_tolerance(bf16.precision).rtol > default_tolerance("fp32").rtol


def test_no_bf16_candidate_without_bf16_instructions_or_off_fp32() -> None:
    (exact,) = _offers(FP32, _host("CPU", ["avx2", "avx512_vnni"]))
    assert exact.config.inference_precision == "f32"
    int8 = CheckpointMetadata(input_names=["x"], output_names=["y"], precision="int8")
    assert [o.precision for o in _offers(int8, _host("CPU", ["amx_bf16"]))] == [None]


def test_a_gpu_gets_f16_as_its_candidate_and_an_npu_says_it_computes_in_f16() -> None:
    exact, f16 = _offers(FP32, _host("GPU", ["avx2"]))
    assert (exact.precision, f16.precision) == (None, "fp16")
    assert _hint(f16.config)["GPU"] == {"INFERENCE_PRECISION_HINT": "f16"}
    (npu,) = _offers(FP32, _host("NPU", ["avx2"]))
    assert npu.precision == "fp16" and "the NPU computes in f16" in npu.reason


def test_without_a_device_the_plugin_declines() -> None:
    host = make_host(openvino={"library": None, "error": "no device here", "devices": []})
    (decline,) = ortplug_openvino.plugin.ortplug_offer_providers(metadata=FP32, host=host)
    assert decline.kind == "openvino" and decline.reason == "no device here"


def test_the_precision_merges_into_a_given_load_config_and_conflicts_are_named() -> None:
    config = OpenVinoProvider(
        inference_precision="f32", options={"load_config": '{"CPU": {"NUM_STREAMS": "1"}}'}
    )
    assert _hint(config)["CPU"] == {"INFERENCE_PRECISION_HINT": "f32", "NUM_STREAMS": "1"}
    with pytest.raises(OptionError, match="load_config CPU already sets INFERENCE_PRECISION_HINT"):
        OpenVinoProvider(
            inference_precision="bf16",
            options={"load_config": '{"CPU": {"INFERENCE_PRECISION_HINT": "f32"}}'},
        )
    with pytest.raises(OptionError, match="load_config: expected JSON, got '{'"):
        OpenVinoProvider(inference_precision="f32", options={"load_config": "{"})
    with pytest.raises(ValueError, match="inference_precision: expected one of f32, bf16, f16"):
        OpenVinoProvider(inference_precision="fp8")
    assert OpenVinoProvider(inference_precision="FP32").inference_precision == "f32"


def test_where_openvino_has_a_device_its_f32_session_matches_the_cpu() -> None:
    import ortplug_cpu.plugin

    plugins = PluginHost(load_entry_points=False, environ={})
    assert plugins.register(ortplug_cpu.plugin, name="cpu")
    assert plugins.register(ortplug_openvino.plugin, name="openvino")
    checkpoint = LocalCheckpoint(demo_model()).resolve()
    chain = [{"kind": "openvino", "inference_precision": "f32"}, "cpu"]
    if not plugins.host_capabilities().fact("openvino", "devices", []):  # e.g. an AMD host
        with pytest.raises(ProviderNotRealizedError, match="OpenVINOExecutionProvider"):
            OnnxBackend.from_checkpoint(checkpoint, providers=chain, plugins=plugins)
        return
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    with OnnxBackend.from_checkpoint(checkpoint, providers=chain, plugins=plugins) as backend:
        assert backend.providers[0] == "OpenVINOExecutionProvider"
        cpu = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"], plugins=plugins)
        np.testing.assert_allclose(  # f32 on an AMX CPU: what bf16 would miss by 1e-2
            backend.run({"x": x})["probs"], cpu.run({"x": x})["probs"], rtol=1e-4, atol=1e-6
        )
