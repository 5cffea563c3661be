"""Which providers a checkpoint runs on: the policy protocol and every policy ortplug ships.

* :class:`DefaultProviderPolicy` — the plugins' offers, ordered by the chain hook,
  with ``ortplug bench --save`` records applied;
* :class:`OrtDevicePolicy` — ONNX Runtime's own device policies;
* any user object with ``choose(request)`` or ``select(metadata, host)``.
"""

from .default import DefaultProviderPolicy
from .ort_device import DEVICE_POLICIES, OrtDevicePolicy, ort_delegate
from .protocol import (
    ProviderPolicy,
    ProviderSelection,
    SelectingPolicy,
    SelectionRequest,
    describe_candidate,
    select_providers,
)

__all__ = [
    "DEVICE_POLICIES",
    "DefaultProviderPolicy",
    "OrtDevicePolicy",
    "ProviderPolicy",
    "ProviderSelection",
    "SelectingPolicy",
    "SelectionRequest",
    "describe_candidate",
    "ort_delegate",
    "select_providers",
]
