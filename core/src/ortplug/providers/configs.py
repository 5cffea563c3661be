"""Provider configs: the protocol every plugin's typed provider options implement."""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

__all__ = ["CPU_EP", "ProviderConfig", "is_accelerator", "is_provider_config"]

#: ONNX Runtime's name of the CPU execution provider, the one provider that is never an accelerator.
CPU_EP = "CPUExecutionProvider"


@runtime_checkable
class ProviderConfig(Protocol):
    """Typed, validated options of one execution provider, contributed by a plugin.

    Implementations are frozen attrs classes with a ``kind`` class variable.
    """

    kind: ClassVar[str]

    def to_ort(self) -> tuple[str, dict[str, str]]:
        """Return ONNX Runtime's provider name and its options, every value a string."""
        ...


def is_provider_config(value: object) -> bool:
    """Whether ``value`` has a string ``kind`` and a ``to_ort()`` (cheaper than a Protocol check)."""
    return isinstance(getattr(type(value), "kind", None), str) and callable(
        getattr(value, "to_ort", None)
    )


def is_accelerator(config: ProviderConfig) -> bool:
    """Whether the provider is anything but ONNX Runtime's CPU provider."""
    return config.to_ort()[0] != CPU_EP
