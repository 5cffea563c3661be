"""The core's own checks of the plugins' provider offers and chains.

An item for a kind no plugin registered, an offer whose config runs another provider
than its kind names (each a failure of the plugin that made it), and an offer of a
plugin-EP provider whose library cannot run here (a decline, checked by ortplug).
"""

from __future__ import annotations

from ..host.ep_libraries import offer_problem
from ..plugins.types import ProviderDecline, ProviderOffer
from ._failures import FailureLog
from .registry import ProviderRegistry

__all__ = ["library_checked", "names_its_type", "unknown_kind"]


def names_its_type(
    failures: FailureLog, plugin: str, offer: ProviderOffer, registry: ProviderRegistry
) -> bool:
    """Whether the offered config runs the provider its kind's type names; else a failure.

    A config whose ``to_ort()`` names another provider (a copied CPU config's
    ``CPUExecutionProvider``) would run that one instead, and be judged as it.
    """
    declared = registry.lookup(offer.config.kind).type.ort_name
    try:
        runs = offer.config.to_ort()[0]
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        failures.record(plugin, "ortplug_offer_providers", exc)
        return False
    if runs == declared:
        return True
    error = ValueError(
        f"an offer of kind {offer.config.kind!r} runs {runs!r} (its config's to_ort()), but "
        f"the kind's ProviderType names {declared!r}; make to_ort() return the ort_name "
        "the type declares"
    )
    failures.record(plugin, "ortplug_offer_providers", error)
    return False


def unknown_kind(
    failures: FailureLog, plugin: str, hook_name: str, kind: str, registry: ProviderRegistry
) -> None:
    """Record that ``plugin`` answered ``hook_name`` with a kind no plugin registered."""
    known = ", ".join(registry.kinds()) or "none"
    error = ValueError(
        f"provider kind {kind!r} is not registered by any plugin (registered: {known}); "
        "contribute it with ortplug_provider_types"
    )
    failures.record(plugin, hook_name, error)


def library_checked(
    item: ProviderOffer | ProviderDecline, registry: ProviderRegistry
) -> ProviderOffer | ProviderDecline:
    """An offer of a plugin-EP provider whose library cannot run here, as a decline."""
    if not isinstance(item, ProviderOffer):
        return item
    library = registry.library_of(item.config.kind)
    if library is None:
        return item
    problem = offer_problem(library, item.config.to_ort()[0])
    if problem is None:
        return item
    return ProviderDecline(item.config.kind, f"{problem} (checked by ortplug)", item.plugin)
