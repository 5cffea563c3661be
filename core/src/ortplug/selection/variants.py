"""Provider and precision chosen together: the plugins' offers ranked as candidates, each with the
chains left when its lead accelerator is dropped."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import attrs

from ..checkpoint import CheckpointMetadata
from ..errors import OrtplugPluginWarning
from ..log import user_stacklevel
from ..plugin_host.manager import PluginHost
from ..plugins.types import ProviderOffer
from ..providers.configs import ProviderConfig, is_accelerator
from .protocol import ProviderSelection, SelectionRequest

__all__ = ["candidate_key", "offer_reason", "rank_variants"]

#: A candidate's identity beside its chain: (variant, reduced precision); ``None``: the reference's.
CandidateKey = tuple[str | None, str | None]


def candidate_key(offer: ProviderOffer, metadata: CheckpointMetadata) -> CandidateKey:
    """The (variant, reduced precision) an offer runs; a precision equal to the weights' is none."""
    weights = metadata.precision
    if offer.variant is not None:
        found = [v.precision for v in metadata.variants if v.name == offer.variant]
        weights = found[0] if found else weights
    reduced = offer.precision if offer.precision not in (None, weights) else None
    return offer.variant, reduced


def offer_reason(config: ProviderConfig, offers: Sequence[ProviderOffer]) -> str:
    """The reason of the offer that put ``config`` in a chain, with its plugin."""
    for offer in offers:
        if offer.config == config:
            return f"{offer.reason} [{offer.plugin}]"
    return "chosen by a provider-chain plugin"


#: A candidate's rank: its lead kind's place (0 first), then minus its preference; lower first.
Rank = tuple[int, int]


def _score(config: ProviderConfig, offers: Sequence[ProviderOffer]) -> Rank | None:
    """The best rank offered for ``config``'s kind, or ``None`` when no offer has it."""
    ranks = [o.rank() for o in offers if o.config.kind == config.kind]
    return min(ranks) if ranks else None


def _with_fallbacks(
    selection: ProviderSelection, offers: Sequence[ProviderOffer]
) -> list[tuple[Rank, ProviderSelection]]:
    """The candidate and the chains left by dropping its lead accelerator, each with its rank
    (a variant's shorter chain only while its lead offered it)."""
    found: list[tuple[Rank, ProviderSelection]] = []
    chain, reasons = selection.chain, selection.reasons
    own = selection.variant is not None or selection.precision is not None
    last = (max((o.place for o in offers), default=0), 0)
    while chain:
        score = _score(chain[0], offers)
        if score is None and (found or own):
            break
        found.append((score or last, attrs.evolve(selection, chain=chain, reasons=reasons)))
        if not is_accelerator(chain[0]):
            break
        chain, reasons = chain[1:], reasons[1:]
    return found


def _candidate_selection(
    key: CandidateKey,
    offers: Sequence[ProviderOffer],
    reference: ProviderSelection,
    request: SelectionRequest,
    plugins: PluginHost,
) -> ProviderSelection | None:
    """The chain the hook orders for candidate ``key``; ``None`` when its lead did not offer it."""
    own = [o for o in offers if candidate_key(o, request.metadata) == key]
    fallback = [o for o in reference.offers if not is_accelerator(o.config)]
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
        variant=key[0],
        precision=key[1],
    )


def _warn_unknown(offers: Sequence[ProviderOffer], names: Sequence[str]) -> None:
    for offer in offers:
        if offer.variant is not None and offer.variant not in names:
            warnings.warn(
                f"ortplug plugin {offer.plugin!r} offered {offer.config.kind} with variant "
                f"{offer.variant!r}, which the checkpoint does not have "
                f"({', '.join(names) or 'it has no variants'}); the offer is ignored",
                OrtplugPluginWarning,
                stacklevel=user_stacklevel(),
            )


def rank_variants(
    reference: ProviderSelection,
    offers: Sequence[ProviderOffer],
    request: SelectionRequest,
    plugins: PluginHost,
) -> ProviderSelection:
    """The best candidate, the others as its ``alternatives``; ``reference`` is the reference
    chain (the answer, unchanged, without variant or reduced-precision offers)."""
    names = [v.name for v in request.metadata.variants]
    _warn_unknown(offers, names)
    candidates = _with_fallbacks(reference, reference.offers)
    keys = [candidate_key(o, request.metadata) for o in offers if o.variant in (None, *names)]
    order = {name: i for i, name in enumerate([None, *names])}
    others = dict.fromkeys(key for key in keys if key != (None, None))
    for key in sorted(others, key=lambda key: order[key[0]]):
        selection = _candidate_selection(key, offers, reference, request, plugins)
        if selection is not None:
            candidates += _with_fallbacks(selection, selection.offers)
    unique: dict[tuple[str | None, str | None, tuple[ProviderConfig, ...]], ProviderSelection] = {}
    for _, candidate in sorted(candidates, key=lambda pair: pair[0]):  # stable: reference first
        unique.setdefault((candidate.variant, candidate.precision, candidate.chain), candidate)
    if not unique:
        return reference
    best, *rest = unique.values()
    return attrs.evolve(best, alternatives=tuple(rest))
