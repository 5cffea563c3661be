"""``ortplug doctor``: the core's checks plus every plugin's, each failure with the line that fixes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..cache.index import MAX_MB_ENV, max_mb
from ..cache.root import CACHE_ENV, cache_problem, cache_root
from ..errors import OptionError
from ..host.ep_libraries import ensure_library
from ..host.runtime import duplicate_runtimes, install_hint, installed_runtimes
from ..plugin_host.first_party import runtime_install
from ..plugins.types import DoctorCheck, ProviderOffer
from ..selection.autotune import RECORD_FOLDER, stale_records
from ..settings import VARIABLES, settings

if TYPE_CHECKING:
    from ..host.capabilities import HostCapabilities
    from ..plugin_host.manager import PluginHost

__all__ = ["run_checks"]


def _runtime_checks() -> list[DoctorCheck]:
    runtimes = installed_runtimes()
    if not runtimes:
        return [
            DoctorCheck("onnxruntime", False, "no ONNX Runtime wheel is installed", install_hint())
        ]
    duplicates = duplicate_runtimes(runtimes, runtime_install)
    if duplicates:
        return [DoctorCheck("onnxruntime", False, *duplicates)]
    (runtime,) = runtimes
    return [
        DoctorCheck("onnxruntime", True, f"{runtime.name} {runtime.version}, one runtime wheel")
    ]


def _plugin_checks(plugins: PluginHost) -> list[DoctorCheck]:
    """One FAIL per plugin failure; a plugin whose declaration (ortplug.json) does not check
    is one FAIL for it, its later failures folded in: they follow from the kinds and probes
    the declaration would have given (a hook then meets a kind "not registered by any
    plugin"), and their own fixes would be wrong."""
    failures = plugins.failures
    undeclared = {f.plugin for f in failures if f.phase == "declaration"}
    checks = []
    for failure in failures:
        distribution = failure.distribution or "its distribution"
        disable = f"disable it with ORTPLUG_DISABLE_PLUGINS={failure.plugin}"
        detail = f"failed in {failure.phase}: {failure.error}"
        if failure.plugin not in undeclared:
            checks.append(DoctorCheck(f"plugin {failure.plugin}", False, detail,
                                      f"reinstall {distribution}, or {disable}"))  # fmt: skip
            continue
        if failure.phase != "declaration":
            continue  # said with the declaration's failure, below
        then = [f.phase for f in failures if f.plugin == failure.plugin and f is not failure]
        if then:
            detail += f"; so it also failed in {', '.join(then)}"
        fix = (
            f"its ortplug.json does not check: reinstall {distribution} if it was changed here, "
            f"else report it to its maker; or {disable}"
        )
        checks.append(DoctorCheck(f"plugin {failure.plugin}", False, detail, fix))
    if not failures:
        active = [name for name in plugins.plugin_names() if not name.startswith("ortplug.")]
        checks.append(DoctorCheck("plugins", True, f"{len(active)} loaded: {', '.join(active)}"))
    return checks


def _library_checks(plugins: PluginHost) -> list[DoctorCheck]:
    checks = []
    for spec in plugins.provider_registry().specs():
        library = spec.type.library
        if library is None:
            continue
        status = ensure_library(library)
        problem = status.problem()
        name = f"library {spec.type.ort_name}"
        if problem is None:
            devices = ", ".join(d.describe() for d in status.devices)
            checks.append(DoctorCheck(name, True, f"{status.path}: {devices}"))
        else:
            fix = (
                f"install the {library.package or 'library'} build made for this ONNX Runtime"
                if status.error
                else f"this host has no device for it: uninstall the plugin or set "
                f"ORTPLUG_DISABLE_PLUGINS={spec.plugin}"
            )
            checks.append(DoctorCheck(name, False, problem, fix))
    return checks


def _cache_checks(ort_version: str | None) -> list[DoctorCheck]:
    """The autotune folder must be (or be creatable as) a writable directory, its records
    current, and the size cap, if set, a size."""
    problem = cache_problem(RECORD_FOLDER)
    if problem is not None:
        return [DoctorCheck("cache", False, problem, f"set {CACHE_ENV} to a writable directory")]
    checks = []
    try:
        max_mb()
    except OptionError as exc:
        fix = f"set {MAX_MB_ENV} to a number of MB, or unset it for no cap"
        checks.append(DoctorCheck("cache", False, f"{exc}; the cache is not capped", fix))
    stale = stale_records(ort_version)
    if stale:
        listed = " ".join(str(p) for p in stale)
        checks.append(
            DoctorCheck(
                "cache",
                False,
                f"{len(stale)} autotune record(s) from another ONNX Runtime version or unreadable",
                f"rm {listed}  (then `ortplug bench MODEL --save` again)",
            )
        )
    return checks or [DoctorCheck("cache", True, f"{cache_root()}")]


def _settings_checks() -> list[DoctorCheck]:
    """Every core ``ORTPLUG_*`` variable's value: a bad one is said where it is used, and some
    are used only when a build has a candidate to check (never on a CPU-only host), so doctor
    names each one here (the cache cap has its own check, beside the cache it caps)."""
    current = settings()
    checks = [
        DoctorCheck(
            f"setting {variable.name}",
            False,
            f"{problem}; the default ({variable.default}) is used",
            f"set {variable.name} to {variable.expected}, or unset it for the default",
        )
        for variable in VARIABLES
        if variable.name != MAX_MB_ENV and (problem := current.problem(variable.name)) is not None
    ]
    return checks or [DoctorCheck("settings", True, "every ORTPLUG_* variable set is valid")]


def _fit_checks() -> list[DoctorCheck]:
    """Host fit: what the hardware calls for that is missing, what is installed for nothing."""
    from ..fit.catalog import CATALOG_ENV
    from ..fit.planner import check_host  # deferred: the catalog is read by info and doctor only

    try:
        plan = check_host()
    except OptionError as exc:
        return [DoctorCheck("host fit", False, str(exc), f"fix that file, or unset {CATALOG_ENV}")]
    return [
        DoctorCheck(f"host fit {f.subject}", f.ok, f.line() if f.ok else f.detail, f.command)
        for f in plan.findings
    ]


def _ask_the_policy_hooks(plugins: PluginHost, host: HostCapabilities) -> None:
    """Ask every plugin's offers and session options for the shipped model, as a build would, so
    a failing hook is a finding (only hooks that change nothing on the host)."""
    from ..checkpoint import LocalCheckpoint  # deferred: only doctor asks the hooks this way
    from ..providers.session_options import SessionOptionsConfig
    from ..testing import demo_model

    checkpoint = LocalCheckpoint(demo_model()).resolve()
    answers = plugins.offer_providers(checkpoint.metadata, host, checkpoint)
    chain = [answer.config for answer in answers if isinstance(answer, ProviderOffer)]
    plugins.adjust_session_options(SessionOptionsConfig(), chain, checkpoint.metadata, host)


def run_checks(plugins: PluginHost) -> list[DoctorCheck]:
    """Every check, core first, then each plugin's (a failing plugin is itself a finding)."""
    host = plugins.host_capabilities()
    checks = _runtime_checks()
    plugin_checks = plugins.doctor_checks(host)
    _ask_the_policy_hooks(plugins, host)
    checks += _plugin_checks(plugins)
    checks += _library_checks(plugins)
    checks += _cache_checks(host.ort_version)
    checks += _settings_checks()
    checks += _fit_checks()
    return checks + plugin_checks
