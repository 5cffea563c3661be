"""What the plugin host does with declarations: rule a plugin out unimported, hold it to its word."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from ..host.capabilities import HostProbe
from ..plugins.declaration import (
    KindDeclaration,
    PluginDeclaration,
    ProbeDeclaration,
    mixed_form,
    platform_matches,
)

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


def broken_promise(declaration: PluginDeclaration, hooks: Collection[str]) -> str | None:
    """How the imported plugin differs from its declaration, or ``None``: it must implement the
    hooks the manifest lists, and none of the hook form's (one form per plugin)."""
    mixed = mixed_form(f"plugin {declaration.plugin!r} ({declaration.source}) implements", hooks)
    if mixed is not None:
        return mixed
    declared, given = sorted(declaration.hooks), sorted(hooks)
    if declared != given:
        return (
            f"{declaration.source} declares hooks {declared}, the plugin implements {given}; "
            "make the declaration say what the plugin does"
        )
    return None
