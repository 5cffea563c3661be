"""The one place that imports ONNX Runtime, lazily, with an install hint when it is missing."""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType

import attrs

from .. import log as _log
from ..errors import RuntimeNotInstalledError

__all__ = [
    "RuntimeDistribution",
    "builtin_providers",
    "duplicate_runtime_problem",
    "duplicate_runtimes",
    "install_hint",
    "installed_runtimes",
    "onnxruntime_or_none",
    "preload_runtime_libraries",
    "require_onnxruntime",
]

_preloaded: set[str | None] = set()
_preload_lock = threading.Lock()
_builtin: tuple[str, ...] | None = None


def _pip_install(requirement: str) -> str:
    from .install_command import pip_install  # deferred: it reads metadata, only for a hint

    return pip_install(requirement)


def install_hint() -> str:
    """What to install when no ONNX Runtime is, spelled as it works here (a checkout's folders)."""
    return (
        f"install exactly one ONNX Runtime for this host, e.g. {_pip_install('ortplug[cpu]')} "
        "(CPU hosts); see the README's install matrix for GPU and Apple hosts"
    )


def require_onnxruntime() -> ModuleType:
    """Return the ``onnxruntime`` module or raise an error that says how to install it."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"ONNX Runtime is not installed: {install_hint()}") from exc
    module: ModuleType = onnxruntime
    return module


def onnxruntime_or_none() -> ModuleType | None:
    """Return the ``onnxruntime`` module when it imports, else ``None`` (for reports)."""
    try:
        return require_onnxruntime()
    except RuntimeNotInstalledError:
        return None


def builtin_providers(ort: ModuleType) -> tuple[str, ...]:
    """The providers built into the installed wheel, as ``get_available_providers()`` lists them
    before any plugin-EP library is registered: a registration adds its providers to that list for
    the rest of the process, so the host's facts (and the records keyed by them) would depend on
    whether a probe registered one first. :mod:`.ep_libraries` asks before it registers."""
    global _builtin
    if _builtin is None:
        _builtin = tuple(ort.get_available_providers())
    return _builtin


@attrs.frozen
class RuntimeDistribution:
    """An installed distribution that ships the ``onnxruntime`` module (CPU, GPU, DirectML...)."""

    name: str
    version: str


def installed_runtimes(path: Iterable[str] | None = None) -> tuple[RuntimeDistribution, ...]:
    """Every installed distribution whose files include ``onnxruntime/__init__.py``.

    More than one means they overwrite each other's files (the classic
    ``onnxruntime`` + ``onnxruntime-gpu`` breakage). ``path`` defaults to ``sys.path``.
    """
    from importlib.metadata import distributions

    found: dict[str, RuntimeDistribution] = {}
    for dist in distributions() if path is None else distributions(path=list(path)):
        name = dist.metadata["Name"] or ""
        if not name.lower().startswith("onnxruntime") or name.lower() in found:
            continue
        files = dist.files or ()
        if any(str(f).replace("\\", "/") == "onnxruntime/__init__.py" for f in files):
            found[name.lower()] = RuntimeDistribution(name, dist.version)
    return tuple(sorted(found.values(), key=lambda d: d.name.lower()))


def duplicate_runtimes(
    runtimes: Iterable[RuntimeDistribution], install: Callable[[Sequence[str]], str]
) -> tuple[str, str] | None:
    """``(problem, fix)`` when several runtime wheels share the ``onnxruntime`` module, or ``None``.

    ``install(names)`` is what to install instead of the wheels ``names`` (the plugins'
    manifests say which install brings which runtime:
    :func:`ortplug.plugin_host.first_party.runtime_install`).
    """
    dists = list(runtimes)
    if len(dists) < 2:
        return None
    names = [d.name for d in dists]
    listed = " and ".join(f"{d.name} {d.version}" for d in dists)
    return (
        f"{listed} are installed side by side; they share the onnxruntime module and overwrite "
        "each other's files, which breaks GPU providers.",
        f"pip uninstall -y {' '.join(names)} && {_pip_install(install(names))}",
    )


def duplicate_runtime_problem(
    runtimes: Iterable[RuntimeDistribution], install: Callable[[Sequence[str]], str]
) -> str | None:
    """One line naming the clashing runtime wheels and the command that fixes it, or ``None``."""
    found = duplicate_runtimes(runtimes, install)
    return f"{found[0]} Fix: {found[1]}" if found else None


def preload_runtime_libraries(directory: str | None = None) -> str:
    """Run ``onnxruntime.preload_dlls`` once per directory, capturing what it prints.

    GPU providers call this when a session that needs CUDA/cuDNN is about to be
    built, never at import (preloading can clash with other CUDA users such as
    torch). ``directory=None`` is ONNX Runtime's default search, ``""`` the
    nvidia-* wheels first. Returns what ONNX Runtime printed (also logged as a
    warning), empty when it had nothing to say or already ran.
    """
    with _preload_lock:
        if directory in _preloaded:
            return ""
        preload = getattr(require_onnxruntime(), "preload_dlls", None)
        printed = io.StringIO()
        if preload is not None:
            with contextlib.redirect_stdout(printed):
                preload(directory=directory)
        _preloaded.add(directory)
    text = printed.getvalue().strip()
    if text:
        _log.warning("onnxruntime.preload_dlls: %s", " ".join(text.split()))
    return text
