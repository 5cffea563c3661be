"""The ``ortplug_*`` hook specifications every plugin implements a subset of, each with the
contract the host calls it by (:class:`HookContract`)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import pluggy

from ..host.capabilities import HostProbe
from ..providers.configs import ProviderConfig, is_provider_config
from ..providers.session_options import SessionOptionsConfig
from .project import PROJECT
from .provider_type import ProviderType
from .types import DoctorCheck, MetadataKey, ProviderDecline, ProviderOffer

if TYPE_CHECKING:
    from ..checkpoint import CheckpointMetadata, ResolvedCheckpoint
    from ..host.capabilities import HostCapabilities

__all__ = [
    "CONTRACTS",
    "MAX_ITEMS",
    "PROJECT",
    "CallMode",
    "HookContract",
    "hookimpl",
    "hookspec",
    "ortplug_adjust_session_options",
    "ortplug_doctor_checks",
    "ortplug_host_probes",
    "ortplug_metadata_keys",
    "ortplug_offer_providers",
    "ortplug_prepare_provider",
    "ortplug_provider_chain",
    "ortplug_provider_types",
]

#: At most this many items are taken from one plugin's answer to a collecting hook.
MAX_ITEMS = 64

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

_F = TypeVar("_F", bound=Callable[..., Any])


class CallMode(enum.Enum):
    """How the host calls a hook's implementations."""

    COLLECT = "collect"
    FIRST_RESULT = "first result"
    FOLD = "fold"


@attrs.frozen
class HookContract:
    """How one hook is called and what its implementations may return: ``items`` the types of its
    items, ``fold_argument`` what a fold passes along, ``check(before, after)`` what is wrong with
    a result (``None``: nothing), ``propagate`` the user's errors, raised as they are."""

    mode: CallMode
    items: tuple[type, ...] = ()
    fold_argument: str | None = None
    check: Callable[[Any, Any], str | None] | None = None
    propagate: tuple[type[BaseException], ...] = ()

    def describe_items(self) -> str:
        """The expected item types, for error messages."""
        return " or ".join(t.__name__ for t in self.items)


#: Every hook's contract, by hook name; filled by the specs below.
CONTRACTS: dict[str, HookContract] = {}


def _spec(contract: HookContract) -> Callable[[_F], _F]:
    """Declare a hook spec together with its call contract (the only way a spec is declared)."""

    def mark(function: _F) -> _F:
        CONTRACTS[function.__name__] = contract
        first = contract.mode is CallMode.FIRST_RESULT
        marked: _F = hookspec(firstresult=first)(function)
        return marked

    return mark


def _same_kind(before: Any, after: Any) -> str | None:
    if is_provider_config(after) and after.kind == before.kind:
        return None
    return f"expected a {before.kind!r} provider config or None, got {type(after).__name__}"


def _session_options(_: Any, after: Any) -> str | None:
    if isinstance(after, SessionOptionsConfig):
        return None
    return f"expected a SessionOptionsConfig or None, got {type(after).__name__}"


@_spec(HookContract(CallMode.COLLECT, items=(ProviderType,)))
def ortplug_provider_types() -> Iterable[ProviderType]:
    """Contribute provider kinds (hook form only: a manifest declares them); once per plugin host.

    A name two plugins claim keeps its first claimant, the other is skipped with a warning
    (:class:`~ortplug.errors.PluginConflictError` under ``ORTPLUG_STRICT_PLUGINS=1``). Example::

        @hookimpl
        def ortplug_provider_types():
            yield ProviderType("acme", "AcmeExecutionProvider", AcmeProvider, aliases=("npu",))
    """
    raise NotImplementedError


@_spec(HookContract(CallMode.COLLECT, items=(HostProbe,)))
def ortplug_host_probes() -> Iterable[HostProbe]:
    """Contribute lazy host probes (hook form only), their facts in ``host.facts[probe.name]``;
    keep the hook cheap: the work goes in ``HostProbe.detect``, run on first use."""
    raise NotImplementedError


@_spec(HookContract(CallMode.COLLECT, items=(MetadataKey,)))
def ortplug_metadata_keys() -> Iterable[MetadataKey]:
    """Declare the ``CheckpointMetadata.extra`` keys your plugin reads, with their types (hook
    form only); an undeclared key or a value of another type gets an
    :class:`~ortplug.errors.OrtplugConfigWarning` at build. Example::

        @hookimpl
        def ortplug_metadata_keys():
            yield MetadataKey("acme_tiles", int, "tile count for the Acme compiler")
    """
    raise NotImplementedError


@_spec(HookContract(CallMode.COLLECT, items=(ProviderOffer, ProviderDecline)))
def ortplug_offer_providers(
    metadata: CheckpointMetadata,
    host: HostCapabilities,
    checkpoint: ResolvedCheckpoint | None,
) -> Iterable[ProviderOffer | ProviderDecline]:
    """Offer providers for this checkpoint on this host, each with a preference and a reason, or a
    :class:`ProviderDecline` saying why not (``ortplug info`` shows it).

    The preference orders your kind's own offers only. ``variant=name`` offers one of
    ``metadata.variants``; a plain offer computes at the weights' precision (set a provider whose
    default is reduced, such as TF32, to full precision), and a reduced-precision switch is a
    second offer with ``precision=`` (``"fp16"``, ``"bf16"``, ``"tf32"``), verified at that
    precision's tolerance before it serves, never used with ``verify=False``.

    :param metadata: the checkpoint's metadata (precision, static shapes, ...).
    :param host: host facts; your probe's with ``host.fact("<probe>", "<fact>")``.
    :param checkpoint: the weights (``None`` when a policy is asked with metadata only).

    For example, a ggml-style provider with an f16-weights switch::

        @hookimpl
        def ortplug_offer_providers(metadata, host):
            yield ProviderOffer(GgmlProvider(f16_weights=False), 0, "ggml, fp32 weights")
            if metadata.precision == "fp32":
                yield ProviderOffer(
                    GgmlProvider(f16_weights=True), -1, "ggml, f16 weights: half the traffic",
                    precision="fp16",
                )
    """
    raise NotImplementedError


@_spec(HookContract(CallMode.FIRST_RESULT, items=(ProviderConfig,)))
def ortplug_provider_chain(
    offers: Sequence[ProviderOffer], metadata: CheckpointMetadata, host: HostCapabilities
) -> list[ProviderConfig] | None:
    """Turn the collected offers into the ordered provider chain; the first non-``None`` wins.

    The built-in ``trylast`` one orders kinds by ``offer.place``, each kind's offers by preference,
    one per kind, CPU last; a ``tryfirst`` implementation overrides it.

    :param offers: every plugin's offers, ``offer.plugin`` and ``offer.place`` filled in.
    :param metadata: the checkpoint's metadata.
    :param host: the host facts the offers were made for.
    """
    raise NotImplementedError


@_spec(
    HookContract(
        CallMode.FOLD,
        fold_argument="config",
        check=_same_kind,
        propagate=(ValueError, OSError),
    )
)
def ortplug_prepare_provider(
    config: ProviderConfig, checkpoint: ResolvedCheckpoint, host: HostCapabilities
) -> ProviderConfig | None:
    """Finish one provider config for the session about to load ``checkpoint``; ``None``: no change.

    Asked of the kind's own plugin, for every chain entry, right before the build: fill in what
    depends on the model (cache folders keyed by ``checkpoint.fingerprint()``, shapes), load
    native libraries (a plugin-EP library is the core's to register). A ``ValueError`` naming the
    option, or an ``OSError`` of a cache folder, reaches the user as raised.

    :param config: the provider config as chosen so far (a fold over plugins).
    :param checkpoint: the resolved checkpoint (path or bytes, and metadata).
    :param host: the host facts.
    """
    raise NotImplementedError


@_spec(HookContract(CallMode.FOLD, fold_argument="session_options", check=_session_options))
def ortplug_adjust_session_options(
    session_options: SessionOptionsConfig,
    chain: Sequence[ProviderConfig],
    metadata: CheckpointMetadata,
    host: HostCapabilities,
) -> SessionOptionsConfig | None:
    """Adjust session options for a chain about to be built; return ``None`` for no change.

    A fold, asked of the plugins owning a kind of the chain, ``cpu`` or no kind: fill only what
    the user left ``None``.

    :param session_options: the options so far.
    :param chain: the provider configs of the session, in priority order.
    :param metadata: the checkpoint's metadata.
    :param host: the host facts.
    """
    raise NotImplementedError


@_spec(HookContract(CallMode.COLLECT, items=(DoctorCheck,)))
def ortplug_doctor_checks(host: HostCapabilities) -> Iterable[DoctorCheck]:
    """Checks ``ortplug doctor`` runs for your provider (``DoctorCheck(name, ok, detail, fix)``):
    what breaks it on this host; nothing where it does not apply.

    :param host: the host facts, your probe's included.
    """
    raise NotImplementedError
