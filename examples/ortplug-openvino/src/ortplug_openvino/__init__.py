"""ortplug-openvino: OpenVINO as an ortplug provider, from the ``onnxruntime-ep-openvino`` library.

The whole plugin: a config class for the provider and the generic adapter
that registers the library lazily, probes its devices and offers it.
"""

from __future__ import annotations

from typing import ClassVar

import attrs
from ortplug.plugins import EpPackagePlugin, LibraryProvider

__all__ = ["OpenVinoProvider", "plugin"]


@attrs.frozen(kw_only=True)
class OpenVinoProvider(LibraryProvider):
    """Intel OpenVINO (CPU, integrated GPU, NPU), from the ``onnxruntime-ep-openvino`` wheel.

    The plugin-EP build takes its OpenVINO settings through ``options``
    (for example ``{"load_config": ...}``); see the package's documentation.
    """

    kind: ClassVar[str] = "openvino"
    ort_name: ClassVar[str] = "OpenVINOExecutionProvider"


#: The object the ``openvino`` entry point names.
plugin = EpPackagePlugin("onnxruntime_ep_openvino", OpenVinoProvider, preference=30)
