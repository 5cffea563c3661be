"""Claim arbitration: every provider name and probe name belongs to one plugin, its first
claimant (pure: the loader turns each skip into a warning or an error)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from ..host.capabilities import HostProbe
from ..plugins.declaration import PluginDeclaration
from ..plugins.provider_type import ProviderType

__all__ = ["Claim", "Skip", "arbitrate", "declared_claims", "hook_claims"]


class Claim(NamedTuple):
    """``plugin`` claims ``name`` through its item number ``item`` (a declared one is negative)."""

    plugin: str
    item: int
    name: str


class Skip(NamedTuple):
    """``plugin`` loses ``name`` to ``owner``, which claimed it first (itself: it claims it twice)."""

    plugin: str
    name: str
    owner: str

    def message(self, owner_origin: str, plugin_origin: str) -> str:
        """The one line saying so, with where each plugin comes from (``ortplug-acme 1.0``)."""
        if self.owner == self.plugin:  # two of its own types or probes share the name
            return (
                f"{self.name} is claimed twice by plugin {self.plugin!r} ({plugin_origin}), "
                "so it is skipped: give each of its provider types and probes names of its own"
            )
        return (
            f"{self.name} is already claimed by plugin {self.owner!r} ({owner_origin}); plugin "
            f"{self.plugin!r} ({plugin_origin}) is skipped: uninstall one of the two"
        )


def _provider_names(ptype: ProviderType) -> Iterator[str]:
    """What a provider type claims: its kind, aliases and ONNX Runtime name (case-insensitive)."""
    for name in sorted({n.lower() for n in (ptype.kind, *ptype.aliases, ptype.ort_name)}):
        yield f"provider name {name!r}"


def hook_claims(
    types: Iterable[tuple[str, ProviderType]], probes: Iterable[tuple[str, HostProbe]]
) -> list[Claim]:
    """The claims of imported plugins: their provider types' names and their probes' names."""
    claims = [Claim(p, i, n) for i, (p, t) in enumerate(types) for n in _provider_names(t)]
    claims += [Claim(p, i, f"probe name {probe.name!r}") for i, (p, probe) in enumerate(probes)]
    return claims


def declared_claims(plugin: str, declaration: PluginDeclaration) -> list[Claim]:
    """The claims of a declared plugin not imported yet: what its declaration names."""
    claims = [
        Claim(plugin, -1 - i, f"provider name {n!r}")
        for i, kind in enumerate(declaration.kinds)
        for n in kind.names()
    ]
    return claims + [Claim(plugin, -1, f"probe name {p.name!r}") for p in declaration.probes]


def arbitrate(claims: Iterable[Claim], rank: Callable[[str], tuple[bool, int]]) -> list[Skip]:
    """The plugins that lose a claim, with the name and its first claimant, in ``rank`` order.

    A plugin already skipped neither loses nor wins again. ``rank`` is called only when some
    name is claimed twice (ranking reads the shipped manifests: a process without a collision,
    the usual one, skips that).
    """
    claims = list(claims)
    if len({claim.name for claim in claims}) == len(claims):
        return []  # every name claimed once: nobody loses, in any order
    owners: dict[str, Claim] = {}
    skipped: set[str] = set()
    skips = []
    for claim in sorted(claims, key=lambda claim: rank(claim.plugin)):
        owner = owners.setdefault(claim.name, claim)
        if owner != claim and not {claim.plugin, owner.plugin} & skipped:
            skipped.add(claim.plugin)
            skips.append(Skip(claim.plugin, claim.name, owner.plugin))
    return skips
