"""Planning a session: the provider chain (explicit or from the policy) and the adjusted options."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .. import autotune
from .._runtime import INSTALL_HINT
from ..checkpoint import ResolvedCheckpoint
from ..environment import global_thread_pools
from ..ep_libraries import EpLibrary, ensure_library
from ..ort_selection import OrtDevicePolicy
from ..policy import DefaultProviderPolicy, ProviderPolicy
from ..providers import ProviderConfig
from ..session_options import SessionOptionsConfig

if TYPE_CHECKING:
    from ..host import HostCapabilities
    from ..plugins.manager import PluginHost

__all__ = ["SessionPlan", "plan_session", "resolve_checkpoint"]

# Lets OnnxBackend.node_assignment() say which provider took which nodes; measured
# free to 2.5% of the build (light_squeezenet, light_resnet50, the demo model).
_RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"


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


def resolve_checkpoint(checkpoint: object) -> ResolvedCheckpoint:
    """Accept a ``ResolvedCheckpoint`` or anything with ``resolve()`` (``LocalCheckpoint``...)."""
    if isinstance(checkpoint, ResolvedCheckpoint):
        return checkpoint
    resolve = getattr(checkpoint, "resolve", None)
    if callable(resolve):
        resolved = resolve()
        if isinstance(resolved, ResolvedCheckpoint):
            return resolved
    raise TypeError(
        "checkpoint: expected a ResolvedCheckpoint (e.g. LocalCheckpoint(path).resolve()), "
        f"got {type(checkpoint).__name__}"
    )


def _explicit_chain(providers: object, plugins: PluginHost) -> list[ProviderConfig]:
    if isinstance(providers, (str, Mapping)) or not isinstance(providers, Iterable):
        raise TypeError(
            "providers: expected a list such as ['cuda', 'cpu'] or None to let the policy "
            f"choose, got {type(providers).__name__} {providers!r}"
        )
    registry = plugins.provider_registry()
    chain = [registry.parse(item) for item in providers]
    if not chain:
        raise ValueError("providers: expected at least one provider, got an empty list")
    return chain


def plan_session(
    checkpoint: ResolvedCheckpoint,
    providers: Sequence[Any] | None,
    session_options: SessionOptionsConfig | None,
    policy: ProviderPolicy | None,
    plugins: PluginHost | None,
) -> SessionPlan:
    """Pick the chain (explicit: strict; policy: graceful) and let plugins adjust the options."""
    if plugins is None:
        plugins = getattr(policy, "plugins", None)
    if plugins is None:
        from ..plugins.manager import get_plugin_host

        plugins = get_plugin_host()
    if session_options is None:
        session_options = SessionOptionsConfig()
    elif not isinstance(session_options, SessionOptionsConfig):
        raise TypeError(
            "session_options: expected a SessionOptionsConfig (SessionOptionsConfig.from_dict "
            f"reads a dict), got {type(session_options).__name__}"
        )
    host = plugins.host_capabilities()
    metadata = checkpoint.metadata
    device_policy = None
    chain: list[ProviderConfig]
    reasons: list[str]
    declined: list[tuple[str, str]]
    if isinstance(policy, OrtDevicePolicy) and providers is None:
        # ONNX Runtime picks the providers; it must see every plugin-EP library we know.
        chain, reasons, strict = [], [], False
        declined = _register_libraries(plugins)
        device_policy = policy.ort_member
    elif providers is not None:
        chain, strict = _explicit_chain(providers, plugins), True
        reasons = ["requested explicitly (strict)"] * len(chain)
        declined = []
    else:
        chosen, reasons, declined = _policy_chain(
            policy or DefaultProviderPolicy(plugins), checkpoint, host
        )
        if not chosen:
            installed = ", ".join(plugins.provider_registry().kinds()) or "none"
            raise RuntimeError(
                f"no plugin offered a provider for {checkpoint.label} on this host "
                f"(installed provider kinds: {installed}); {INSTALL_HINT}"
            )
        chain, strict = list(chosen), False
        if policy is None or type(policy) is DefaultProviderPolicy:
            chain, reasons, session_options = _apply_tuning(
                chain, reasons, session_options, checkpoint, host=host, plugins=plugins
            )
    chain = [plugins.prepare_provider(config, checkpoint, host) for config in chain]
    options = plugins.adjust_session_options(session_options, chain, metadata, host)
    options = options.with_config_entries({_RECORD_ASSIGNMENT: "1"})  # cheap; the user's value wins
    _check_options_fit(options, checkpoint)
    registry = plugins.provider_registry()
    return SessionPlan(
        chain=tuple(chain),
        reasons=tuple(reasons),
        options=options,
        strict=strict,
        host=host,
        libraries=tuple(registry.library_of(config.kind) for config in chain),
        declined=tuple(declined),
        device_policy=device_policy,
    )


def _policy_chain(
    policy: ProviderPolicy, checkpoint: ResolvedCheckpoint, host: HostCapabilities
) -> tuple[list[ProviderConfig], list[str], list[tuple[str, str]]]:
    """The policy's chain, a reason per provider (a plain policy gives its class name), declines."""
    if isinstance(policy, DefaultProviderPolicy):
        selection = policy.explain(checkpoint.metadata, host, checkpoint)
        reasons = [selection.reason_for(c) for c in selection.chain]
        declined = [(d.kind, f"{d.reason} [{d.plugin}]") for d in selection.declined]
        return list(selection.chain), reasons, declined
    chain = list(policy.select(checkpoint.metadata, host))
    return chain, [f"chosen by {type(policy).__name__}"] * len(chain), []


def _apply_tuning(
    chain: list[ProviderConfig],
    reasons: list[str],
    options: SessionOptionsConfig,
    checkpoint: ResolvedCheckpoint,
    *,
    host: HostCapabilities,
    plugins: PluginHost,
) -> tuple[list[ProviderConfig], list[str], SessionOptionsConfig]:
    """Use what ``ortplug bench --save`` measured for this model here, where the user left it open."""
    tuned = autotune.lookup(checkpoint, host)
    if tuned is None:
        return chain, reasons, options
    by_kind = {config.kind: config for config in chain}
    registry = plugins.provider_registry()
    if set(tuned.chain) - set(by_kind) - {"cpu"} or "cpu" not in registry.kinds():
        return chain, reasons, options  # a provider it measured is no longer offered here
    chain = [by_kind.get(kind) or registry.parse(kind) for kind in tuned.chain]
    reasons = [tuned.describe()] * len(chain)
    if (
        tuned.intra_op_num_threads is not None
        and options.intra_op_num_threads is None
        and "ORT_INTRA_OP_NUM_THREADS" not in os.environ
    ):
        options = options.evolve(intra_op_num_threads=tuned.intra_op_num_threads)
    return chain, reasons, options


def _register_libraries(plugins: PluginHost) -> list[tuple[str, str]]:
    """Register every plugin-EP library the plugins know; ``(kind, problem)`` for those that fail."""
    declined = []
    for spec in plugins.provider_registry().specs():
        if spec.type.library is not None:
            problem = ensure_library(spec.type.library).problem()
            if problem:
                declined.append((spec.type.kind, f"{problem} [{spec.plugin}]"))
    return declined


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
            raise ValueError(
                f"free_dimension_overrides: {unknown} not a symbolic dimension of the inputs of "
                f"{checkpoint.label}; it has {sorted(symbolic) or 'none'}"
            )
    if options.use_per_session_threads is False and global_thread_pools() is None:
        raise ValueError(
            "use_per_session_threads=False needs the process-wide thread pools: call "
            "ortplug.configure(global_intra_op_num_threads=..., global_inter_op_num_threads=...) "
            "first"
        )
