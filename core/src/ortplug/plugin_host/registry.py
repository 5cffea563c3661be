"""The provider registry: every kind the plugins contribute, looked up by name, and parsing
user input into configs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..errors import OptionError, PluginConflictError
from ..host.ep_libraries import EpLibrary
from ..plugins.provider_type import ProviderSpec
from ..providers.configs import ProviderConfig, is_provider_config
from .first_party import first_party_kind

__all__ = ["ProviderRegistry", "check_distinct", "close_matches"]


class ProviderRegistry:
    """Every provider kind the plugins contribute, looked up by kind, alias or ORT name.

    ``declared``: names (lower-case) of kinds that plugins declare but have not been
    imported for yet, each with its kind and plugin; ``load(plugin)`` imports one
    (``None``: all of them) and gives the registry after it, so looking a declared
    name up imports only its plugin. ``why(name)`` says why a name no plugin holds
    is missing (blocked, clashed, failed), when the plugin host knows. ``order``: the kinds
    in the default order (:mod:`._order`).
    """

    def __init__(
        self,
        specs: Iterable[ProviderSpec],
        *,
        declared: Mapping[str, tuple[str, str]] | None = None,
        load: Callable[[str | None], ProviderRegistry] | None = None,
        why: Callable[[str], str | None] | None = None,
        order: Sequence[str] = (),
    ) -> None:
        self._by_kind: dict[str, ProviderSpec] = {}
        self._by_name: dict[str, ProviderSpec] = {}
        for spec in specs:
            self._add(spec)
        self._declared = {
            name: entry for name, entry in (declared or {}).items() if name not in self._by_name
        }
        self._load = load
        self._why = why
        self._order = {kind: i for i, kind in enumerate(order)}

    def _loaded(self, name: str) -> ProviderRegistry | None:
        """The registry once the plugin declaring ``name`` is imported (``None``: none does)."""
        entry = self._declared.get(name.lower()) if isinstance(name, str) else None
        if entry is None or self._load is None:
            return None
        return self._load(entry[1])

    def _add(self, spec: ProviderSpec) -> None:
        ptype = spec.type
        if ptype.kind in self._by_kind:
            self._conflict("kind", ptype.kind, self._by_kind[ptype.kind], spec)
        for name in (ptype.kind, *ptype.aliases, ptype.ort_name):
            other = self._by_name.get(name.lower())
            if other is not None and other.type.kind != ptype.kind:
                self._conflict("name", name, other, spec)
        self._by_kind[ptype.kind] = spec
        for name in (ptype.kind, *ptype.aliases, ptype.ort_name):
            self._by_name[name.lower()] = spec

    @staticmethod
    def _conflict(what: str, name: str, first: ProviderSpec, second: ProviderSpec) -> None:
        raise PluginConflictError(
            f"provider {what} {name!r} is claimed by plugin {first.plugin!r} (kind "
            f"{first.type.kind!r}) and by plugin {second.plugin!r} (kind {second.type.kind!r}); "
            f"uninstall one, or disable one with ORTPLUG_DISABLE_PLUGINS={first.plugin} "
            f"or ORTPLUG_DISABLE_PLUGINS={second.plugin}"
        )

    def _declared_kinds(self) -> set[str]:
        return {kind for kind, _ in self._declared.values()}

    def owners(self) -> frozenset[str]:
        """The plugins that own a kind here, registered or declared (nothing is imported)."""
        declared = {plugin for _, plugin in self._declared.values()}
        return frozenset({spec.plugin for spec in self._by_kind.values()} | declared)

    def has_kind(self, kind: str) -> bool:
        """Whether a plugin registered or declares this kind (nothing is imported)."""
        return kind in self._by_kind or kind in self._declared_kinds()

    def order(self) -> list[str]:
        """Every kind in the default order the manifests declare (``before``/``after``), CPU last."""
        return sorted(self._order, key=self._order.__getitem__)

    def place(self, kind: str) -> int:
        """``kind``'s place in :meth:`order` (0 first; a kind not in it after all of them)."""
        return self._order.get(kind, len(self._order))

    def kinds(self) -> list[str]:
        """Registered and declared kinds, sorted (nothing is imported)."""
        return sorted({*self._by_kind, *self._declared_kinds()})

    def specs(self) -> list[ProviderSpec]:
        """Registered provider types with their plugins (every declaring plugin is imported)."""
        if self._declared and self._load is not None:
            return self._load(None).specs()
        return list(self._by_kind.values())

    def library_of(self, kind: str) -> EpLibrary | None:
        """The plugin-EP library of a registered kind (``None`` for built-ins and unknown kinds)."""
        spec = self._by_kind.get(kind)
        if spec is None:
            loaded = self._loaded(kind)
            return loaded.library_of(kind) if loaded is not None else None
        return spec.type.library

    def knows(self, name: str) -> bool:
        """Whether ``name`` names a provider here, or one of ortplug's not installed here."""
        text = name.strip().lower()
        if text in self._by_name:
            return True
        return first_party_kind(text) is not None

    def lookup(self, name: str) -> ProviderSpec:
        """Find a provider by kind, alias or ONNX Runtime name (case-insensitive).

        A name a plugin declares imports that plugin (only that one).
        """
        spec = self._by_name.get(name.lower()) if isinstance(name, str) else None
        if spec is None:
            loaded = self._loaded(name)
            if loaded is not None:
                return loaded.lookup(name)
            raise OptionError(self._unknown(name))
        return spec

    def _unknown(self, name: object) -> str:
        """Why ``name`` is not a provider here, and what to do about it."""
        known = ", ".join(self.kinds()) or "none: no provider plugin is installed"
        text = name.strip().lower() if isinstance(name, str) else ""
        if not text:
            return f"provider: expected a provider kind such as 'cpu', got {name!r}"
        reason = self._why(text) if self._why is not None else None
        if reason is not None:
            return f"provider {name!r} is not available: {reason} (installed kinds: {known})"
        shipped = first_party_kind(text)
        if shipped is not None:
            from ..host.install_command import pip_install  # deferred: errors only (shlex)

            distribution, kind = shipped
            return (
                f"provider {name!r} ({kind.kind}) is not installed: it comes with {distribution}; "
                f"install it with {pip_install(kind.install or distribution)} "
                f"(installed kinds: {known})"
            )
        short_names = [n for n, spec in self._by_name.items() if n != spec.type.ort_name.lower()]
        hint = close_matches(text, short_names)
        did_you_mean = f" (did you mean {hint[0]!r}?)" if hint else ""
        return f"unknown provider {name!r}{did_you_mean}; known kinds: {known}"

    def parse(self, value: object) -> ProviderConfig:
        """Turn a config object, a dict with ``kind``, a short name or an ORT name into a config."""
        if isinstance(value, str):
            return self._build(self.lookup(value), {})
        if isinstance(value, Mapping):
            fields = dict(value)
            kind = fields.pop("kind", None)
            if not isinstance(kind, str):
                raise OptionError(
                    f"provider dict: expected a 'kind' string (one of {', '.join(self.kinds())}), "
                    f"got {kind!r}"
                )
            return self._build(self.lookup(kind), fields)
        if is_provider_config(value):
            return value  # type: ignore[return-value]
        raise OptionError(
            "provider: expected a provider config, a dict with 'kind', or a name such as "
            f"'cpu', got {type(value).__name__} {value!r}"
        )

    @staticmethod
    def _build(spec: ProviderSpec, fields: dict[str, Any]) -> ProviderConfig:
        cls = spec.type.config_cls
        allowed = [f.name for f in attrs.fields(cls)] if attrs.has(cls) else []
        unknown = sorted(set(fields) - set(allowed))
        if unknown:
            raise OptionError(
                f"provider {spec.type.kind!r}: unknown option(s) {unknown}; "
                f"allowed: {', '.join(allowed) or 'none'}"
            )
        try:
            config: ProviderConfig = cls(**fields)
        except (TypeError, ValueError) as exc:
            raise OptionError(f"provider {spec.type.kind!r}: {exc}") from exc
        return config


def check_distinct(chain: Sequence[tuple[str, ProviderConfig]]) -> None:
    """Refuse a chain that lists a provider twice (``cpu,cpu``; ``cpu`` and its ONNX Runtime
    name): ONNX Runtime would get it twice. ``chain`` pairs each config with its name as given."""
    first: dict[str, str] = {}
    for given, config in chain:
        if config.kind in first:
            raise OptionError(
                f"{config.kind!r} is listed twice (as {first[config.kind]!r} and {given!r}); "
                "a chain names each provider once"
            )
        first[config.kind] = given


def close_matches(word: str, candidates: list[str]) -> list[str]:
    """The closest candidate to ``word``, for "did you mean" hints (only on errors)."""
    import difflib  # deferred: errors only (~0.5 ms of every start)

    return difflib.get_close_matches(word, candidates, n=1)
