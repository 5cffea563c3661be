"""Plugin objects the tests register directly on a PluginHost (no installation needed)."""

from __future__ import annotations

from typing import ClassVar

import attrs
from ortplug import HostProbe, ProviderDecline, ProviderOffer, ProviderType, hookimpl


@attrs.frozen
class FakeCudaProvider:
    """Names ONNX Runtime's CUDA provider, which the CPU wheel on this machine does not have."""

    kind: ClassVar[str] = "fakecuda"
    device_id: int = attrs.field(default=0, validator=attrs.validators.ge(0))

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "CUDAExecutionProvider", {"device_id": str(self.device_id)}


class FakeCudaPlugin:
    """Contributes ``fakecuda``, a probe of pretend GPUs, and a high-preference offer when one exists."""

    @hookimpl
    def ortplug_provider_types(self):
        yield ProviderType("fakecuda", "CUDAExecutionProvider", FakeCudaProvider, aliases=("gpu",))

    @hookimpl
    def ortplug_host_probes(self):
        yield HostProbe(name="fakecuda", facts=("devices",), detect=lambda: {"devices": 0})

    @hookimpl
    def ortplug_offer_providers(self, host):
        if host.fact("fakecuda", "devices", 0) > 0:
            yield ProviderOffer(FakeCudaProvider(), preference=100, reason="a GPU is present")
        else:
            yield ProviderDecline("fakecuda", "no pretend GPU on this host")


class RaisingOffers:
    """An offer hook that raises: the other plugins' offers must survive it."""

    @hookimpl
    def ortplug_offer_providers(self, metadata):
        raise RuntimeError(f"boom for {metadata.model_family}")


class ChainOverride:
    """A site policy: always run CPU only, whatever was offered."""

    @hookimpl(tryfirst=True)
    def ortplug_provider_chain(self, offers):
        return [o.config for o in offers if o.config.kind == "cpu"]
