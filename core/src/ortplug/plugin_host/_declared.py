"""What the plugin host does with declarations: rule a plugin out unimported, hold it to its word.

A declared plugin is imported only when one of its kinds can be part of a build:
a kind is ruled out by its ``platforms`` or by a ``requires`` fact that the known
facts (a host's, or the cross-process probe cache's) say is empty. Once imported, the
plugin must implement the hooks it lists; what the core builds from the declaration (kinds
with a ``config``, probes with a ``detect``, metadata keys) is not compared, it is the
declaration. Only a plugin that keeps the older form (``ortplug_provider_types``...
listed) is held to what it declares those hooks give.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from ..host.capabilities import HostProbe
from ..plugins.declaration import (
    KindDeclaration,
    PluginDeclaration,
    ProbeDeclaration,
    platform_matches,
)
from ..plugins.provider_type import ProviderType
from ..plugins.types import MetadataKey

__all__ = ["broken_promise", "probe_stub", "ruled_out"]

FactsOf = Callable[[str], "Mapping[str, object] | None"]


def _kind_ruled_out(kind: KindDeclaration, platform: str, facts_of: FactsOf) -> str | None:
    if not platform_matches(kind.platforms, platform):
        return f"runs on {' or '.join(kind.platforms)} only; this host is {platform}"
    for required in kind.requires:
        probe, _, fact = required.partition(".")
        facts = facts_of(probe)
        if facts is not None and not facts.get(fact):
            return f"needs {required}, which is {facts.get(fact)!r} here"
    return None


def ruled_out(
    declaration: PluginDeclaration, platform: str, facts_of: FactsOf
) -> dict[str, str] | None:
    """Each kind's reason when every kind of the plugin is ruled out; ``None`` when one may run.

    A plugin without kinds (one that orders chains or adjusts options) is never ruled out.
    """
    if not declaration.kinds:
        return None
    reasons = {}
    for kind in declaration.kinds:
        reason = _kind_ruled_out(kind, platform, facts_of)
        if reason is None:
            return None
        reasons[kind.kind] = reason
    return reasons


def _never() -> Mapping[str, object]:
    raise RuntimeError("a declared probe of a plugin that is not imported does not run")


def probe_stub(declared: ProbeDeclaration) -> HostProbe:
    """A not-imported plugin's probe as declared: for its cache key and cached facts; never run."""
    return HostProbe(
        name=declared.name, facts=declared.facts, detect=_never, identity=declared.identity
    )


def _kinds(types: Iterable[ProviderType | KindDeclaration]) -> list[str]:
    rows = []
    for item in types:
        library = item.library
        place = (library.name, library.package, library.path) if library is not None else None
        aliases = sorted(item.aliases)
        concurrent = "concurrent runs" if item.concurrent_runs else "serialised runs"
        rows.append(
            f"{item.kind} ({item.ort_name}, aliases {aliases}, library {place}, {concurrent})"
        )
    return sorted(rows)


def _probes(probes: Iterable[HostProbe | ProbeDeclaration]) -> list[str]:
    return sorted(f"{probe.name} {list(probe.facts)}" for probe in probes)


def broken_promise(
    declaration: PluginDeclaration,
    types: Iterable[ProviderType],
    probes: Iterable[HostProbe],
    hooks: Collection[str],
    keys: Iterable[MetadataKey],
) -> str | None:
    """How the imported plugin differs from its declaration (the first difference), or ``None``.

    Kinds, probes and metadata keys are compared only where the declaration lists their hook
    (the older form); otherwise the core builds them from the declaration.
    """
    declared_keys = sorted(f"{k.name} {sorted(k.types)}" for k in declaration.metadata_keys)
    given_keys = sorted(f"{k.name} {sorted(t.__name__ for t in k.types)}" for k in keys)
    pairs = (
        ("kinds", "ortplug_provider_types", _kinds(declaration.kinds), _kinds(types)),
        ("probes", "ortplug_host_probes", _probes(declaration.probes), _probes(probes)),
        ("hooks", None, sorted(declaration.hooks), sorted(hooks)),
        ("metadata keys", "ortplug_metadata_keys", declared_keys, given_keys),
    )
    for what, hook, declared, given in pairs:
        if hook is not None and hook not in declaration.hooks:
            continue
        if declared != given:
            return (
                f"{declaration.source} declares {what} {declared}, the plugin contributes "
                f"{given}; make the declaration say what the plugin does"
            )
    return None
