"""The one protocol that decides which providers a checkpoint runs on (:class:`SelectingPolicy`),
and the answer it gives (:class:`ProviderSelection`); a ``select``-only policy still works."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from ..checkpoint import CheckpointMetadata
from ..errors import OptionError, OptionTypeError
from ..host.capabilities import HostCapabilities
from ..plugin_host.manager import PluginHost
from ..plugins.types import ProviderDecline, ProviderOffer
from ..providers.configs import ProviderConfig

if TYPE_CHECKING:
    from ..checkpoint import ResolvedCheckpoint

__all__ = [
    "ProviderPolicy",
    "ProviderSelection",
    "SelectingPolicy",
    "SelectionRequest",
    "describe_candidate",
    "select_providers",
]


@runtime_checkable
class ProviderPolicy(Protocol):
    """Chooses the ordered provider chain for a checkpoint on a host (the simple protocol); the
    chain is enforced gracefully: a warning only when none of its accelerators was realized."""

    def select(self, metadata: CheckpointMetadata, host: HostCapabilities) -> list[ProviderConfig]:
        """Return provider configs in priority order."""
        ...


@attrs.frozen
class SelectionRequest:
    """What a policy decides from: metadata, host, the weights when known, and the plugins."""

    metadata: CheckpointMetadata
    host: HostCapabilities
    plugins: PluginHost
    checkpoint: ResolvedCheckpoint | None = None


def describe_candidate(variant: str | None, precision: str | None) -> str:
    """What a candidate runs, in words: ``the reference weights``, ``variant fp16``, ``the
    reference weights at tf32``."""
    weights = f"variant {variant}" if variant else "the reference weights"
    return f"{weights} at {precision}" if precision else weights


def _frozen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


@attrs.frozen
class ProviderSelection:
    """A policy's answer: the chain with a reason per entry, the declines, and what else it decided.

    ``device_policy`` hands the choice to ONNX Runtime (the chain is then empty);
    ``session_defaults`` are options recommended where the user left them unset; ``variant`` and
    ``precision`` what the chain runs (``None``: the reference weights, their own precision);
    ``alternatives`` the next choices, best first; ``tuned``/``recorded``: a measured record chose
    it, and what became of this choice on that build.
    """

    chain: tuple[ProviderConfig, ...]
    reasons: tuple[str, ...]
    offers: tuple[ProviderOffer, ...] = ()
    declined: tuple[ProviderDecline, ...] = ()
    device_policy: str | None = None
    session_defaults: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen)
    chain_plugin: str | None = None
    variant: str | None = None
    alternatives: tuple[ProviderSelection, ...] = ()
    #: Chosen by a measured record (autotune): built directly, not measured again.
    tuned: bool = False
    precision: str | None = None
    recorded: str | None = None

    def __attrs_post_init__(self) -> None:
        if len(self.reasons) != len(self.chain):
            raise OptionError(
                f"ProviderSelection: expected one reason per chain entry ({len(self.chain)}), "
                f"got {len(self.reasons)}"
            )

    def reason_for(self, config: ProviderConfig) -> str:
        """The reason that put ``config`` in the chain."""
        for entry, reason in zip(self.chain, self.reasons):
            if entry == config:
                return reason
        return "not in the chain"

    def describe_candidate(self) -> str:
        """``the reference weights``, ``variant int8``, ``the reference weights at bf16``..."""
        return describe_candidate(self.variant, self.precision)

    def decline_reasons(self) -> dict[str, str]:
        """``kind -> reason [plugin]`` of every declined provider."""
        return {d.kind: f"{d.reason} [{d.plugin}]" for d in self.declined}


@runtime_checkable
class SelectingPolicy(Protocol):
    """A policy that explains itself: the protocol every ortplug policy implements."""

    def choose(self, request: SelectionRequest) -> ProviderSelection:
        """The chain for ``request`` with its reasons and declines."""
        ...


def select_providers(policy: object, request: SelectionRequest) -> ProviderSelection:
    """Ask ``policy`` through :meth:`~SelectingPolicy.choose`, or its plain ``select()``."""
    choose = getattr(policy, "choose", None)
    if callable(choose):
        selection: ProviderSelection = choose(request)
        return selection
    select = getattr(policy, "select", None)
    if callable(select):
        chain = tuple(select(request.metadata, request.host))
        reason = f"chosen by {policy.__class__.__name__}"
        return ProviderSelection(chain=chain, reasons=(reason,) * len(chain))
    raise OptionTypeError(
        "policy: expected an object with choose(request) or select(metadata, host), "
        f"got {policy.__class__.__name__}"
    )
