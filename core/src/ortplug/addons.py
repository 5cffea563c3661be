"""Add-on distributions: where their modes and commands are found (entry points read without
importing them), and what to install for them."""

from __future__ import annotations

import functools
import importlib
import warnings
from typing import Any

import attrs

from .errors import AddonNotInstalledError
from .plugin_host.entry_points_txt import COMMANDS_GROUP, HINTS_GROUP, QUICK_GROUP

__all__ = [
    "ADDONS",
    "COMMANDS_GROUP",
    "HINTS_GROUP",
    "QUICK_GROUP",
    "RAY_NAMES",
    "VARIANTS_NAMES",
    "Addon",
    "addon_name",
    "entry_point_names",
    "entry_point_target",
    "forget_entry_points",
    "old_spelling",
    "provider_of",
]


@attrs.frozen
class Addon:
    """One add-on distribution: its names in the core's spelling and what it brings."""

    distribution: str
    package: str
    extra: str
    what: str

    def install_line(self) -> str:
        """The command that installs it (the core's extra, so the pins stay the core's)."""
        from .host.install_command import pip_install

        return pip_install(f"ortplug[{self.extra}]")

    def missing(self, needed_for: str) -> AddonNotInstalledError:
        """The one-line error for ``needed_for`` without this add-on."""
        return AddonNotInstalledError(
            f"{needed_for} needs {self.what} ({self.distribution}), which is not installed; "
            f"install it with: {self.install_line()}"
        )


SERVE = Addon("ortplug-serve", "ortplug_serve", "serve", "the serving add-on")
RAY = Addon("ortplug-ray", "ortplug_ray", "ray", "the Ray add-on")
DROPIN = Addon("ortplug-dropin", "ortplug_dropin", "dropin", "the drop-in add-on")
VARIANTS = Addon("ortplug-variants", "ortplug_variants", "variants", "the variants add-on")
ADDONS = (SERVE, RAY, DROPIN, VARIANTS)

#: The Ray add-on's names (``ortplug_ray.__all__``), spelled ``ortplug.integrations.ray.NAME``
#: before the add-on, for one more release.
RAY_NAMES = (
    "BackendConfig",
    "BatchError",
    "CheckpointLike",
    "OnnxPredictor",
    "PortableCheckpoint",
    "RayNotInstalledError",
    "actor_resources",
    "default_batch_size",
    "predict",
    "require_ray",
    "worker_error",
)

#: The variants add-on's names (``ortplug_variants.__all__``), spelled
#: ``ortplug.verification.precision_variants.NAME`` before the add-on, for one more release.
VARIANTS_NAMES = (
    "BUILDERS",
    "CALIBRATION_BATCHES",
    "calibration_feeds",
    "make_fp16",
    "make_int8",
    "write_buildable_variants",
    "write_variants",
)

#: The core's public spellings of add-on names: ``(module, name)`` -> the add-on that has it.
_NAMES = {
    ("ortplug", "InferenceSession"): DROPIN,
    ("ortplug", "Patch"): DROPIN,
    ("ortplug", "patch"): DROPIN,
    ("ortplug", "unpatch"): DROPIN,
    ("ortplug", "ServingConfig"): SERVE,
    ("ortplug.backend", "ServingConfig"): SERVE,
    ("ortplug.backend", "ServingReport"): SERVE,
    ("ortplug.backend", "DeviceServing"): SERVE,
    ("ortplug.backend", "Layout"): SERVE,
    ("ortplug.backend", "Trial"): SERVE,
    ("ortplug.backend", "recorded_serving"): SERVE,
    **{("ortplug.integrations.ray", name): RAY for name in RAY_NAMES},
    **{("ortplug.verification.precision_variants", name): VARIANTS for name in VARIANTS_NAMES},
}
#: Hints and commands the shipped add-ons provide (named in the error when none registers them).
_PROVIDES = {
    HINTS_GROUP: {"throughput": SERVE, "cumulative_throughput": SERVE},
    COMMANDS_GROUP: {"batch": RAY, "exec": DROPIN, "bench-callers": SERVE, "variants": VARIANTS},
}


def addon_name(module: str, name: str) -> Any:
    """``module.name`` as the core spells it, from the add-on that has it now."""
    addon = _NAMES[(module, name)]
    try:
        package = importlib.import_module(addon.package)
    except ModuleNotFoundError as exc:
        if exc.name != addon.package:  # the add-on is there but something it needs is not
            raise
        raise addon.missing(f"{module}.{name}") from None
    return getattr(package, name)


def old_spelling(module: str, name: str, names: tuple[str, ...]) -> Any:
    """``module.name``, an add-on's name in its spelling before the add-on (a one-release shim's
    ``__getattr__``): the add-on's, with a ``DeprecationWarning`` naming the new spelling."""
    if name not in names:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    value = addon_name(module, name)
    addon = _NAMES[(module, name)]
    warnings.warn(
        f"{module}.{name} moved to {addon.what}: write `from {addon.package} import {name}` "
        f"(the old spelling goes in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )
    return value


@functools.cache
def _entry_points(group: str) -> dict[str, Any]:
    """The group's entry points, read as the plugin host reads its own: remembered between
    processes, keyed by what installing a distribution changes (one scan per install)."""
    from .plugin_host.entry_points import discover

    return {point.name: point for point in discover(group)}


def entry_point_names(group: str) -> tuple[str, ...]:
    """The names registered in ``group`` by the installed distributions, sorted."""
    return tuple(sorted(_entry_points(group)))


def provider_of(group: str, name: str) -> Addon | None:
    """The shipped add-on that registers ``name`` in ``group`` (``None``: none of them)."""
    return _PROVIDES.get(group, {}).get(name)


def entry_point_target(group: str, name: str, *, needed_for: str) -> Any:
    """The object entry point ``name`` of ``group`` names, imported now; the install line of the
    add-on that provides it when none is registered."""
    point = _entry_points(group).get(name)
    if point is None:
        addon = provider_of(group, name)
        if addon is not None:
            raise addon.missing(needed_for)
        known = ", ".join(entry_point_names(group)) or "none"
        raise AddonNotInstalledError(
            f"{needed_for}: no installed add-on registers {name!r} in the entry-point group "
            f"{group!r} (registered: {known})"
        )
    return point.load()


def forget_entry_points() -> None:
    """Read the entry points again on next use (after installing an add-on in this process)."""
    _entry_points.cache_clear()
