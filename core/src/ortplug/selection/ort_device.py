"""Bridges to ONNX Runtime's own provider selection: :class:`OrtDevicePolicy` hands it the choice,
:func:`ort_delegate` makes any ortplug policy its delegate."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from ..checkpoint import CheckpointMetadata
from ..errors import OptionError
from ..host.capabilities import HostCapabilities
from ..host.ep_libraries import ensure_library
from ..plugins.types import ProviderDecline
from ..providers.configs import CPU_EP, ProviderConfig
from .protocol import ProviderSelection, SelectionRequest

if TYPE_CHECKING:
    from .protocol import ProviderPolicy

__all__ = ["DEVICE_POLICIES", "OrtDevicePolicy", "ort_delegate"]

#: Short names of ``OrtExecutionProviderDevicePolicy`` members.
DEVICE_POLICIES = MappingProxyType(
    {
        "default": "DEFAULT",
        "prefer_cpu": "PREFER_CPU",
        "prefer_npu": "PREFER_NPU",
        "prefer_gpu": "PREFER_GPU",
        "max_performance": "MAX_PERFORMANCE",
        "max_efficiency": "MAX_EFFICIENCY",
        "min_overall_power": "MIN_OVERALL_POWER",
    }
)


def _policy_name(value: str) -> str:
    key = str(value).lower()
    if key not in DEVICE_POLICIES:
        raise OptionError(
            f"OrtDevicePolicy: expected one of {', '.join(DEVICE_POLICIES)}, got {value!r}"
        )
    return key


@attrs.frozen
class OrtDevicePolicy:
    """Let ONNX Runtime choose the providers with one of its device policies."""

    name: str = attrs.field(converter=_policy_name)

    @property
    def ort_member(self) -> str:
        """The ``OrtExecutionProviderDevicePolicy`` member name."""
        return DEVICE_POLICIES[self.name]

    def choose(self, request: SelectionRequest) -> ProviderSelection:
        """No chain: ONNX Runtime picks among every device it sees, once every plugin-EP library
        the plugins know is registered (one that cannot be is a decline)."""
        declined = []
        for spec in request.plugins.provider_registry().specs():
            if spec.type.library is not None:
                problem = ensure_library(spec.type.library).problem()
                if problem:
                    declined.append(ProviderDecline(spec.type.kind, problem, spec.plugin))
        return ProviderSelection(
            chain=(), reasons=(), declined=tuple(declined), device_policy=self.ort_member
        )

    def select(self, metadata: CheckpointMetadata, host: HostCapabilities) -> list[ProviderConfig]:
        """Nothing: ONNX Runtime picks when the session is built (see ``backend.providers``)."""
        return []


def ort_delegate(
    policy: ProviderPolicy, metadata: CheckpointMetadata, host: HostCapabilities
) -> Callable[[Sequence[Any], Mapping[str, str], Mapping[str, str], int], list[Any]]:
    """An ONNX Runtime selection delegate (``set_provider_selection_policy_delegate``) picking
    devices in ``policy``'s chain order, chosen once for ``metadata`` on ``host``; else the CPU."""
    chain = [config.to_ort()[0] for config in policy.select(metadata, host)]

    def delegate(
        ep_devices: Sequence[Any],
        model_metadata: Mapping[str, str],
        runtime_metadata: Mapping[str, str],
        max_selections: int,
    ) -> list[Any]:
        chosen = [device for name in chain for device in ep_devices if device.ep_name == name]
        if not chosen:
            chosen = [device for device in ep_devices if device.ep_name == CPU_EP]
        return chosen[: max(1, max_selections)]

    return delegate
