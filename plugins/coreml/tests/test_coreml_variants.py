"""CoreML scores (provider, variant) pairs: on Apple Silicon an fp16 variant comes first."""

from __future__ import annotations

import hosts
from ortplug import CheckpointMetadata, DefaultProviderPolicy, PluginHost

FP16 = {"name": "fp16", "file": "m.fp16.onnx", "precision": "fp16"}


def test_an_fp16_variant_leads_on_apple_silicon(all_plugins: PluginHost) -> None:
    metadata = CheckpointMetadata(
        input_names=["x"], output_names=["y"], static_shapes=True, variants=[FP16]
    )
    policy = DefaultProviderPolicy(all_plugins)
    selection = policy.explain(metadata, hosts.mac("arm64"))
    assert selection.variant == "fp16" and [c.kind for c in selection.chain] == ["coreml", "cpu"]
    assert selection.reasons[0].startswith("fp16 variant: CoreML's GPU computes in fp16; ")
    assert [(a.variant, a.precision) for a in selection.alternatives] == [
        (None, None),  # CoreML on the reference weights
        (None, "fp16"),  # ... with fp16 accumulation on the GPU
        (None, None),  # the CPU
    ]
    assert policy.explain(metadata, hosts.mac("x86_64")).variant is None  # Intel Macs: no CoreML


def test_low_precision_accumulation_is_its_own_candidate(all_plugins: PluginHost) -> None:
    from ortplug_coreml.plugin import LOW_PRECISION_PREFERENCE, PREFERENCE

    metadata = CheckpointMetadata(input_names=["x"], output_names=["y"], static_shapes=True)
    selection = DefaultProviderPolicy(all_plugins).explain(metadata, hosts.mac("arm64"))
    assert selection.precision is None
    options = selection.chain[0].to_ort()[1]
    assert options.get("AllowLowPrecisionAccumulationOnGPU", "0") == "0"
    (low,) = [a for a in selection.alternatives if a.precision == "fp16"]
    assert low.chain[0].to_ort()[1]["AllowLowPrecisionAccumulationOnGPU"] == "1"
    assert PREFERENCE > LOW_PRECISION_PREFERENCE
