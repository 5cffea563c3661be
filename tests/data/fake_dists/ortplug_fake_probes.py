"""Plugins (as classes, registered through entry points) whose probe or offer raises."""

from ortplug import HostProbe, hookimpl


def _explode():
    raise OSError("driver query crashed")


class ProbeFailure:
    @hookimpl
    def ortplug_host_probes(self):
        yield HostProbe(name="fakeprobe", facts=("devices",), detect=_explode)


class OfferFailure:
    @hookimpl
    def ortplug_offer_providers(self, metadata):
        raise KeyError(metadata.model_family)


probe_failure = ProbeFailure()
offer_failure = OfferFailure()
