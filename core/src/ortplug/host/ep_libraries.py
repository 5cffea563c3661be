"""ONNX Runtime plugin-EP libraries: tried in a child first, registered lazily and once per
process, with their devices."""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .. import log as _log
from ..errors import OptionError
from .ort_log import captured
from .probing import file_identity, run_probe_script
from .runtime import builtin_providers, require_onnxruntime

__all__ = [
    "EpDevice",
    "EpLibrary",
    "EpLibraryStatus",
    "describe_device",
    "devices_for",
    "ensure_library",
    "offer_problem",
    "unregister_libraries",
]


def _names(value: Any) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise OptionError(f"EpLibrary.ep_names: expected provider names, got {value!r}")
    return names


@attrs.frozen
class EpLibrary:
    """A plugin-EP library: its registration name, the providers it holds, and either ``path``
    (a shared library) or ``package`` (an ``onnxruntime-ep-*`` package)."""

    name: str = attrs.field(validator=attrs.validators.min_len(1))
    ep_names: tuple[str, ...] = attrs.field(converter=_names)
    path: str | None = attrs.field(default=None, kw_only=True)
    package: str | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if (self.path is None) == (self.package is None):
            raise OptionError(
                f"EpLibrary {self.name!r}: expected exactly one of path= or package=, "
                f"got path={self.path!r}, package={self.package!r}"
            )

    def library_path(self) -> str:
        """The shared library's path (asks the package when one was named)."""
        if self.path is not None:
            return self.path
        module = importlib.import_module(str(self.package))
        get_path = getattr(module, "get_library_path", None)
        if not callable(get_path):
            raise OptionError(
                f"EpLibrary {self.name!r}: package {self.package!r} has no get_library_path(), "
                "so it is not an ONNX Runtime plugin-EP package (onnxruntime-ep-*); name the "
                "library file with EpLibrary(path=...) instead"
            )
        return str(get_path())


@attrs.frozen
class EpDevice:
    """A device a library provider can run on, as ``get_ep_devices`` reports it."""

    ep_name: str
    type: str  # CPU, GPU, NPU
    vendor: str
    vendor_id: int
    device_id: int
    name: str

    def describe(self) -> str:
        """``CPU Intel Intel(R) Xeon(R) Processor``: type, vendor and name."""
        return describe_device(attrs.asdict(self))


def describe_device(fact: Mapping[str, Any]) -> str:
    """One device of a probe's ``devices`` fact (an ``EpDevice`` as a dict) in a few words."""
    name = fact.get("name")
    return f"{fact.get('type')} {fact.get('vendor')}{' ' + name if name else ''}"


@attrs.frozen
class EpLibraryStatus:
    """What registering a library gave: the path, an error, or the devices it offers."""

    library: EpLibrary
    path: str | None
    error: str | None
    devices: tuple[EpDevice, ...]

    @property
    def usable(self) -> bool:
        """Registered and offering at least one device."""
        return self.error is None and bool(self.devices)

    def problem(self) -> str | None:
        """Why its providers cannot run here, or ``None``."""
        if self.error:
            return self.error
        if not self.devices:
            names = ", ".join(self.library.ep_names)
            return f"library {self.library.name!r} ({self.path}) registered but {names} offers no device on this host"
        return None

    def facts(self) -> dict[str, object]:
        """Host facts for a probe: path, error and devices."""
        return {
            "library": self.path,
            "error": self.problem(),
            "devices": [attrs.asdict(d) for d in self.devices],
        }


_lock = threading.Lock()
_status: dict[str, EpLibraryStatus] = {}
#: ``(library, provider)`` pairs :func:`offer_problem` found runnable in this process.
_runnable: set[tuple[str, str]] = set()


def _device(ep_device: Any) -> EpDevice:
    hardware = ep_device.device
    metadata = dict(getattr(ep_device, "ep_metadata", {}) or {})
    return EpDevice(
        ep_name=str(ep_device.ep_name),
        type=str(hardware.type).rpartition(".")[2],
        vendor=str(hardware.vendor),
        vendor_id=int(hardware.vendor_id),
        device_id=int(hardware.device_id),
        name=str(metadata.get("FULL_DEVICE_NAME", "")),
    )


def devices_for(ep_name: str) -> list[Any]:
    """ONNX Runtime's ``OrtEpDevice`` objects of one provider, one per hardware device (a library
    registered twice lists each twice, which ORT refuses)."""
    seen: set[tuple[str, int, int]] = set()
    devices = []
    for device in require_onnxruntime().get_ep_devices():
        if device.ep_name != ep_name:
            continue
        hardware = device.device
        identity = (str(hardware.type), int(hardware.vendor_id), int(hardware.device_id))
        if identity not in seen:
            seen.add(identity)
            devices.append(device)
    return devices


def ensure_library(library: EpLibrary) -> EpLibraryStatus:
    """Register ``library`` with ONNX Runtime once per process; never raises, the status says why."""
    with _lock:
        known = _status.get(library.name)
        if known is not None:
            return known
        status = _register(library)
        _status[library.name] = status
        return status


def unregister_libraries() -> tuple[str, ...]:
    """Unregister every library :func:`ensure_library` registered (process-wide, shared by plugin
    hosts), and forget every status; the names unregistered."""
    with _lock:
        registered = tuple(n for n, status in _status.items() if status.path and not status.error)
        if registered:
            ort = require_onnxruntime()
            for name in registered:
                ort.unregister_execution_provider_library(name)
                del _status[name]  # an error on a later one leaves it known as registered
        _status.clear()
        _runnable.clear()
        return registered


def _register(library: EpLibrary) -> EpLibraryStatus:
    ort = require_onnxruntime()
    builtin_providers(ort)  # taken before the first registration adds to the list
    try:
        path = library.library_path()
    except OptionError as exc:
        return EpLibraryStatus(library, None, str(exc), ())
    except Exception as exc:
        return EpLibraryStatus(library, None, f"{library.package}: {type(exc).__name__}: {exc}", ())
    if not Path(path).is_file():
        return EpLibraryStatus(library, path, f"library file not found: {path}", ())
    crash = _trial_crash(library, path, ort)
    if crash is not None:
        return EpLibraryStatus(
            library,
            path,
            f"ONNX Runtime {ort.__version__} could not load {path}: {crash}; ortplug does not "
            f"load it into this process (remembered until the file or ONNX Runtime changes; "
            "`ortplug cache clear` forgets it)",
            (),
        )
    try:
        # what the library logs as it loads (WebGPU's software-adapter notice) goes to
        # ortplug's log, not stderr (unless ORTPLUG_DEBUG=1, or under the drop-in)
        with captured(ort) as said:
            ort.register_execution_provider_library(library.name, path)
        for line in said:
            _log.info("registering %s: ONNX Runtime said: %s", library.name, line)
    except Exception as exc:
        if "already registered" not in str(exc):
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            hint = (
                "; the library may be built for another ONNX Runtime release: install the "
                f"{library.package or 'library'} release made for onnxruntime {ort.__version__}, "
                "or the onnxruntime release it names"
            )
            return EpLibraryStatus(
                library,
                path,
                f"ONNX Runtime {ort.__version__} could not load {path}: {detail}{hint}",
                (),
            )
    devices = tuple(_device(d) for name in library.ep_names for d in devices_for(name))
    return EpLibraryStatus(library, path, None, devices)


def offer_problem(library: EpLibrary, ep_name: str) -> str | None:
    """Why ``ep_name`` of ``library`` cannot run here (``None``: it can). A success is kept as a
    library trial's outcome is (per file version, installations and boot): later processes leave
    the library unloaded until a session uses it (OpenVINO's costs ~10 ms)."""
    if (library.name, ep_name) in _runnable:
        return None
    from . import probe_cache  # deferred, as for a trial
    from .capabilities import HostProbe

    runnable = HostProbe(name="epoffer", facts=("runnable",), types={"runnable": bool}, detect=dict)
    try:
        key = probe_cache.trial_key("ep-offer", [file_identity([library.library_path()]), ep_name])
    except Exception:  # no path to key it by: the registration below says why
        key = None
    if key is not None and library.name not in _status:
        known = probe_cache.load(key, runnable)
        if known is not None and known.get("runnable") is True:
            _runnable.add((library.name, ep_name))
            return None
    problem = ensure_library(library).problem()
    if problem is None and not devices_for(ep_name):
        problem = f"{ep_name} offers no device on this host"
    if problem is None and key is not None:
        probe_cache.store(key, runnable, {"runnable": True})
    return problem


_TRIAL_SCRIPT = Path(__file__).with_name("_ep_trial.py")
#: Seconds a child may take to load a library (OpenVINO's loads its device plugins).
_TRIAL_TIMEOUT_S = 60.0


def _trial_crash(library: EpLibrary, path: str, ort: Any) -> str | None:
    """Why loading ``path`` took a child interpreter down, or ``None`` when it may be loaded here
    (a crash is kept in the probe cache; a time-out refuses it for this process only)."""
    from . import probe_cache  # deferred: only a library trial reads the probe cache
    from .capabilities import HostProbe

    # the outcome is kept as a probe's facts are, and read back as untrusted as they are
    trial = HostProbe(name="eplibrarytrial", facts=("crash",), types={"crash": str}, detect=dict)
    key = probe_cache.trial_key("ep-library", file_identity([path]))
    known = probe_cache.load(key, trial)
    if known is not None:
        crash = known.get("crash")
        if crash is None or isinstance(crash, str):
            return crash
    argument = {
        "name": library.name,
        "path": path,
        "sys_path": [os.path.dirname(os.path.dirname(ort.__file__))],
    }
    answer = run_probe_script(_TRIAL_SCRIPT, argument, timeout=_TRIAL_TIMEOUT_S)
    error = answer.get("error")
    if not isinstance(error, str):  # loaded, or an ordinary error the load here reports itself
        probe_cache.store(key, trial, {"crash": None})
        return None
    crash = f"loading it in a child process failed: {error}"
    if "crashed (" in error:
        probe_cache.store(key, trial, {"crash": crash})
    return crash
