"""``ManifestAzureProvider``: the kind's config class, named in ortplug.json."""

from __future__ import annotations

from typing import ClassVar

import attrs
from ortplug.plugins import declared_kind


@declared_kind
@attrs.frozen
class ManifestAzureProvider:
    """ONNX Runtime's Azure provider, which takes no options here."""

    kind: ClassVar[str]  # kind and ort_name: the manifest's (ortplug.json)
    ort_name: ClassVar[str]

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return self.ort_name, {}
