"""A provider kind as a plugin contributes it (:class:`ProviderType`) and as the host holds it
(:class:`ProviderSpec`, with its plugin); the registry of them is the plugin host's."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ..errors import OptionError
from ..host.ep_libraries import EpLibrary

__all__ = ["DEVICES", "ProviderSpec", "ProviderType"]

#: The device classes a kind's sessions may run on: ``cpu`` the host's CPUs; ``gpu`` a GPU that
#: Ray schedules (an actor of the Ray add-on, ``ortplug_ray``, reserves one); ``npu`` a neural
#: accelerator; ``any`` whatever the provider's own stack picks (Core ML among CPU, GPU and Neural
#: Engine; WebGPU on any adapter, software ones included), which Ray does not reserve.
DEVICES = ("cpu", "gpu", "npu", "any")

_KIND_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")


def _check_kind(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not isinstance(value, str) or not _KIND_PATTERN.match(value):
        raise OptionError(
            f"{attribute.name}: expected a lower-case identifier like 'cuda', got {value!r}"
        )


def _as_names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _check_flag(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise OptionError(
            f"ProviderType.{attribute.name}: expected True or False, got {type(value).__name__} "
            f"{value!r}"
        )


def _check_device(_: Any, __: Any, value: object) -> None:
    if value not in DEVICES:
        raise OptionError(
            f"ProviderType.device: expected one of {', '.join(DEVICES)}, got {value!r}"
        )


@attrs.frozen
class ProviderType:
    """A provider kind a plugin contributes: its tag, ONNX Runtime name, config class and aliases.

    ``before``/``after``: its place in the default order; ``concurrent_runs=True``: its sessions
    run from several threads at once safely (else ortplug serialises them);
    ``session_wrapper(session, config)``: called once per build, returns what serves in place of
    ONNX Runtime's session (``None``: it serves as it is).
    """

    kind: str = attrs.field(validator=_check_kind)
    ort_name: str = attrs.field(validator=attrs.validators.min_len(1))
    config_cls: type[Any]
    aliases: tuple[str, ...] = attrs.field(default=(), converter=_as_names)
    description: str = ""
    #: The plugin-EP library that holds this provider (``None``: built into ONNX Runtime).
    library: EpLibrary | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.instance_of(EpLibrary)),
        kw_only=True,
    )
    concurrent_runs: bool = attrs.field(default=False, kw_only=True, validator=_check_flag)
    #: The device class its sessions run on (``DEVICES``: ``gpu`` makes a Ray actor reserve one).
    device: str = attrs.field(default="cpu", kw_only=True, validator=_check_device)
    #: The kinds this one goes ahead of, and behind, in the default order (installed or not).
    before: tuple[str, ...] = attrs.field(default=(), converter=_as_names, kw_only=True)
    after: tuple[str, ...] = attrs.field(default=(), converter=_as_names, kw_only=True)
    session_wrapper: Callable[[Any, Any], Any] | None = attrs.field(
        default=None,
        kw_only=True,
        validator=attrs.validators.optional(attrs.validators.is_callable()),
        eq=False,
    )

    def __attrs_post_init__(self) -> None:
        declared = getattr(self.config_cls, "kind", None)
        if declared != self.kind:
            raise OptionError(
                f"provider type {self.kind!r}: config class {self.config_cls.__name__} "
                f"declares kind {declared!r}; they must match"
            )


@attrs.frozen
class ProviderSpec:
    """A registered provider type together with the plugin that contributed it."""

    type: ProviderType
    plugin: str
