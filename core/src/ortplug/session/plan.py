"""Planning a session: the candidates (an explicit chain, or the policy's choices) and, for the one
about to be built, the plugins' finished chain and session options."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
from ..host.ep_libraries import EpLibrary
from ..host.runtime import install_hint
from ..log import user_stacklevel
from ..plugin_host.manager import PluginHost, resolve_plugin_host
from ..plugin_host.registry import check_distinct
from ..plugins.types import ProviderDecline
from ..providers.configs import ProviderConfig, is_accelerator
from ..providers.session_options import SessionOptionsConfig
from ..selection import DefaultProviderPolicy, ProviderSelection, SelectionRequest, select_providers

if TYPE_CHECKING:
    from ..host.capabilities import HostCapabilities

__all__ = [
    "RECORD_ASSIGNMENT",
    "Choice",
    "SessionPlan",
    "StalePlanError",
    "choice_text",
    "choices",
    "metadata_warnings",
    "parse_providers",
    "plan_session",
    "prepare",
    "resolve_checkpoint",
    "unusable_variant",
]

# Lets OnnxBackend.node_assignment() say which provider took which nodes; measured
# free to 2.5% of the build (light_squeezenet, light_resnet50, the demo model).
RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"


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
class Choice:
    """One candidate of a build, decided and pure: the chain as the policy (or the caller) gave
    it, the weights it runs; no plugin has prepared it yet (:func:`prepare` does, when it is
    about to be built)."""

    selection: ProviderSelection  # without alternatives: the choices after it are their own
    host: HostCapabilities
    strict: bool  # an explicit chain: enforced strictly
    variant: ResolvedCheckpoint | None  # the variant's weights (``None``: the checkpoint's)
    explain: Callable[[Sequence[str]], Mapping[str, str]] = attrs.field(eq=False, repr=False)
    plugins: PluginHost = attrs.field(eq=False, repr=False)

    @property
    def precision(self) -> str | None:
        return self.selection.precision

    @property
    def variant_name(self) -> str | None:
        return self.variant.variant if self.variant is not None else None

    @property
    def on_reference(self) -> bool:
        """Whether it runs the reference weights at their own precision (no variant, no mode)."""
        return self.variant is None and self.precision is None

    @property
    def cpu_reference(self) -> bool:
        """Whether it is the CPU reference: the reference weights, and no accelerator asked for."""
        return self.on_reference and not any(is_accelerator(c) for c in self.selection.chain)

    @property
    def text(self) -> str:
        """``variant int8 on [cpu]``: the choice as one line names it."""
        return choice_text(self.variant_name, self.selection.chain)


def parse_providers(providers: object, plugins: PluginHost) -> tuple[ProviderConfig, ...]:
    """An explicit provider list (config objects, ``{"kind": ...}`` dicts, names) parsed once."""
    return tuple(_explicit_chain(providers, plugins))


def choices(
    checkpoint: ResolvedCheckpoint,
    providers: Sequence[Any] | None,
    policy: object | None,
    plugins: PluginHost | None,
) -> Iterator[Choice]:
    """The build's candidates, best first, produced as they are asked for: an explicit chain
    (strict), or the policy's choice and each of its alternatives. Pure: no plugin prepares
    anything here. A choice whose variant file cannot be read is skipped with one warning
    (the only choice raises its file's problem)."""
    # A policy may carry the plugin host it asks (DefaultProviderPolicy(plugins) does).
    host_plugins = resolve_plugin_host(plugins or getattr(policy, "plugins", None))
    if providers is not None:
        chain = parse_providers(providers, host_plugins)
        host = host_plugins.host_capabilities(kinds={config.kind for config in chain})
        reasons = ("requested explicitly (strict)",) * len(chain)
        asked = _explainer(checkpoint, host_plugins, host)
        yield Choice(ProviderSelection(chain, reasons), host, True, None, asked, host_plugins)
        return
    host = host_plugins.host_capabilities()
    request = SelectionRequest(checkpoint.metadata, host, host_plugins, checkpoint)
    selection = select_providers(policy or DefaultProviderPolicy(host_plugins), request)
    if not selection.chain and selection.device_policy is None:
        raise NoProviderError(_no_provider_message(checkpoint.label, host_plugins, selection))
    known = selection.decline_reasons()

    def explain(kinds: Sequence[str]) -> Mapping[str, str]:
        return {kind: known[kind] for kind in kinds if kind in known}

    listed = [attrs.evolve(selection, alternatives=()), *selection.alternatives]
    kept = False
    for index, chosen in enumerate(listed):
        variant = None
        if chosen.variant is not None:
            following = listed[index + 1] if index + 1 < len(listed) else None
            try:
                variant = select_variant(checkpoint, chosen.variant)
            except (OptionError, MissingFileError) as exc:
                if following is None and not kept:
                    raise
                then = choice_text(following.variant, following.chain) if following else None
                unusable_variant(checkpoint.label, chosen.variant, exc, then)
                continue
        kept = True
        yield Choice(chosen, host, False, variant, explain, host_plugins)


def _explainer(
    checkpoint: ResolvedCheckpoint, plugins: PluginHost, host: HostCapabilities
) -> Callable[[Sequence[str]], Mapping[str, str]]:
    """Why the plugins do not offer ``kinds`` here, asked only when a requested one is missing."""

    def explain(kinds: Sequence[str]) -> Mapping[str, str]:
        answers = plugins.offer_providers(checkpoint.metadata, host, checkpoint)
        declines = [a for a in answers if isinstance(a, ProviderDecline) and a.kind in kinds]
        return {d.kind: f"{d.reason} [{d.plugin}]" for d in declines}

    return explain


def choice_text(variant: str | None, chain: Iterable[ProviderConfig]) -> str:
    """``variant int8 on [cpu]`` or ``the reference weights on [cuda, cpu]``: one of the policy's choices."""
    weights = f"variant {variant}" if variant else "the reference weights"
    return f"{weights} on [{', '.join(config.kind for config in chain)}]"


def unusable_variant(label: str, name: str, problem: Exception, following: str | None) -> None:
    """Say that the policy's variant ``name`` cannot be used (its file is missing, not a model,
    refused by ONNX Runtime) and that the next choice, ``following``, is taken (``None``: it was
    the last choice, left out)."""
    then = f"taking the next choice: {following}" if following else "it is left out"
    warnings.warn(
        f"{label}: variant {name!r} cannot be used: {problem}; {then}",
        VerificationWarning,
        stacklevel=user_stacklevel(),
    )


def metadata_warnings(checkpoint: ResolvedCheckpoint, plugins: PluginHost) -> None:
    """The plugins' problems with the checkpoint's metadata, one warning each."""
    for problem in plugins.metadata_problems(checkpoint.metadata):
        warnings.warn(
            f"{checkpoint.label}: {problem}", OrtplugConfigWarning, stacklevel=user_stacklevel()
        )


def prepare(
    checkpoint: ResolvedCheckpoint,
    choice: Choice,
    session_options: SessionOptionsConfig | None,
) -> SessionPlan:
    """``choice`` about to be built: each plugin finishes its chain entry and the session
    options (``ortplug_prepare_provider`` runs here, and only here)."""
    plugins, host, selection = choice.plugins, choice.host, choice.selection
    weights = choice.variant or checkpoint
    metadata = weights.metadata
    options = _checked_options(session_options)
    chain = [plugins.prepare_provider(config, weights, host) for config in selection.chain]
    options = options.with_defaults(selection.session_defaults)
    options = plugins.adjust_session_options(options, chain, metadata, host)
    if options.ort_base is None:  # a caller's own SessionOptions records only if it asks
        options = options.with_config_entries({RECORD_ASSIGNMENT: "1"})  # the user's value wins
    _check_options_fit(options, weights)
    registry = plugins.provider_registry()
    return SessionPlan(
        chain=tuple(chain),
        reasons=selection.reasons,
        options=options,
        strict=choice.strict,
        host=host,
        libraries=tuple(registry.library_of(config.kind) for config in chain),
        declined=tuple(selection.decline_reasons().items()),
        device_policy=selection.device_policy,
        explain_declines=choice.explain,
        plugins=plugins,
        variant=choice.variant,
        tuned=selection.tuned,
        precision=selection.precision,
        recorded=selection.recorded,
    )


def plan_session(
    checkpoint: ResolvedCheckpoint,
    providers: Sequence[Any] | None,
    session_options: SessionOptionsConfig | None,
    policy: object | None,
    plugins: PluginHost | None,
) -> SessionPlan:
    """The first choice, prepared: what a single session (the CPU reference of a verification,
    one row of ``ortplug verify``) is built from."""
    first = next(choices(checkpoint, providers, policy, plugins))
    return prepare(checkpoint, first, session_options)


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
    if options.use_per_session_threads is False:
        from ..host.environment import global_thread_pools  # only a build that opts out asks

        if global_thread_pools() is None:
            raise OptionError(
                "use_per_session_threads=False needs the process-wide thread pools: call "
                "ortplug.configure(global_intra_op_num_threads=..., "
                "global_inter_op_num_threads=...) first"
            )
