"""ortplug-openvino: OpenVINO as an ortplug provider, from the ``onnxruntime-ep-openvino`` library.

The whole plugin: ``ortplug.json`` declares the kind (its config class, the plugin-EP
library) and the probe (the adapter's ``detect``, which registers the library lazily and
lists its devices), so the plugin is imported only when OpenVINO can be in play; here are a
config class for the provider with a typed inference precision, taking its names from the
manifest, and the generic adapter's offers: at f32 (exact), and at the device's reduced
precision as its own candidate (bf16 on a CPU with bf16 instructions, f16 on a GPU), which the
policy verifies at that precision's tolerance before it serves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import attrs
from ortplug.plugins import (
    CheckpointMetadata,
    EpPackagePlugin,
    HostCapabilities,
    LibraryProvider,
    OptionError,
    ProviderOffer,
    choice_field,
    declared_kind,
)

__all__ = ["BF16_ISA", "INFERENCE_PRECISIONS", "OpenVinoPlugin", "OpenVinoProvider", "plugin"]

#: OpenVINO's inference precisions (``INFERENCE_PRECISION_HINT``), with the devices that take each.
INFERENCE_PRECISIONS = {"f32": ("CPU", "GPU"), "bf16": ("CPU",), "f16": ("CPU", "GPU")}
#: ortplug's name of each reduced inference precision (``ProviderOffer.precision``).
_AS_OFFERED = {"bf16": "bf16", "f16": "fp16"}
#: CPU instructions (the CPU plugin's ``isa_flags``) with which OpenVINO computes bf16 natively,
#: and by default: on these CPUs an fp32 model runs in bf16 unless f32 is asked for.
BF16_ISA = frozenset({"amx_bf16", "avx512_bf16"})
_HINT = "INFERENCE_PRECISION_HINT"


def _load_config(given: str | None, precision: str) -> str:
    """``load_config`` (OpenVINO properties per device, JSON) with the precision hint added."""
    try:
        config: Any = json.loads(given) if given is not None else {}
    except ValueError as exc:
        raise OptionError(
            f"provider 'openvino': options load_config: expected JSON, got {given!r} ({exc})"
        ) from None
    if not isinstance(config, dict):
        raise OptionError(
            f"provider 'openvino': options load_config: expected a JSON object of devices, "
            f"got {given!r}"
        )
    for device in INFERENCE_PRECISIONS[precision]:
        properties = config.setdefault(device, {})
        if not isinstance(properties, dict):
            raise OptionError(
                f"provider 'openvino': load_config {device}: expected an object of properties, "
                f"got {properties!r}"
            )
        if _HINT in properties:
            raise OptionError(
                f"provider 'openvino': load_config {device} already sets {_HINT} "
                f"({properties[_HINT]!r}); set the precision once, as "
                f"inference_precision={precision!r}"
            )
        properties[_HINT] = precision
    return json.dumps(config, sort_keys=True)


@declared_kind
@attrs.frozen(kw_only=True)
class OpenVinoProvider(LibraryProvider):
    """Intel OpenVINO (CPU, integrated GPU, NPU), from the ``onnxruntime-ep-openvino`` wheel.

    ``inference_precision`` (``"f32"``, ``"bf16"``, ``"f16"``, or ortplug's ``"fp32"``,
    ``"fp16"``; ``None``: OpenVINO's default, which is bf16 for fp32 models on CPUs with AMX
    or AVX512-BF16 and f16 on GPUs) reaches the plugin-EP build as
    ``INFERENCE_PRECISION_HINT`` in ``load_config`` for the CPU and GPU devices (bf16: the
    CPU only); the build refuses its old ``precision`` option. Other OpenVINO settings go
    through ``options`` (``{"load_config": ...}``); see the package's documentation.
    """

    # kind and ort_name: the manifest's (ortplug.json)
    kind: ClassVar[str]
    ort_name: ClassVar[str]

    inference_precision: str | None = choice_field(
        INFERENCE_PRECISIONS, aliases={"fp32": "f32", "fp16": "f16"}
    )

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.to_ort()  # a load_config that clashes with inference_precision fails here, not at build

    def to_ort(self) -> tuple[str, dict[str, str]]:
        """The options, with ``inference_precision`` moved into ``load_config``."""
        name, options = super().to_ort()
        precision = options.pop("inference_precision", None)
        if precision is not None:
            options["load_config"] = _load_config(options.get("load_config"), precision)
        return name, options


class OpenVinoPlugin(EpPackagePlugin):
    """The adapter's hooks, with OpenVINO's inference precision offered as candidates.

    The device OpenVINO runs on is the first its library lists. On a CPU or GPU the
    plain offer asks for f32 (exact); the device's reduced precision is a second offer
    just below it, at that precision: bf16 on a CPU whose ``isa_flags`` (the CPU
    plugin's probe) have bf16 instructions, f16 on a GPU. An NPU computes in f16 only:
    its one offer says so.
    """

    def offers(
        self, offer: ProviderOffer, metadata: CheckpointMetadata, host: HostCapabilities
    ) -> Iterator[ProviderOffer]:
        """The adapter's offer at each precision the first device computes at."""
        devices: list[dict[str, Any]] = host.fact(self.probe, "devices", [])
        device = str(devices[0].get("type")) if devices else ""
        if device == "NPU":
            reason = f"{offer.reason}; the NPU computes in f16"
            yield attrs.evolve(offer, reason=reason, precision="fp16")
            return
        base = offer.config if isinstance(offer.config, OpenVinoProvider) else OpenVinoProvider()
        exact = attrs.evolve(base, inference_precision="f32")
        yield attrs.evolve(offer, config=exact, reason=f"{offer.reason}; inference precision f32")
        reduced = None
        if device == "GPU":
            reduced = "f16"
        elif device == "CPU" and BF16_ISA.intersection(host.fact("cpu", "isa_flags") or ()):
            reduced = "bf16"
        if reduced is None or metadata.precision != "fp32":
            return
        yield ProviderOffer(
            config=attrs.evolve(base, inference_precision=reduced),
            preference=offer.preference - 1,
            reason=f"{offer.reason}; inference precision {reduced} (faster, less exact: verified)",
            precision=_AS_OFFERED[reduced],
        )


#: The object the ``openvino`` entry point names (its ``detect`` is the manifest's probe).
plugin = OpenVinoPlugin(OpenVinoProvider)
