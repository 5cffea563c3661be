"""Turn an installed ``onnxruntime-ep-*`` package into an ortplug provider in a few lines
(the guide's "Providers in a plugin-EP library" shows one)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import attrs

from ..checkpoint import CheckpointMetadata
from ..errors import OptionError
from ..host.capabilities import HostCapabilities, HostProbe
from ..host.ep_libraries import EpLibrary, describe_device, ensure_library
from ..providers.options import encode_option, ort_options
from .declaration import Identity
from .hookspecs import hookimpl
from .provider_type import ProviderType
from .types import ProviderDecline, ProviderOffer

__all__ = ["EpPackageHookPlugin", "EpPackagePlugin", "LibraryProvider"]

_PROBE_FACTS = ("library", "error", "devices")


def _string_options(value: Mapping[str, object]) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        raise OptionError(f"options: expected a mapping of option names to values, got {value!r}")
    encoded = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise OptionError(f"options: expected string option names, got {key!r}")
        encoded[key] = encode_option(item)
    return MappingProxyType(encoded)


@attrs.frozen(kw_only=True)
class LibraryProvider:
    """Base of configs for providers in a plugin-EP library: typed attrs fields (``None``: the
    library's default) and free-form string ``options`` reach ``to_ort()`` by name; a key given
    both ways, or outside ``known_options`` where a subclass sets them, is refused."""

    kind: ClassVar[str]
    ort_name: ClassVar[str]
    known_options: ClassVar[frozenset[str] | None] = None

    options: Mapping[str, str] = attrs.field(
        factory=dict, converter=_string_options, eq=False, hash=False
    )

    def __attrs_post_init__(self) -> None:
        typed = set(self._typed_fields())
        both = sorted(typed & set(self.options))
        if both:
            raise OptionError(
                f"provider {self.kind!r}: {both} given both as typed field(s) and in options; "
                "set each once, as the typed field"
            )
        if self.known_options is not None:
            allowed = typed | set(self.known_options)
            unknown = sorted(set(self.options) - allowed)
            if unknown:
                raise OptionError(
                    f"provider {self.kind!r}: unknown option(s) {unknown}; "
                    f"allowed: {', '.join(sorted(allowed))}"
                )

    @classmethod
    def _typed_fields(cls) -> list[str]:
        return [f.name for f in attrs.fields(cls) if f.name != "options"]

    def to_ort(self) -> tuple[str, dict[str, str]]:
        """ONNX Runtime's provider name; the typed fields that are set, then the free-form options."""
        typed = ort_options((name, getattr(self, name)) for name in self._typed_fields())
        return self.ort_name, {**typed, **self.options}


class EpPackagePlugin:
    """The offers and the probe (``detect``, named after the kind without underscores) of one
    ``onnxruntime-ep-*`` package's provider, for a plugin whose manifest declares both;
    ``package`` defaults to the manifest kind's ``library.package``."""

    def __init__(
        self,
        config_cls: type[LibraryProvider],
        *,
        package: str | None = None,
        preference: int = 0,
        description: str = "",
    ) -> None:
        if package is None:
            from .declared import kind_of  # deferred: only the manifest form reads it

            library = kind_of(config_cls).library
            package = library.package if library is not None else None
            if package is None:
                raise OptionError(
                    f"EpPackagePlugin({config_cls.__qualname__}): expected its manifest kind to "
                    "name the library's package (library.package), or package=, got neither"
                )
        self.package = package
        self.config_cls = config_cls
        self.preference = preference
        self.kind = config_cls.kind
        self.probe = self.kind.replace("_", "")  # probe names are letters and digits
        self.library = EpLibrary(
            name=f"ortplug.{self.kind}", ep_names=(config_cls.ort_name,), package=package
        )
        self.description = (
            description or f"{config_cls.ort_name} from the {package} plugin-EP library"
        )

    def detect(self) -> Mapping[str, object]:
        """The probe: registers the library (once per process) and lists its devices."""
        return ensure_library(self.library).facts()

    @hookimpl
    def ortplug_offer_providers(
        self, metadata: CheckpointMetadata, host: HostCapabilities
    ) -> Iterable[ProviderOffer | ProviderDecline]:
        """Offers (:meth:`offers`) where the library has a device; else a decline saying why."""
        devices: list[dict[str, Any]] = host.fact(self.probe, "devices", [])
        if not devices:
            error = host.fact(self.probe, "error")
            yield ProviderDecline(
                self.kind, error or f"{self.package} offers no device on this host"
            )
            return
        listed = ", ".join(describe_device(d) for d in devices)
        offer = ProviderOffer(
            config=self.config_cls(),
            preference=self.preference,
            reason=f"{self.config_cls.ort_name} from {self.package} offers {listed}",
        )
        yield from self.offers(offer, metadata, host)

    def offers(
        self, offer: ProviderOffer, metadata: CheckpointMetadata, host: HostCapabilities
    ) -> Iterable[ProviderOffer]:
        """What is offered where the library has a device: ``offer`` as is; a subclass adds a
        reduced-precision switch here (``precision=``, as ortplug-openvino does)."""
        yield offer


class EpPackageHookPlugin(EpPackagePlugin):
    """:class:`EpPackagePlugin` for a plugin without a manifest (the hook form): the provider
    type, with its library, and the probe come from hooks too."""

    def __init__(
        self,
        package: str,
        config_cls: type[LibraryProvider],
        *,
        preference: int = 0,
        description: str = "",
    ) -> None:
        super().__init__(
            config_cls, package=package, preference=preference, description=description
        )

    @hookimpl
    def ortplug_provider_types(self) -> Iterable[ProviderType]:
        """The provider kind, carrying its library so sessions append it by device."""
        yield ProviderType(
            self.kind,
            self.config_cls.ort_name,
            self.config_cls,
            description=self.description,
            library=self.library,
        )

    @hookimpl
    def ortplug_host_probes(self) -> Iterable[HostProbe]:
        """Registers the library (once per process) and lists its devices."""
        yield HostProbe(
            name=self.probe,
            facts=_PROBE_FACTS,
            detect=self.detect,
            description=f"the {self.package} library and the devices it offers",
            # what the facts depend on: the package's installation and the system's libraries
            identity=Identity(packages=(self.package,), system=True),
        )
