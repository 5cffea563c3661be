"""The CPU plugin offers an int8 variant where the ISA has int8 dot products (VNNI, AMX, dotprod, i8mm)."""

from __future__ import annotations

import pytest
from ortplug import CheckpointMetadata, PluginHost, ProviderOffer
from ortplug.testing import make_host
from ortplug_cpu import CpuProvider
from ortplug_cpu.plugin import INT8_PREFERENCE

INT8 = {"name": "int8", "file": "m.int8.onnx", "precision": "int8"}
FP16 = {"name": "fp16", "file": "m.fp16.onnx", "precision": "fp16"}
META = CheckpointMetadata(input_names=["x"], output_names=["y"], variants=[INT8, FP16])


def _variant_offers(plugin_host: PluginHost, flags: list[str]) -> list[ProviderOffer]:
    host = make_host(cpu={"usable_cpus": 4, "logical_cpus": 4, "isa_flags": flags})
    answers = plugin_host.offer_providers(META, host)
    return [a for a in answers if isinstance(a, ProviderOffer) and a.variant is not None]


@pytest.mark.parametrize(
    "flags", [["avx2", "avx512_vnni"], ["avx_vnni"], ["amx", "amx_int8"], ["neon", "dotprod"]]
)
def test_int8_variants_are_offered_with_int8_dot_products(
    plugin_host: PluginHost, flags: list[str]
) -> None:
    (offer,) = _variant_offers(plugin_host, flags)
    assert (offer.variant, offer.config, offer.preference) == (
        "int8",
        CpuProvider(),
        INT8_PREFERENCE,
    )
    assert "int8 dot products" in offer.reason and INT8_PREFERENCE > 0
    # below every accelerator: the CPU kind goes last in the declared order, whatever its offers
    # (tests/test_provider_order.py holds the whole order of the shipped kinds)
    assert plugin_host.provider_registry().order()[-1] == "cpu"


@pytest.mark.parametrize("flags", [["avx2", "fma"], ["neon"], []])
def test_no_variant_offer_without_them(plugin_host: PluginHost, flags: list[str]) -> None:
    assert _variant_offers(plugin_host, flags) == []


def test_a_variant_made_for_another_provider_is_not_offered(plugin_host: PluginHost) -> None:
    made_for_gpu = CheckpointMetadata(
        input_names=["x"], output_names=["y"], variants=[{**INT8, "ep": "CUDAExecutionProvider"}]
    )
    host = make_host(cpu={"usable_cpus": 4, "isa_flags": ["avx512_vnni"]})
    assert all(
        getattr(a, "variant", None) is None for a in plugin_host.offer_providers(made_for_gpu, host)
    )
