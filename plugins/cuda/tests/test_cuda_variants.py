"""CUDA scores (provider, precision) pairs: an fp16 variant first, CUDA on the fp32 reference next,
then TF32 (a reduced-precision mode, its own candidate)."""

from __future__ import annotations

import attrs
import hosts
from ortplug import CheckpointMetadata, DefaultProviderPolicy, PluginHost
from ortplug_cuda import CudaProvider
from ortplug_cuda.plugin import FP16_PREFERENCE, PREFERENCE, TF32_PREFERENCE


def _metadata(*variants: dict[str, str]) -> CheckpointMetadata:
    return CheckpointMetadata(input_names=["x"], output_names=["y"], variants=list(variants))


FP16 = {"name": "fp16", "file": "m.fp16.onnx", "precision": "fp16"}
INT8 = {"name": "int8", "file": "m.int8.onnx", "precision": "int8"}


def test_an_fp16_variant_leads_and_cuda_on_the_reference_follows(all_plugins: PluginHost) -> None:
    selection = DefaultProviderPolicy(all_plugins).explain(_metadata(FP16, INT8), hosts.linux_gpu())
    assert selection.variant == "fp16" and [c.kind for c in selection.chain] == ["cuda", "cpu"]
    assert selection.reasons[0].startswith("fp16 variant: half the memory traffic, tensor cores; ")
    alternatives = selection.alternatives
    assert [(a.variant, a.precision, [c.kind for c in a.chain]) for a in alternatives] == [
        (None, None, ["cuda", "cpu"]),
        (None, "tf32", ["cuda", "cpu"]),
        (None, None, ["cpu"]),
    ]
    assert FP16_PREFERENCE > PREFERENCE > TF32_PREFERENCE


def test_no_variant_offer_without_a_gpu_or_for_another_provider(all_plugins: PluginHost) -> None:
    policy = DefaultProviderPolicy(all_plugins)
    assert policy.explain(_metadata(FP16), hosts.cpu_only()).variant is None
    webgpu_only = {**FP16, "ep": "WebGpuExecutionProvider"}
    selection = policy.explain(_metadata(webgpu_only), hosts.linux_gpu())
    assert selection.variant is None and [c.kind for c in selection.chain] == ["cuda", "cpu"]


def test_fp32_is_exact_and_tf32_is_its_own_candidate_on_ampere(all_plugins: PluginHost) -> None:
    selection = DefaultProviderPolicy(all_plugins).explain(_metadata(), hosts.linux_gpu())
    exact, _ = selection.chain
    assert isinstance(exact, CudaProvider) and selection.precision is None
    assert exact.to_ort()[1]["use_tf32"] == "0"  # ONNX Runtime's default is TF32 on Ampere+
    (tf32,) = [a for a in selection.alternatives if a.precision == "tf32"]
    assert tf32.describe_candidate() == "the reference weights at tf32"
    assert tf32.chain[0].to_ort()[1]["use_tf32"] == "1" and tf32.chain[1].kind == "cpu"
    assert "TF32 tensor-core math" in tf32.reasons[0]


def test_no_tf32_candidate_before_ampere_or_off_fp32(all_plugins: PluginHost) -> None:
    policy = DefaultProviderPolicy(all_plugins)
    t4 = {"index": 0, "name": "Tesla T4", "compute_capability": "7.5", "memory_mib": 15360}
    for metadata, host in [
        (_metadata(), hosts.linux_gpu(devices=[t4])),
        (attrs.evolve(_metadata(), precision="fp16"), hosts.linux_gpu()),
    ]:
        selection = policy.explain(metadata, host)
        assert [c.kind for c in selection.chain] == ["cuda", "cpu"]
        assert all(a.precision is None for a in selection.alternatives)
