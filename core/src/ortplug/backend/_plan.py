"""Planning a session: the provider chain (explicit, or the policy's selection) and the options.

The policy owns "which providers" (:func:`~ortplug.selection.select_providers`);
this module only asks it, then lets the plugins finish each chain entry and
the session options.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..checkpoint import ResolvedCheckpoint, select_variant
from ..errors import (
    MissingFileError,
    NoProviderError,
    OptionError,
    OptionTypeError,
    OrtplugConfigWarning,
    VerificationWarning,
)
from ..host._runtime import install_hint
from ..host.environment import global_thread_pools
from ..host.ep_libraries import EpLibrary
from ..plugins.manager import PluginHost, resolve_plugin_host
from ..plugins.registry import check_distinct
from ..plugins.types import ProviderDecline
from ..providers.configs import ProviderConfig, is_accelerator
from ..providers.session_options import SessionOptionsConfig
from ..selection import (
    DefaultProviderPolicy,
    ProviderSelection,
    SelectionRequest,
    select_providers,
)

if TYPE_CHECKING:
    from ..host.capabilities import HostCapabilities

__all__ = [
    "SessionPlan",
    "choice_text",
    "plan_next",
    "plan_on_reference",
    "plan_session",
    "resolve_checkpoint",
    "unusable_variant",
]

# Lets OnnxBackend.node_assignment() say which provider took which nodes; measured
# free to 2.5% of the build (light_squeezenet, light_resnet50, the demo model).
_RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"


class StalePlanError(Exception):
    """Custom-op libraries were registered on the backend after the plan was made."""

    def __init__(self, libraries: tuple[str, ...]) -> None:
        super().__init__(f"custom-op libraries registered since: {', '.join(libraries)}")
        self.libraries = libraries


@attrs.frozen
class SessionPlan:
    """Everything needed to create the session, decided before ONNX Runtime is touched."""

    chain: tuple[ProviderConfig, ...]
    reasons: tuple[str, ...]  # one per chain entry
    options: SessionOptionsConfig
    strict: bool
    host: HostCapabilities
    libraries: tuple[EpLibrary | None, ...]  # one per chain entry: where a plugin-EP provider lives
    declined: tuple[tuple[str, str], ...] = ()  # (kind, reason) of providers the plugins declined
    device_policy: str | None = None  # an OrtDevicePolicy member: ONNX Runtime picks the providers
    #: kinds -> the reason each one's plugin gives for not offering it here (asked on demand).
    explain_declines: Callable[[Sequence[str]], Mapping[str, str]] = attrs.field(
        default=lambda kinds: {}, eq=False, repr=False
    )
    #: The plugin host that planned it (a later plan for the same backend asks the same one).
    plugins: PluginHost | None = attrs.field(default=None, eq=False, repr=False)
    #: The variant's weights when the policy chose a precision variant (``None``: the checkpoint's).
    variant: ResolvedCheckpoint | None = attrs.field(default=None, eq=False, repr=False)
    #: The policy's next choices, best first, for when verification rejects this plan.
    fallbacks: tuple[ProviderSelection, ...] = attrs.field(default=(), eq=False, repr=False)
    #: A measured record (``bench --save`` or an earlier first build) chose this plan.
    tuned: bool = False
    #: The reduced precision the chain's lead computes at (``None``: the weights' own).
    precision: str | None = None
    #: What became of this choice on the build a measured record keeps (``None``: none kept).
    recorded: str | None = None

    @property
    def on_reference(self) -> bool:
        """Whether it runs the reference weights at their own precision (no variant, no mode)."""
        return self.variant is None and self.precision is None

    @property
    def variant_name(self) -> str | None:
        """The name of the precision variant it runs (``None``: the checkpoint's weights)."""
        return self.variant.variant if self.variant is not None else None

    def with_custom_op_libraries(self, libraries: Iterable[str]) -> SessionPlan:
        """This plan with ``libraries`` added to its session's custom-op libraries where missing
        (registered on the backend after the plan was made)."""
        have = self.options.custom_op_libraries
        missing = tuple(library for library in libraries if library not in have)
        if not missing:
            return self
        options = self.options.evolve(custom_op_libraries=(*have, *missing))
        return attrs.evolve(self, options=options)

    @property
    def cpu_reference(self) -> bool:
        """Whether it is the CPU reference: the reference weights, and no accelerator asked for."""
        return self.on_reference and not any(is_accelerator(config) for config in self.chain)


@attrs.frozen
class _Listed:
    """A policy that answers with choices already made: the first, the rest as its alternatives."""

    choices: tuple[ProviderSelection, ...]

    def choose(self, request: SelectionRequest) -> ProviderSelection:
        return attrs.evolve(self.choices[0], alternatives=self.choices[1:])


def resolve_checkpoint(checkpoint: object) -> ResolvedCheckpoint:
    """Accept a ``ResolvedCheckpoint`` or anything with ``resolve()`` (``LocalCheckpoint``...)."""
    if isinstance(checkpoint, ResolvedCheckpoint):
        return checkpoint
    resolve = getattr(checkpoint, "resolve", None)
    if callable(resolve):
        resolved = resolve()
        if isinstance(resolved, ResolvedCheckpoint):
            return resolved
    raise OptionTypeError(
        "checkpoint: expected a ResolvedCheckpoint (e.g. LocalCheckpoint(path).resolve()), "
        f"got {type(checkpoint).__name__}"
    )


def _explicit_chain(providers: object, plugins: PluginHost) -> list[ProviderConfig]:
    if isinstance(providers, (str, Mapping)) or not isinstance(providers, Iterable):
        raise OptionTypeError(
            "providers: expected a list such as ['cuda', 'cpu'] or None to let the policy "
            f"choose, got {type(providers).__name__} {providers!r}"
        )
    registry = plugins.provider_registry()
    items = list(providers)
    chain = [registry.parse(item) for item in items]
    if not chain:
        raise OptionError("providers: expected at least one provider, got an empty list")
    try:
        check_distinct([(_given_name(item, config), config) for item, config in zip(items, chain)])
    except OptionError as exc:
        raise OptionError(f"providers: {exc}") from None
    return chain


def _given_name(item: object, config: ProviderConfig) -> str:
    """How a provider of an explicit chain was named: the string, the dict's kind, else its kind."""
    if isinstance(item, str):
        return item
    kind = item.get("kind") if isinstance(item, Mapping) else None
    return kind if isinstance(kind, str) else config.kind


def _checked_options(session_options: object) -> SessionOptionsConfig:
    if session_options is None:
        return SessionOptionsConfig()
    if not isinstance(session_options, SessionOptionsConfig):
        raise OptionTypeError(
            "session_options: expected a SessionOptionsConfig (SessionOptionsConfig.from_dict "
            f"reads a dict), got {type(session_options).__name__}"
        )
    return session_options


@attrs.frozen
class _Choice:
    """What was decided before the plugins finish the chain: an explicit chain or the policy's."""

    selection: ProviderSelection
    host: HostCapabilities
    checkpoint: ResolvedCheckpoint  # the chosen variant's weights, when the policy chose one
    variant: ResolvedCheckpoint | None
    explain: Callable[[Sequence[str]], Mapping[str, str]]


def _explicit(checkpoint: ResolvedCheckpoint, providers: object, plugins: PluginHost) -> _Choice:
    """The user's chain as given: only its plugins' probes run; declines are asked on demand."""
    chain = _explicit_chain(providers, plugins)
    host = plugins.host_capabilities(kinds={config.kind for config in chain})
    reasons = ("requested explicitly (strict)",) * len(chain)

    def explain(kinds: Sequence[str]) -> Mapping[str, str]:
        answers = plugins.offer_providers(checkpoint.metadata, host, checkpoint)
        declines = [a for a in answers if isinstance(a, ProviderDecline) and a.kind in kinds]
        return {d.kind: f"{d.reason} [{d.plugin}]" for d in declines}

    return _Choice(ProviderSelection(tuple(chain), reasons), host, checkpoint, None, explain)


def _chosen(checkpoint: ResolvedCheckpoint, policy: object | None, plugins: PluginHost) -> _Choice:
    """The policy's selection (and the variant it chose) for this checkpoint on this host."""
    host = plugins.host_capabilities()
    request = SelectionRequest(checkpoint.metadata, host, plugins, checkpoint)
    selection = select_providers(policy or DefaultProviderPolicy(plugins), request)
    if not selection.chain and selection.device_policy is None:
        raise NoProviderError(_no_provider_message(checkpoint.label, plugins, selection))
    selection, variant = _usable_variant(checkpoint, selection)
    known = selection.decline_reasons()

    def explain(kinds: Sequence[str]) -> Mapping[str, str]:
        return {kind: known[kind] for kind in kinds if kind in known}

    return _Choice(selection, host, variant or checkpoint, variant, explain)


def choice_text(variant: str | None, chain: Iterable[ProviderConfig]) -> str:
    """``variant int8 on [cpu]`` or ``the reference weights on [cuda, cpu]``: one of the policy's choices."""
    weights = f"variant {variant}" if variant else "the reference weights"
    return f"{weights} on [{', '.join(config.kind for config in chain)}]"


def unusable_variant(
    label: str, name: str, problem: Exception, following: str | None, *, stacklevel: int
) -> None:
    """Say that the policy's variant ``name`` cannot be used (its file is missing, not a model,
    refused by ONNX Runtime) and that the next choice, ``following``, is taken (``None``: it was
    a later choice, left out)."""
    then = f"taking the next choice: {following}" if following else "it is left out"
    warnings.warn(
        f"{label}: variant {name!r} cannot be used: {problem}; {then}",
        VerificationWarning,
        stacklevel=stacklevel + 1,
    )


class _UnusableLast(Exception):
    """The last choice left is a variant whose file cannot be used (``cause`` says why)."""

    def __init__(self, variant: str, cause: Exception) -> None:
        super().__init__(variant, cause)
        self.variant, self.cause = variant, cause


def _usable_variant(
    checkpoint: ResolvedCheckpoint, selection: ProviderSelection
) -> tuple[ProviderSelection, ResolvedCheckpoint | None]:
    """The policy's first choice whose variant file can be read (the reference needs none)."""
    while selection.variant is not None:
        try:
            return selection, select_variant(checkpoint, selection.variant)
        except (OptionError, MissingFileError) as exc:
            if not selection.alternatives:
                raise _UnusableLast(selection.variant, exc) from exc
            following, *rest = selection.alternatives
            unusable_variant(
                checkpoint.label,
                selection.variant,
                exc,
                choice_text(following.variant, following.chain),
                stacklevel=5,  # the caller of from_checkpoint
            )
            selection = attrs.evolve(following, alternatives=tuple(rest))
    return selection, None


def plan_session(
    checkpoint: ResolvedCheckpoint,
    providers: Sequence[Any] | None,
    session_options: SessionOptionsConfig | None,
    policy: object | None,
    plugins: PluginHost | None,
    *,
    later: bool = False,
) -> SessionPlan:
    """Pick the chain (explicit: strict; the policy's: graceful) and let plugins finish it.

    A choice whose variant cannot be used, with none after it, raises its file's problem; for a
    ``later`` choice (:func:`plan_next`) it raises :class:`_UnusableLast`, to be left out.
    """
    # A policy may carry the plugin host it asks (DefaultProviderPolicy(plugins) does).
    plugins = resolve_plugin_host(plugins or getattr(policy, "plugins", None))
    options = _checked_options(session_options)
    if providers is not None:
        choice = _explicit(checkpoint, providers, plugins)
    else:
        try:
            choice = _chosen(checkpoint, policy, plugins)
        except _UnusableLast as unusable:
            if later:
                raise
            raise unusable.cause from None
    checkpoint, host, selection = choice.checkpoint, choice.host, choice.selection
    metadata = checkpoint.metadata
    for problem in plugins.metadata_problems(metadata):
        warnings.warn(f"{checkpoint.label}: {problem}", OrtplugConfigWarning, stacklevel=4)
    chain = [plugins.prepare_provider(config, checkpoint, host) for config in selection.chain]
    options = options.with_defaults(selection.session_defaults)
    options = plugins.adjust_session_options(options, chain, metadata, host)
    if options.ort_base is None:  # a caller's own SessionOptions records only if it asks
        options = options.with_config_entries({_RECORD_ASSIGNMENT: "1"})  # the user's value wins
    _check_options_fit(options, checkpoint)
    registry = plugins.provider_registry()
    return SessionPlan(
        chain=tuple(chain),
        reasons=selection.reasons,
        options=options,
        strict=providers is not None,
        host=host,
        libraries=tuple(registry.library_of(config.kind) for config in chain),
        declined=tuple(selection.decline_reasons().items()),
        device_policy=selection.device_policy,
        explain_declines=choice.explain,
        plugins=plugins,
        variant=choice.variant,
        fallbacks=selection.alternatives,
        tuned=selection.tuned,
        precision=selection.precision,
        recorded=selection.recorded,
    )


def plan_next(
    checkpoint: ResolvedCheckpoint,
    plan: SessionPlan,
    session_options: SessionOptionsConfig | None,
) -> SessionPlan | None:
    """The policy's next choice after ``plan`` (verification rejected it), planned; ``None``: none left."""
    if not plan.fallbacks:
        return None
    try:
        return plan_session(
            checkpoint, None, session_options, _Listed(plan.fallbacks), plan.plugins, later=True
        )
    except _UnusableLast as unusable:  # an alternative never built: no reason to fail the build
        unusable_variant(checkpoint.label, unusable.variant, unusable.cause, None, stacklevel=4)
        return None


def plan_on_reference(
    checkpoint: ResolvedCheckpoint,
    plan: SessionPlan,
    session_options: SessionOptionsConfig | None,
) -> SessionPlan:
    """``plan``, or the first of its fallbacks on the reference weights at their precision
    (for ``verify=False``)."""
    current: SessionPlan | None = plan
    while current is not None and not current.on_reference:
        current = plan_next(checkpoint, current, session_options)
    if current is None:
        raise OptionError(
            f"verify=False: expected a choice of the policy on the reference weights of "
            f"{checkpoint.label} at their precision, got only variants or reduced-precision "
            "modes (an unverified one is not used); pass verify=None or True"
        )
    return current


def _no_provider_message(label: str, plugins: PluginHost, selection: ProviderSelection) -> str:
    installed = ", ".join(plugins.provider_registry().kinds()) or "none"
    declined = "; ".join(f"{k}: {r}" for k, r in selection.decline_reasons().items())
    by_hook = (
        f"the provider-chain hook of plugin {selection.chain_plugin!r} returned an empty chain; "
        if selection.chain_plugin and selection.offers
        else ""
    )
    return (
        f"no plugin offered a provider for {label} on this host: {by_hook}"
        f"installed provider kinds: {installed}"
        f"{'; declined: ' + declined if declined else ''}; {_blocked_or_install(plugins)}"
    )


def _blocked_or_install(plugins: PluginHost) -> str:
    """The settings that kept installed plugins out (change or unset them), else what to install."""
    by_setting: dict[str, list[str]] = {}
    for plugin, setting in plugins.blocked_by().items():
        by_setting.setdefault(setting, []).append(plugin)
    if not by_setting:
        return install_hint()
    return "; ".join(
        f"{setting} blocked the installed plugin(s) {', '.join(sorted(names))} (change or unset it)"
        for setting, names in by_setting.items()
    )


def _check_options_fit(options: SessionOptionsConfig, checkpoint: ResolvedCheckpoint) -> None:
    """What ONNX Runtime would ignore silently or reject cryptically, as clear errors."""
    by_name = [o.key for o in options.free_dimension_overrides if o.by == "name"]
    if by_name:
        symbolic = {
            dim
            for shape in checkpoint.input_shapes().values()
            for dim in shape or ()
            if isinstance(dim, str)
        }
        unknown = [key for key in by_name if key not in symbolic]
        if unknown:
            raise OptionError(
                f"free_dimension_overrides: {unknown} not a symbolic dimension of the inputs of "
                f"{checkpoint.label}; it has {sorted(symbolic) or 'none'}"
            )
    if options.use_per_session_threads is False and global_thread_pools() is None:
        raise OptionError(
            "use_per_session_threads=False needs the process-wide thread pools: call "
            "ortplug.configure(global_intra_op_num_threads=..., global_inter_op_num_threads=...) "
            "first"
        )
