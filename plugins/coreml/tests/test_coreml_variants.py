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
    assert [a.variant for a in selection.alternatives] == [None, None]
    assert policy.explain(metadata, hosts.mac("x86_64")).variant is None  # Intel Macs: no CoreML
