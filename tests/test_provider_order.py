"""The order between provider kinds is declared in the manifests (``before``/``after``), not
kept in step by preference numbers: the shipped kinds keep the order they had."""

from __future__ import annotations

import attrs
import pytest
from ortplug import OrtplugPluginWarning, PluginHost
from ortplug.plugin_host._order import Placement, kind_order
from ortplug.plugins import ProviderOffer, ProviderType, hookimpl
from ortplug.testing import make_plugin_host
from ortplug_coreml import plugin as coreml
from ortplug_coreml.config import CoreMLProvider
from ortplug_cpu import CpuProvider
from ortplug_cpu import plugin as cpu
from ortplug_cuda import plugin as cuda
from ortplug_cuda.config import CudaProvider
from ortplug_openvino import OpenVinoProvider
from ortplug_openvino import plugin as openvino
from ortplug_tensorrt import plugin as tensorrt
from ortplug_tensorrt.config import TensorrtProvider
from ortplug_webgpu import WebGpuProvider
from ortplug_webgpu import plugin as webgpu

SHIPPED = ("tensorrt", "cuda", "coreml", "openvino", "webgpu", "cpu")

#: Every offer a shipped plugin makes, with the preference numbers they had before the order was
#: declared (TensorRT 60, CUDA 50, CoreML 40, the OpenVINO example 30, WebGPU 20, CPU 0) and
#: the preference each has now.
_OFFERS = [
    ("tensorrt exact", TensorrtProvider(), 60, tensorrt.PREFERENCE),
    ("tensorrt fp16", TensorrtProvider(fp16=True), 59, tensorrt.FP16_PREFERENCE),
    ("cuda fp16 variant", CudaProvider(), 55, cuda.FP16_PREFERENCE),
    ("cuda exact", CudaProvider(use_tf32=False), 50, cuda.PREFERENCE),
    ("cuda tf32", CudaProvider(use_tf32=True), 49, cuda.TF32_PREFERENCE),
    ("coreml fp16 variant", CoreMLProvider(), 45, coreml.FP16_PREFERENCE),
    ("coreml exact", CoreMLProvider(compute_units="CPUAndGPU"), 40, coreml.PREFERENCE),
    ("coreml low precision", CoreMLProvider(model_format="MLProgram"), 39, coreml.LOW_PRECISION_PREFERENCE),
    ("openvino f32", OpenVinoProvider(inference_precision="f32"), 30, openvino.preference),
    ("openvino bf16", OpenVinoProvider(inference_precision="bf16"), 29, openvino.preference - 1),
    ("webgpu fp16 variant", WebGpuProvider(), 25, webgpu.FP16_PREFERENCE),
    ("webgpu exact", WebGpuProvider(preferred_layout="NCHW"), 20, webgpu.PREFERENCE),
    ("cpu int8 variant", CpuProvider(threads=1), 5, cpu.INT8_PREFERENCE),
    ("cpu exact", CpuProvider(), 0, 0),
]  # fmt: skip


def _everything() -> PluginHost:
    return make_plugin_host("cuda", "tensorrt", "coreml", "webgpu", "openvino")


def test_the_shipped_kinds_keep_their_order() -> None:
    order = _everything().provider_registry().order()
    assert [kind for kind in order if kind in SHIPPED] == list(SHIPPED)


def test_every_shipped_offer_ranks_as_its_old_number_did() -> None:
    """Sorted by (declared place, preference), the offers come in the order the old global
    numbers gave them."""
    registry = _everything().provider_registry()
    before = [name for name, *_ in sorted(_OFFERS, key=lambda row: -row[2])]
    offers = {
        name: ProviderOffer(config, now, name, place=registry.place(config.kind))
        for name, config, _, now in _OFFERS
    }
    after = sorted(offers, key=lambda name: offers[name].rank())
    assert after == before


def test_no_shipped_preference_reaches_past_its_kind() -> None:
    """The numbers are each kind's own: small, around 0, none a band shared with another kind."""
    assert all(-1 <= now <= 1 for _, _, _, now in _OFFERS)


def test_the_order_holds_through_a_kind_not_installed_and_the_fallback_goes_last() -> None:
    order, circle = kind_order(
        [
            Placement("zfast", before=("middle",)),  # middle is not installed
            Placement("aslow", after=("middle",)),
            Placement("cpu", fallback=True),
            Placement("bfree"),  # no declaration orders it: by name among the ready ones
        ]
    )
    assert (order, circle) == (["bfree", "zfast", "aslow", "cpu"], [])


def test_a_circle_goes_by_name_and_says_so() -> None:
    order, circle = kind_order([Placement("a", before=("b",)), Placement("b", before=("a",))])
    assert (order, circle) == (["a", "b"], ["a", "b"])
    behind = [
        Placement("c", after=("b",)),
        Placement("a", before=("b",)),
        Placement("b", before=("a",)),
    ]
    assert kind_order(behind) == (["a", "b", "c"], ["a", "b"])  # c is behind the circle, not in it


class _Ordered:
    """A hook-form accelerator that declares its place: ahead of cuda."""

    def __init__(self, kind: str, **place: tuple[str, ...]) -> None:
        config = attrs.make_class(kind.capitalize(), {})
        config.kind = kind
        config.to_ort = lambda self: (f"{kind}EP", {})
        self.type = ProviderType(kind, f"{kind}EP", config, **place)

    @hookimpl
    def ortplug_provider_types(self):
        yield self.type


def test_a_hook_form_kind_declares_its_place_too_and_a_circle_is_one_warning() -> None:
    plugins = make_plugin_host("cuda", ("zeta", _Ordered("zeta", before=("cuda",))))
    order = plugins.provider_registry().order()
    assert order.index("zeta") < order.index("cuda") < order.index("cpu")
    looped = make_plugin_host(
        ("alpha", _Ordered("alpha", before=("beta",))),
        ("beta", _Ordered("beta", before=("alpha",))),
    )
    with pytest.warns(OrtplugPluginWarning, match="kinds alpha, beta make a circle") as caught:
        assert looped.provider_registry().order()[:2] == ["alpha", "beta"]
    assert all("\n" not in str(w.message) for w in caught)
