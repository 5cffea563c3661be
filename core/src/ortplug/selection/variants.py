"""Provider and precision chosen together: the plugins' (provider, variant) offers ranked as candidates.

Each candidate is a chain and the weights it runs (the reference, or a variant of
``metadata.variants``). A variant's chain is ordered by the chain hook from the
offers naming that variant, with the reference's CPU offer as the fallback at its
end; it counts only when its lead provider offered the variant. Candidates are
ranked by their lead offer's preference (the reference first at a tie), and each
chain also yields the chains left when its lead accelerator is dropped, so that a
provider or variant that fails verification gives way to the next, down to the
CPU provider on the reference weights.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import attrs

from ..errors import OrtplugPluginWarning
from ..plugins.manager import PluginHost
from ..plugins.types import ProviderOffer
from ..providers import ProviderConfig, is_accelerator
from .protocol import ProviderSelection, SelectionRequest

__all__ = ["offer_reason", "rank_variants"]


def offer_reason(config: ProviderConfig, offers: Sequence[ProviderOffer]) -> str:
    """The reason of the offer that put ``config`` in a chain, with its plugin."""
    for offer in offers:
        if offer.config == config:
            return f"{offer.reason} [{offer.plugin}]"
    return "chosen by a provider-chain plugin"


def _score(config: ProviderConfig, offers: Sequence[ProviderOffer]) -> int | None:
    """The best preference offered for ``config``'s kind, or ``None`` when no offer has it."""
    scores = [o.preference for o in offers if o.config.kind == config.kind]
    return max(scores) if scores else None


def _with_fallbacks(
    selection: ProviderSelection, offers: Sequence[ProviderOffer]
) -> list[tuple[int, ProviderSelection]]:
    """The candidate and the chains left by dropping its lead accelerator, each with its score.

    A variant's shorter chain counts only while its lead offered the variant.
    """
    found: list[tuple[int, ProviderSelection]] = []
    chain, reasons = selection.chain, selection.reasons
    while chain:
        score = _score(chain[0], offers)
        if score is None and (found or selection.variant is not None):
            break
        found.append((score or 0, attrs.evolve(selection, chain=chain, reasons=reasons)))
        if not is_accelerator(chain[0]):
            break
        chain, reasons = chain[1:], reasons[1:]
    return found


def _variant_selection(
    name: str,
    offers: Sequence[ProviderOffer],
    reference: ProviderSelection,
    request: SelectionRequest,
    plugins: PluginHost,
) -> ProviderSelection | None:
    """The chain the hook orders for variant ``name``; ``None`` when its lead did not offer it."""
    own = [o for o in offers if o.variant == name]
    fallback = [o for o in reference.offers if o.variant is None and not is_accelerator(o.config)]
    chain, chain_plugin = plugins.provider_chain([*own, *fallback], request.metadata, request.host)
    if not chain or _score(chain[0], own) is None:
        return None
    return ProviderSelection(
        chain=tuple(chain),
        reasons=tuple(offer_reason(config, [*own, *fallback]) for config in chain),
        offers=tuple(own),
        declined=reference.declined,
        session_defaults=reference.session_defaults,
        chain_plugin=chain_plugin,
        variant=name,
    )


def _warn_unknown(offers: Sequence[ProviderOffer], names: Sequence[str]) -> None:
    for offer in offers:
        if offer.variant is not None and offer.variant not in names:
            warnings.warn(
                f"ortplug plugin {offer.plugin!r} offered {offer.config.kind} with variant "
                f"{offer.variant!r}, which the checkpoint does not have "
                f"({', '.join(names) or 'it has no variants'}); the offer is ignored",
                OrtplugPluginWarning,
                stacklevel=4,
            )


def rank_variants(
    reference: ProviderSelection,
    offers: Sequence[ProviderOffer],
    request: SelectionRequest,
    plugins: PluginHost,
) -> ProviderSelection:
    """The best candidate, the others as its ``alternatives``; ``reference`` is the reference chain.

    Without variant offers the chain is ``reference``'s, unchanged, and the
    alternatives are its shorter chains.
    """
    names = [v.name for v in request.metadata.variants]
    _warn_unknown(offers, names)
    reference_offers = [o for o in reference.offers if o.variant is None]
    candidates = _with_fallbacks(reference, reference_offers)
    for name in names:
        if any(o.variant == name for o in offers):
            selection = _variant_selection(name, offers, reference, request, plugins)
            if selection is not None:
                candidates += _with_fallbacks(selection, selection.offers)
    unique: dict[tuple[str | None, tuple[ProviderConfig, ...]], ProviderSelection] = {}
    for _, candidate in sorted(candidates, key=lambda pair: -pair[0]):  # stable: reference first
        unique.setdefault((candidate.variant, candidate.chain), candidate)
    if not unique:
        return reference
    best, *rest = unique.values()
    return attrs.evolve(best, alternatives=tuple(rest))
