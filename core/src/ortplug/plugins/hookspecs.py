"""The ``ortplug_*`` hook specifications every plugin implements a subset of.

Implementations take keyword arguments named exactly as below (a subset is
fine) and must not give them defaults. Each spec declares, beside it, how the
host calls it (:class:`HookContract`): **collect** (every plugin's items,
plugin by plugin, type-checked and bounded), **first result** (the first
non-``None`` answer in hook order) or **fold** (a value passed through every
plugin in order). A raising plugin is reported and skipped instead of hiding
the others. Wrapper implementations are not supported; use ``tryfirst`` or
``trylast`` to order.

A plugin that ships a declaration (:mod:`ortplug.plugins.declaration`) is
imported only when one of its kinds can be part of what is asked, so its hooks
run only then. ``ortplug_prepare_provider`` is asked only of the plugin that owns
the config's kind, and ``ortplug_adjust_session_options`` only of the plugins that
own a kind of the chain, own ``cpu`` (in every session) or own no kind.
"""

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
    """How one hook is called and what its implementations may return.

    ``items``: the types a collecting hook's items (or a first-result list's
    entries) must have. ``fold_argument``: the argument a fold passes along;
    ``check(before, after)`` says what is wrong with an implementation's result
    (``None``: it may replace the value). ``propagate``: exception types that are the user's to fix and
    reach them as raised, instead of counting as a plugin failure.
    """

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
    """Contribute provider kinds: tag, ONNX Runtime name, config class and aliases.

    For a plugin without an ``ortplug.json``: a declared plugin names each kind's config class
    in its manifest (``"config": "package.module:Class"``) and the core builds the type.
    Called once per plugin host. A kind, alias or ORT name claimed by two plugins keeps its
    first claimant (the core's, then ortplug's own plugins, then the others); the other plugin
    is skipped with one warning naming both distributions, or
    :class:`~ortplug.errors.PluginConflictError` is raised under ``ORTPLUG_STRICT_PLUGINS=1``.

    Example::

        @hookimpl
        def ortplug_provider_types():
            yield ProviderType("acme", "AcmeExecutionProvider", AcmeProvider, aliases=("npu",))
    """
    raise NotImplementedError


@_spec(HookContract(CallMode.COLLECT, items=(HostProbe,)))
def ortplug_host_probes() -> Iterable[HostProbe]:
    """Contribute lazy host probes; their facts land in ``HostCapabilities.facts[probe.name]``.

    For a plugin without an ``ortplug.json``: a declared plugin names each probe's function in
    its manifest (``"detect": "package.module:function"``) and the core builds the probe.
    Keep the hook itself cheap: only return :class:`HostProbe` values. The
    expensive work goes in ``HostProbe.detect``, which runs on first use.
    """
    raise NotImplementedError


@_spec(HookContract(CallMode.COLLECT, items=(MetadataKey,)))
def ortplug_metadata_keys() -> Iterable[MetadataKey]:
    """Declare the ``CheckpointMetadata.extra`` keys your plugin reads, with their types.

    For a plugin without an ``ortplug.json``: a declared plugin lists them in its manifest's
    ``metadata_keys``.

    A checkpoint whose ``extra`` holds a key no plugin declares, or a value of
    another type, gets one :class:`~ortplug.errors.OrtplugConfigWarning` naming
    the key when it is built, so a typo does not silently change nothing.

    Example::

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
    """Offer providers for this checkpoint on this host, each with a preference and a reason.

    The preference orders your kind's own offers only (an fp16 variant ahead of the exact
    offer, a reduced-precision switch behind it); where your kind goes among the others is
    declared, by the manifest kind's ``before``/``after`` (``ProviderType``'s in the hook form).

    :param metadata: the checkpoint's metadata (precision, static shapes, ...).
    :param host: detected or injected host facts; read your probe's facts with
        ``host.fact("<probe>", "<fact>")``.
    :param checkpoint: the weights, when the policy runs for a real model
        (``None`` when a policy is asked with metadata only); use it for facts
        that need the bytes, such as "an engine for this exact model is cached".

    Yield a :class:`ProviderDecline` instead of an offer when your provider
    cannot or should not run here, so ``ortplug info`` can say why. An offer with
    ``variant=name`` scores one of ``metadata.variants`` (an fp16 or int8 copy of the
    model; ``metadata.variants_for(ort_name, "fp16")`` lists those your provider may
    run) on your provider; the policy ranks it with the reference offers and uses it
    only once its outputs are verified against the CPU reference.

    Precision is a candidate too. An offer computes at the weights' precision
    unless it says otherwise: where your provider's default is a reduced precision
    (OpenVINO computes fp32 models in bf16 on AMX CPUs, CUDA in TF32 on Ampere),
    set it to full precision in the plain offer. Offer a reduced-precision switch
    as a second offer of the config with the switch on and ``precision=`` what it
    computes at (``"fp16"``, ``"bf16"``, ``"tf32"``), usually below the exact
    offer's preference: the policy ranks it as its own candidate, verifies it at
    that precision's tolerance (``ortplug.checkpoint.variants.DEFAULT_TOLERANCES``)
    before it serves, shows the precision in ``backend.report``, and never uses it
    with ``verify=False``. For example, a ggml-style provider with an f16-weights
    switch::

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
    """Turn the collected offers into the ordered provider chain. Stops at first non-None result.

    The built-in implementation (``trylast``) orders the kinds as declared
    (``offer.place``: the manifests' ``before``/``after``), each kind's offers by preference,
    keeps one offer per kind and puts the CPU provider last. Override it with a
    ``tryfirst`` implementation; return ``None`` to leave the decision to others.

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

    Called for every entry of the chain (policy-chosen or explicit) right before
    the session is built, on the plugin that owns the entry's kind only: fill in
    what depends on the model (cache directories keyed by
    ``checkpoint.fingerprint()``, shapes), load native libraries the provider
    needs, log a slow first build. A plugin-EP library named by the kind's
    :class:`ProviderType` is not one of them: the core registers it (first in a
    child process) when it checks an offer on the host it detected, and in any
    case before the session is built. Raise ``ValueError`` naming the option when the config
    cannot work for this checkpoint; it reaches the user as is, like the
    ``OSError`` of an unusable cache directory.

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

    A fold: plugins run in hook order and each sees the previous plugin's
    result. Only fill what the user left unset (``None``); values the user set
    win. Runs for policy-chosen and explicit chains alike, on the plugins that own
    a kind of the chain, the one that owns ``cpu`` and those that own no kind.

    :param session_options: the options so far.
    :param chain: the provider configs of the session, in priority order.
    :param metadata: the checkpoint's metadata.
    :param host: the host facts.
    """
    raise NotImplementedError


@_spec(HookContract(CallMode.COLLECT, items=(DoctorCheck,)))
def ortplug_doctor_checks(host: HostCapabilities) -> Iterable[DoctorCheck]:
    """Checks ``ortplug doctor`` runs for your provider, each with a fix line when it fails.

    Report what breaks your provider on this host (a driver/runtime version
    mismatch, a setting wider than the host allows) as ``DoctorCheck(name, ok,
    detail, fix)``; say nothing about hosts your provider does not apply to.

    :param host: the host facts, your probe's included.
    """
    raise NotImplementedError
