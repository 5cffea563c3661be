"""``ManifestAzureProvider``: the kind's config class, named in ortplug.json."""

from __future__ import annotations

from typing import ClassVar

import attrs


@attrs.frozen
class ManifestAzureProvider:
    """ONNX Runtime's Azure provider, which takes no options here."""

    kind: ClassVar[str] = "manifestazure"
    ort_name: ClassVar[str] = "AzureExecutionProvider"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return self.ort_name, {}
