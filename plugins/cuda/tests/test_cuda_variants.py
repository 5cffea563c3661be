"""CUDA scores (provider, variant) pairs: an fp16 variant first, CUDA on the fp32 reference next."""

from __future__ import annotations

import hosts
from ortplug import CheckpointMetadata, DefaultProviderPolicy, PluginHost
from ortplug_cuda.plugin import FP16_PREFERENCE, PREFERENCE


def _metadata(*variants: dict[str, str]) -> CheckpointMetadata:
    return CheckpointMetadata(input_names=["x"], output_names=["y"], variants=list(variants))


FP16 = {"name": "fp16", "file": "m.fp16.onnx", "precision": "fp16"}
INT8 = {"name": "int8", "file": "m.int8.onnx", "precision": "int8"}


def test_an_fp16_variant_leads_and_cuda_on_the_reference_follows(all_plugins: PluginHost) -> None:
    selection = DefaultProviderPolicy(all_plugins).explain(_metadata(FP16, INT8), hosts.linux_gpu())
    assert selection.variant == "fp16" and [c.kind for c in selection.chain] == ["cuda", "cpu"]
    assert selection.reasons[0].startswith("fp16 variant: half the memory traffic, tensor cores; ")
    assert [(a.variant, [c.kind for c in a.chain]) for a in selection.alternatives] == [
        (None, ["cuda", "cpu"]),
        (None, ["cpu"]),
    ]
    assert FP16_PREFERENCE > PREFERENCE


def test_no_variant_offer_without_a_gpu_or_for_another_provider(all_plugins: PluginHost) -> None:
    policy = DefaultProviderPolicy(all_plugins)
    assert policy.explain(_metadata(FP16), hosts.cpu_only()).variant is None
    webgpu_only = {**FP16, "ep": "WebGpuExecutionProvider"}
    selection = policy.explain(_metadata(webgpu_only), hosts.linux_gpu())
    assert selection.variant is None and [c.kind for c in selection.chain] == ["cuda", "cpu"]
