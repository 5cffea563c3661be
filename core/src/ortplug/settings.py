"""The ``ORTPLUG_*`` environment variables of the core: one typed value, as the environment says
now; a bad one is one line naming it (docs/internals.md, "Settings")."""

from __future__ import annotations

import _thread  # threading imports more than a lock needs (read under `ortplug exec`)
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import attrs

from .errors import OptionError

__all__ = [
    "OVERRIDES",
    "OVERRIDE_PREFIX",
    "VARIABLES",
    "Settings",
    "Variable",
    "parse_size_mb",
    "refresh_settings",
    "settings",
]

#: The family of variables that force a host or probe fact (``ORTPLUG_OVERRIDE_CPU_USABLE_CPUS``).
OVERRIDE_PREFIX = "ORTPLUG_OVERRIDE_"


class Variable(NamedTuple):
    """One row of the table: the variable, its :class:`Settings` field, type, default and meaning.

    ``parse`` turns the variable's text into the field's value, ``None`` when it is not valid;
    ``expected`` says what it takes, for the error line. (A named tuple: every process reads
    the table at start, and an attrs class per row costs more to make.)
    """

    name: str
    field: str | None  # None: read by an add-on (the drop-in, `ortplug exec`'s start-up hook)
    type: str
    default: str
    doc: str
    parse: Callable[[str], object]
    expected: str


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


_FLAG_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


def _flag(text: str) -> bool | None:
    """On or off: a word of :data:`_FLAG_WORDS` (any case) or a whole number (0: off); ``None``
    for anything else (``ORTPLUG_MEASURE=disable`` read as on was a silent surprise)."""
    word = text.strip().lower()
    if word.isdigit():
        return int(word) != 0
    return _FLAG_WORDS.get(word)


def parse_size_mb(text: str) -> float | None:
    """A cache size in MB (``ORTPLUG_CACHE_MAX_MB``, ``--max-mb``): a finite number >= 0, -0
    read as 0; ``None`` for anything else."""
    try:
        value = float(text)
    except ValueError:
        return None
    return abs(value) if 0 <= value < math.inf else None


def _bounded(convert: Callable[[str], float], low: float, high: float) -> Callable[[str], Any]:
    """A parser of numbers from ``low`` to ``high``: ``None`` for anything else (NaN too)."""

    def parse(text: str) -> float | None:
        try:
            value = convert(text)
        except ValueError:
            return None
        return value if low <= value <= high else None

    return parse


_count = _bounded(int, 0, math.inf)
_share = _bounded(float, 0.0, 1.0)


def _path(text: str) -> Path:
    return Path(text).expanduser()


def _text(text: str) -> str:
    return text.strip()


_FLAG = "a flag (1 or 0, true or false, yes or no, on or off)"

#: Every core variable, in the README's order. Plugin variables are the plugins' own.
VARIABLES: tuple[Variable, ...] = (
    Variable("ORTPLUG_PLUGINS", "plugins", "names", "all", "load only these plugins (entry-point names, comma-separated)", _names, "plugin names"),
    Variable("ORTPLUG_DISABLE_PLUGINS", "disable_plugins", "names", "none", "never import these plugins", _names, "plugin names"),
    Variable("ORTPLUG_STRICT_PLUGINS", "strict_plugins", "flag", "0", "raise `PluginError` (plugin, hook, exception type) on a plugin failure instead of warning, `PluginConflictError` on a kind claimed twice (for plugin authors)", _flag, _FLAG),
    Variable("ORTPLUG_CACHE_DIR", "cache_dir", "path", "the platform's user cache dir for `ortplug`", "where engine and compiled-model caches and ortplug's records go", _path, "a folder"),
    Variable("ORTPLUG_CACHE_MAX_MB", "cache_max_mb", "number", "no cap", "the size the cache is kept under: on each use of a plugin's cache folder, and by `ortplug cache prune`", parse_size_mb, "a size in MB (a finite number >= 0)"),
    Variable("ORTPLUG_MEASURE", "measure", "flag", "1", "`0` skips the measured choice on a first build (the first verified choice serves)", _flag, _FLAG),
    Variable("ORTPLUG_REAL_TRAFFIC_CHECKS", "real_traffic_checks", "count", "8", "real requests a startup fallback's candidate must agree on with the CPU reference before it serves (`0`: once verified)", _count, "a whole number of requests >= 0"),
    Variable("ORTPLUG_SPOT_CHECK", "spot_check", "share", "0.01", "the share of a startup fallback's candidate's calls run again on the CPU reference once it serves (`0`: none)", _share, "a share of calls from 0 to 1"),
    Variable("ORTPLUG_PROGRESS", "progress", "flag", "1", "`0` hides the progress bars the CLI's long commands draw on a terminal's stderr (never drawn on a pipe or in a file)", _flag, _FLAG),
    Variable("ORTPLUG_DEBUG", "debug", "flag", "0", "full tracebacks from the CLI, and ONNX Runtime's own log on stderr", _flag, _FLAG),
    Variable("ORTPLUG_CATALOG", "catalog", "path", "none", "more or replaced catalog kinds for `info`, `doctor`, `doctor --fix` (declaration format)", _path, "a file"),
    Variable("ORTPLUG_OVERRIDE_HARDWARE_ROOT", "hardware_root", "path", "/", "read the hardware files (`sys/`, `proc/`, macOS's version file) under this folder instead of `/`", _path, "a folder"),
    Variable("ORTPLUG_EXEC_TAKEOVER", None, "text", "cpu", "which provider lists `ortplug exec` takes over in the program it runs (set by `ortplug exec --takeover`)", _text, "a takeover mode"),
    Variable("ORTPLUG_ALLOW_VARIANTS", None, "flag", "0", "`1` lets a drop-in session (`ortplug.InferenceSession`, `patch()`, `ortplug exec`) serve a verified precision variant its model's manifest lists in place of the file the app gave, said on stderr (set by `ortplug exec --allow-variants`; per session: the config entry `\"ortplug.allow_variants\"`)", _flag, "a flag"),
    Variable("ORTPLUG_EXEC_REPORT", None, "text", "none", "the process whose exit `ortplug exec --report` reports on (set by `ortplug exec`)", _text, "a process id"),
)  # fmt: skip

#: The ``ORTPLUG_OVERRIDE_*`` family (:attr:`Settings.overrides`): each probe parses its own facts.
OVERRIDES: tuple[Variable, ...] = (
    Variable("ORTPLUG_OVERRIDE_<PROBE>_<FACT>", "overrides", "json", "detected", "force a probe fact (JSON of the fact's type); empty means absent", _text, "JSON"),
    Variable("ORTPLUG_OVERRIDE_PLATFORM", "overrides", "text", "detected", "force the base host facts (also `_MACHINE`, `_ORT_VERSION`, `_AVAILABLE_PROVIDERS`, comma-separated)", _text, "text"),
)  # fmt: skip


def _frozen(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


@attrs.frozen
class Settings:
    """The core's ``ORTPLUG_*`` variables, typed (see :data:`VARIABLES` for each one's meaning).

    ``plugins`` ``None``: every plugin; ``cache_dir`` ``None``: the platform's user cache folder;
    ``overrides``: every ``ORTPLUG_OVERRIDE_*`` variable as set (each probe parses its own facts);
    ``invalid``: the variables whose value was refused (only from :func:`settings`), each with its
    one-line error, their fields at the default.
    """

    plugins: tuple[str, ...] | None = None
    disable_plugins: tuple[str, ...] = ()
    strict_plugins: bool = False
    cache_dir: Path | None = None
    cache_max_mb: float | None = None
    measure: bool = True
    real_traffic_checks: int = 8
    spot_check: float = 0.01
    progress: bool = True
    debug: bool = False
    catalog: Path | None = None
    hardware_root: Path | None = None
    overrides: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen)
    invalid: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, strict: bool = True) -> Settings:
        """The settings ``environ`` makes. A bad value raises :class:`~ortplug.errors.OptionError`
        (``ORTPLUG_SPOT_CHECK: expected a share of calls from 0 to 1, got '2'``); with ``strict``
        false it is kept in :attr:`invalid` instead and its default used."""
        values: dict[str, Any] = {}
        invalid: dict[str, str] = {}
        for variable in VARIABLES:
            if variable.field is None:
                continue  # the exec start-up hook's own: it reads os.environ before any import
            raw = environ.get(variable.name)
            if raw is None or (not raw.strip() and variable.type != "names"):
                continue  # unset, or blank: the default (a blank list of names lists none)
            value = variable.parse(raw if variable.type == "path" else raw.strip())
            if value is None:
                problem = f"{variable.name}: expected {variable.expected}, got {raw.strip()!r}"
                if strict:
                    raise OptionError(problem)
                invalid[variable.name] = problem
                continue
            values[variable.field] = value
        overrides = {k: v for k, v in environ.items() if k.startswith(OVERRIDE_PREFIX)}
        return cls(**values, overrides=overrides, invalid=invalid)

    def problem(self, name: str) -> str | None:
        """The error line of variable ``name`` when its value was refused, else ``None``."""
        return self.invalid.get(name)


_lock = _thread.allocate_lock()
#: The last read: the environment it was made from (a copy) and the settings it made.
_current: list[tuple[Mapping[Any, Any], Settings]] = []


def _environ_now() -> Mapping[Any, Any]:
    """The mapping behind ``os.environ`` (CPython's undecoded ``_data`` dict), to compare with the
    last read's copy: equal when nothing was set or removed (0.2 us; decoding every name to
    pick out ``ORTPLUG_*`` costs 6 us, and each build reads the settings a few times)."""
    raw = getattr(os.environ, "_data", None)
    return raw if isinstance(raw, dict) else dict(os.environ)


def settings() -> Settings:
    """This process's settings, as ``os.environ`` says now: read again whenever the environment
    changed since the last call (a program or a test that sets ``ORTPLUG_CACHE_DIR`` after
    ``import ortplug`` is honoured by the next build or command), else the value made last.

    A bad value does not raise here (see :attr:`Settings.invalid`): the code that reads the
    variable warns where it always has.
    """
    environ = _environ_now()
    with _lock:
        if _current and _current[0][0] == environ:
            return _current[0][1]
        return _read(environ)


def _read(environ: Mapping[Any, Any]) -> Settings:
    """Parse ``os.environ`` and keep the result with a copy of ``environ`` (under ``_lock``); the
    previous value is kept when only other variables changed."""
    copy = dict(environ)  # before the parse: a change made meanwhile is read at the next call
    found = Settings.from_environ(os.environ, strict=False)
    if _current and _current[0][1] == found:
        found = _current[0][1]
    _current[:] = [(copy, found)]
    return found


def refresh_settings() -> Settings:
    """Read ``os.environ`` again now (``settings()`` does so itself when the environment changed)."""
    environ = _environ_now()
    with _lock:
        _current.clear()
        return _read(environ)
