"""Host fit: which catalog providers this host's hardware calls for, what of them is installed, and
the pip steps that make the environment fit; pure over its inputs."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

import attrs

from ..host.install_command import CORE, core_checkout, core_extras, install_targets
from ..host.requirement import Requirement, normalize_name
from ..host.runtime import RuntimeDistribution, installed_runtimes
from .catalog import CatalogEntry, Install, catalog_fact_reads, load_catalog
from .hardware import Hardware, detect_hardware

__all__ = [
    "Finding",
    "FitPlan",
    "Installed",
    "check_host",
    "installed_state",
    "plan_fit",
    "shell_line",
]


@attrs.frozen
class Installed:
    """What the environment holds: distributions by normalized name, the runtime wheels, what
    each of the core's extras brings, and the checkout ortplug was installed from (its folders
    are then what pip installs), if any."""

    distributions: Mapping[str, str]
    runtimes: tuple[RuntimeDistribution, ...] = ()
    extras: Mapping[str, frozenset[str]] = attrs.field(factory=dict)
    tree: Path | None = None

    def version(self, name: str) -> str | None:
        return self.distributions.get(normalize_name(name))


def installed_state() -> Installed:
    """Read the environment's distributions (metadata only: nothing is imported)."""
    found = {normalize_name(d.metadata["Name"] or ""): d.version for d in distributions()}
    return Installed(found, installed_runtimes(), core_extras(), core_checkout())


@attrs.frozen
class Finding:
    """One line of host fit: what was seen or found, whether that is fine, the command if not."""

    kind: str  # "missing", "useless", "runtime", "driver", "optional" or "fits"
    subject: str  # the catalog kind, or "runtime"
    ok: bool
    detail: str
    command: str = ""

    def line(self) -> str:
        """The finding as one line: ``... seen; install ortplug-cuda with: pip install ...``."""
        if not self.command:
            return self.detail
        return f"{self.detail}{'; fix it' if self.kind == 'runtime' else ''} with: {self.command}"

    def to_dict(self) -> dict[str, object]:
        return attrs.asdict(self)


@attrs.frozen
class FitPlan:
    """What the host calls for, the findings, and the pip steps (arguments after ``pip``),
    from what the environment held (``installed``)."""

    hardware: Hardware
    applies: tuple[str, ...]
    findings: tuple[Finding, ...]
    steps: tuple[tuple[str, ...], ...]
    installed: Installed = attrs.field(eq=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hardware": self.hardware.to_dict(),
            "applies": list(self.applies),
            "findings": [f.to_dict() for f in self.findings],
            "steps": [shell_line(step) for step in self.steps],
        }


def shell_line(step: Sequence[str], pip: Sequence[str] = ("pip",)) -> str:
    """A step as one would type it: ``pip install 'ortplug[cuda]'``."""
    return shlex.join([*pip, *step])


@attrs.frozen
class _Applied:
    """A catalog entry that applies here: what was seen and the install chosen for it."""

    entry: CatalogEntry
    seen: str
    install: Install

    @property
    def declared(self) -> str:
        """``declared by ortplug-acme`` for a kind ortplug's own catalog does not hold, else
        empty: doctor names who asked for what it would install."""
        return f"declared by {self.entry.declared_by}" if self.entry.declared_by else ""

    @property
    def runtime(self) -> Requirement | None:
        return Requirement.parse(self.install.runtime) if self.install.runtime else None

    @property
    def extras(self) -> tuple[str, ...]:
        """The core's extras the install names (``ortplug[cuda]``), else none."""
        requirement = Requirement.parse(self.install.install)
        return requirement.extras if requirement.name == CORE else ()

    def lacking(self, installed: Installed) -> bool:
        """Whether its plugin, or the other requirement its install names, is not installed
        (in a version that meets the requirement)."""
        if installed.version(self.entry.distribution) is None:
            return True
        requirement = Requirement.parse(self.install.install)
        if requirement.name == CORE:
            return False
        version = installed.version(requirement.name)
        return version is None or not requirement.satisfied_by(version)

    def brings_runtime(self, wanted: Requirement | None) -> bool:
        """Whether it may be installed beside ``wanted``: it brings no runtime or that one."""
        runtime = self.runtime
        return runtime is None or wanted is None or runtime.name == wanted.name


def _install_step(
    chosen: Sequence[_Applied], wanted: Requirement | None, installed: Installed
) -> tuple[str, ...]:
    """One ``pip install`` for these entries: the core with the extras that bring the chosen
    runtime, then what no such extra brings (plugins, other requirements), as
    :func:`~ortplug.host.install_command.install_targets` spells them here."""
    requirements = [a.install.install for a in chosen if a.extras and a.brings_runtime(wanted)]
    for item in chosen:
        own = Requirement.parse(item.install.install).name == normalize_name(
            item.entry.distribution
        )
        if item.extras or (not own and installed.version(item.entry.distribution) is None):
            requirements.append(item.entry.distribution)
        if not item.extras:
            requirements.append(item.install.install)
    targets = install_targets(requirements, installed.tree, installed.extras)
    indexes = dict.fromkeys(a.install.index_url for a in chosen if a.install.index_url)
    index_args = [arg for url in indexes if url for arg in ("--extra-index-url", url)]
    return ("install", *index_args, *targets)


def _runtime_steps(
    wanted: Requirement | None, for_plugin: str, installed: Installed
) -> tuple[Finding, list[tuple[str, ...]], bool] | None:
    """The runtime wheels against the one wanted: a finding, the steps that remove strays (and
    repair the wheel that stays), and whether the wanted wheel is installed in a fitting version."""
    if wanted is None:
        return None
    kept = next((r for r in installed.runtimes if normalize_name(r.name) == wanted.name), None)
    strays = [r.name for r in installed.runtimes if r is not kept]
    fits = kept is not None and wanted.satisfied_by(kept.version)
    listed = " and ".join(f"{r.name} {r.version}" for r in installed.runtimes) or "no runtime"
    shared = "; they share the onnxruntime module" if len(installed.runtimes) > 1 else ""
    need = f"this host needs {wanted.text} (for {for_plugin})"
    detail = f"{listed} installed{shared}; {need}"
    if not strays and fits:
        return Finding("fits", "runtime", True, f"{listed}: the runtime this host needs"), [], True
    steps: list[tuple[str, ...]] = []
    if strays:
        steps.append(("uninstall", "-y", *strays))
        if kept is not None and fits:  # the strays' uninstall took the shared files with it
            pinned = f"{kept.name}=={kept.version}"
            steps.append(("install", "--force-reinstall", "--no-deps", pinned))
    return Finding("runtime", "runtime", False, detail), steps, fits


def _driver_too_old(entry: CatalogEntry, seen: str, hardware: Hardware) -> Finding:
    need = entry.needed()
    label = hardware.label(need.fact) if need is not None else "the driver"
    oldest = f" {need.min} or newer" if need is not None else ""
    return Finding(
        "driver",
        entry.name,
        entry.optional,
        f"{seen} seen; {entry.distribution} needs {label}{oldest}: update the {label}",
    )


def _applied(hardware: Hardware, catalog: Sequence[CatalogEntry]) -> tuple[
    dict[str, str], list[_Applied], list[Finding]
]:  # fmt: skip
    """What each entry saw, the entries that apply with their install option, driver findings."""
    seen = {e.name: s for e in catalog if (s := e.seen(hardware)) is not None}
    applied, findings = [], []
    for entry in catalog:
        if entry.name not in seen or set(entry.unless) & set(seen):
            continue
        install = entry.install_for(hardware)
        if install is None:
            findings.append(_driver_too_old(entry, seen[entry.name], hardware))
        else:
            applied.append(_Applied(entry, seen[entry.name], install))
    return seen, applied, findings


def _lacking(
    applied: Sequence[_Applied],
    wanted: Requirement | None,
    plan: Sequence[str],
    hardware: Hardware,
    installed: Installed,
) -> list[Finding]:
    """A finding per applying entry whose plugin (or other requirement) is not installed: the
    plan's commands for a required one, its own install line for an optional one."""
    findings = []
    for item in applied:
        if not item.lacking(installed):
            continue
        need = item.install.needs
        unseen = need is not None and hardware.fact(need.fact) is None
        note = (
            f" (no {hardware.label(need.fact)} seen: install it first)" if need and unseen else ""
        )
        what = f"{item.seen} seen; "
        if item.entry.optional:
            command = shell_line(_install_step([item], wanted, installed))
            by = f", {item.declared}" if item.declared else ""
            detail = f"{what}optional: {item.entry.distribution}{note} ({item.entry.hardware}{by})"
            findings.append(Finding("optional", item.entry.name, True, detail, command))
        else:
            plugin = item.entry.distribution
            needed = plugin if installed.version(plugin) is None else item.install.install
            by = f" ({item.declared})" if item.declared else ""
            detail = f"{what}install {needed}{note}{by}"
            findings.append(Finding("missing", item.entry.name, False, detail, " && ".join(plan)))
    return findings


def _useless(
    catalog: Sequence[CatalogEntry], seen: Mapping[str, str], installed: Installed
) -> list[Finding]:
    """A finding per installed plugin whose hardware this host does not have."""
    findings = []
    for entry in catalog:
        version = installed.version(entry.distribution)
        if version is not None and entry.name not in seen:
            detail = (
                f"{entry.distribution} {version} is installed but useless here: no "
                f"{entry.hardware} seen; remove it"
            )
            command = shell_line(("uninstall", "-y", entry.distribution))
            findings.append(Finding("useless", entry.name, False, detail, command))
    return findings


def plan_fit(hardware: Hardware, catalog: Sequence[CatalogEntry], installed: Installed) -> FitPlan:
    """Compare what ``hardware`` calls for in ``catalog`` with what is ``installed``: the first
    required entry that names a runtime decides the runtime wheel; one install step brings
    every required entry that is lacking (and that runtime, when it is missing or wrong)."""
    seen, applied, driver_findings = _applied(hardware, catalog)
    required = [a for a in applied if not a.entry.optional]
    deciding = next((a for a in required if a.runtime), None)
    wanted = deciding.runtime if deciding else None
    by = f", {deciding.declared}" if deciding and deciding.declared else ""
    for_plugin = f"{deciding.entry.distribution}{by}" if deciding else ""
    runtime = _runtime_steps(wanted, for_plugin, installed)
    steps = runtime[1] if runtime else []
    to_install = [a for a in required if a.lacking(installed)]
    if deciding is not None and runtime and not runtime[2] and deciding not in to_install:
        to_install.insert(0, deciding)  # the runtime is missing or the wrong build
    if to_install:
        steps.append(_install_step(to_install, wanted, installed))
    plan = [shell_line(step) for step in steps]
    findings = [attrs.evolve(runtime[0], command=" && ".join(plan)) if runtime and not runtime[0].ok
                else runtime[0]] if runtime else []  # fmt: skip
    findings += driver_findings + _lacking(applied, wanted, plan, hardware, installed)
    findings += _useless(catalog, seen, installed)
    applies = tuple(a.entry.name for a in applied)
    return FitPlan(hardware, applies, tuple(findings), tuple(steps), installed)


def check_host(environ: Mapping[str, str] | None = None) -> FitPlan:
    """This host's hardware, the catalog and this environment, compared (file and metadata
    reads only). A bad ``$ORTPLUG_CATALOG`` raises :class:`~ortplug.errors.OptionError`."""
    catalog = load_catalog(environ)
    hardware = detect_hardware(environ=environ, reads=catalog_fact_reads(environ))
    return plan_fit(hardware, catalog, installed_state())
