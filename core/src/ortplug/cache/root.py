"""Where ortplug keeps what it writes and how entries are keyed; every write atomic, every read
bounded."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

import platformdirs

from ..errors import CacheError, OrtplugCacheWarning
from ..log import user_stacklevel
from ._trust import kind_of, resolved_root, trust_problem

__all__ = [
    "CACHE_ENV",
    "MARKER",
    "atomic_write",
    "cache_dir",
    "cache_key",
    "cache_problem",
    "cache_root",
    "check_writable",
    "read_cache_file",
    "read_marker",
    "read_trusted",
    "remove_entries",
    "root_problem",
    "touch",
    "trusted_folder",
    "write_marker",
]

#: Environment variable that moves the cache root.
CACHE_ENV = "ORTPLUG_CACHE_DIR"

#: Largest file :func:`read_cache_file` reads unless told otherwise (records are a few hundred bytes).
_MAX_READ_BYTES = 1 << 20


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """The cache root: ``$ORTPLUG_CACHE_DIR`` or the platform's user cache dir for ortplug.

    The variable is read as :class:`~ortplug.settings.Settings` reads it (blank: unset), here
    without importing the settings (a test keeps both equal).
    """
    given = (os.environ if environ is None else environ).get(CACHE_ENV)
    if given is not None and given.strip():
        return Path(given).expanduser()
    return Path(platformdirs.user_cache_dir("ortplug", appauthor=False))


def _fix(root: Path) -> str:
    return f"set {CACHE_ENV} to a writable directory (now: {root})"


#: What :func:`_prepare` says of a folder that does not exist (and was not to be created).
_ABSENT = "absent"

#: The file that marks a folder as ortplug's cache root and lists the folders ortplug made in
#: it: ``ortplug cache clear`` removes those, and refuses a root without it.
MARKER = "ortplug-cache.json"
_MARKER_SCHEMA = 1


def _folder_name(name: object) -> bool:
    """Whether ``name`` is one plain folder name (a marker is read back, so it is checked)."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= 255
        and name not in (".", "..", MARKER)
        and not any(sep in name for sep in ("/", "\\", "\0"))
    )


def read_marker(root: Path) -> list[str] | None:
    """The folders ``root``'s marker lists; ``None`` without a valid marker (a link is not one,
    nor one another user could have written: see :func:`root_problem`)."""
    path = root / MARKER
    try:
        if trust_problem(path, folder=False) is not None:
            return None
        data = json.loads(read_cache_file(path, max_bytes=64 * 1024))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("ortplug_cache") != _MARKER_SCHEMA:
        return None
    folders = data.get("folders")
    if not isinstance(folders, list) or not all(map(_folder_name, folders)):
        return None
    return list(folders)


def write_marker(root: Path, folders: Iterable[str]) -> None:
    """Mark ``root`` as ortplug's cache root, listing ``folders`` as ortplug's."""
    listed = sorted(set(folders))
    marker = json.dumps({"ortplug_cache": _MARKER_SCHEMA, "folders": listed})
    atomic_write(root / MARKER, marker, mode=0o600)  # others may not rewrite it, whatever the umask


def root_problem(root: Path) -> str | None:
    """Why ortplug may not remove what the cache root ``root`` lists, or ``None``: the root, or
    its marker, is a thing another user could have written (the trust check reading applies)."""
    try:
        problem = resolved_root(root)[1] or trust_problem(root, os.stat(root), folder=True)
        marker = root / MARKER
        if problem is None and os.path.lexists(marker):
            info = os.lstat(marker)
            problem = (
                trust_problem(marker, info, folder=False) if stat.S_ISREG(info.st_mode) else None
            )
    except OSError as exc:
        return f"{root} cannot be used ({exc.strerror or exc})"
    return problem


def _empty(folder: Path) -> bool:
    """Whether ``folder`` holds nothing (an unreadable one counts as holding something)."""
    try:
        with os.scandir(folder) as found:
            return next(found, None) is None
    except OSError:
        return False


def _list_in_marker(root: Path, name: str, fresh: bool) -> None:
    """Add ``name`` to the marker of a root ortplug made (``fresh``), found empty or already
    marked; best effort (another root stays unmarked, so ``cache clear`` refuses it)."""
    listed = [] if fresh else read_marker(root)
    if listed is None and _empty(root):
        listed = []
    if listed is None or name in listed:
        return
    with contextlib.suppress(CacheError):
        write_marker(root, [*listed, name])


def _prepare(
    parts: tuple[str, ...], environ: Mapping[str, str] | None, create: bool
) -> tuple[Path, str | None]:
    """``<root>/<parts...>`` and why it cannot be used (``None``: it can), creating it private if
    asked; only the root may be a link, and every level only this user's (or root's) to write."""
    root, linked = resolved_root(cache_root(environ))
    if linked is not None:
        return root, linked
    current = root
    fresh = False  # whether this call made the root
    for level, name in enumerate(("", *parts)):
        current = current / name if level else current
        look = os.stat if level == 0 else os.lstat
        if level == 1 and create:
            _list_in_marker(root, name, fresh)
        try:
            info = look(current)
        except FileNotFoundError:
            if not create:
                return current, _ABSENT
            try:
                if level == 0:
                    os.makedirs(current, 0o700)
                    fresh = True
                else:
                    os.mkdir(current, 0o700)
            except FileExistsError:
                pass  # another process made it: checked below like any other
            except OSError as exc:
                return current, f"{current} cannot be created ({exc.strerror or exc})"
            try:
                info = look(current)
            except OSError as exc:
                return current, f"{current} cannot be used ({exc.strerror or exc})"
        except OSError as exc:  # a file on the way, a symlink loop, a folder we may not enter
            return current, f"{current} cannot be used ({exc.strerror or exc})"
        problem = trust_problem(current, info, folder=True)
        if problem is not None:
            return current, problem
    return current, None


def cache_dir(*parts: str, environ: Mapping[str, str] | None = None) -> Path:
    """Create (if needed) and return ``<cache root>/<parts...>``; a
    :class:`~ortplug.errors.CacheError` naming the directory when it cannot be used."""
    root = cache_root(environ)
    path, problem = _prepare(parts, environ, create=True)
    if problem is not None:
        raise CacheError(
            f"ortplug cache directory {root.joinpath(*parts)} cannot be created or used: "
            f"{problem}; {_fix(root)}"
        )
    return path


_warned: set[str] = set()


def trusted_folder(*parts: str, create: bool = False) -> Path | None:
    """``<cache root>/<parts...>`` when ortplug may keep and read back records there, else ``None``
    (an unusable one with one :class:`~ortplug.errors.OrtplugCacheWarning` per process)."""
    path, problem = _prepare(parts, None, create)
    if problem is None:
        return path
    if problem != _ABSENT and problem not in _warned:
        _warned.add(problem)
        warnings.warn(
            f"the cache is not used, the run goes on without it: {problem}; {_fix(cache_root())}",
            OrtplugCacheWarning,
            stacklevel=user_stacklevel(),
        )
    return None


def _temp_name(target: Path) -> Path:
    """A fresh hidden name beside ``target`` (never matched by ``*.json``-style globs)."""
    return target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")


def _create_exclusive(path: Path, mode: int = 0o666) -> int:
    """Open a new file for writing; fails if anything (a file, a link) is already there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    return os.open(path, flags, mode)  # the umask applies, as for any file the user creates


def _write_probe(folder: Path) -> str | None:
    """Create and remove one file in ``folder``: the only sure test of writability."""
    probe = _temp_name(folder / "write-test")
    try:
        os.close(_create_exclusive(probe))
    except OSError as exc:
        return f"{folder} is not writable ({exc.strerror or exc})"
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def _existing_ancestor(path: Path) -> tuple[Path, os.stat_result | str]:
    """The nearest of ``path`` and its parents that exists, with its stat, or the reason it cannot be used."""
    current = path
    while True:
        try:
            return current, os.stat(current)
        except (FileNotFoundError, NotADirectoryError):
            if os.path.lexists(current):
                return current, f"{current} is a symbolic link to a missing target"
        except OSError as exc:  # a symlink loop, a folder we may not enter...
            return current, f"{current} cannot be used ({exc.strerror or exc})"
        if current.parent == current:
            return current, f"{current} does not exist"
        current = current.parent


def cache_problem(*parts: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Why ``<cache root>/<parts...>`` cannot hold ortplug's files, or ``None`` when it can (one
    test file written and removed), before anything is computed for the cache."""
    path = cache_root(environ).joinpath(*parts)
    found, info = _existing_ancestor(path)
    if isinstance(info, str):
        return info
    if not stat.S_ISDIR(info.st_mode):
        return f"{found} is not a directory"
    _, untrusted = _prepare(parts, environ, create=False)
    if untrusted not in (None, _ABSENT):
        return untrusted
    if found != path:  # it would be created inside ``found``
        return None if os.access(found, os.W_OK | os.X_OK) else f"{found} is not writable"
    return _write_probe(path)


def check_writable(*parts: str, environ: Mapping[str, str] | None = None) -> Path:
    """Raise :class:`~ortplug.errors.CacheError` unless ``<cache root>/<parts...>`` is usable;
    returns it (``bench --save`` fails at once, not at the end)."""
    root = cache_root(environ)
    problem = cache_problem(*parts, environ=environ)
    if problem is not None:
        raise CacheError(
            f"ortplug cache directory {root.joinpath(*parts)}: {problem}; {_fix(root)}"
        )
    return root.joinpath(*parts)


def _fsync_directory(folder: Path) -> None:
    """Make a rename in ``folder`` durable where the platform can (POSIX); best effort."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory; the rename itself is still atomic
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes | str, *, mode: int = 0o666) -> Path:
    """Replace ``path`` with ``data`` (``str``: UTF-8) in one step, through a synced temporary file
    renamed over it: readers see the old file or the new one. Raises
    :class:`~ortplug.errors.CacheError` naming the file; returns the path."""
    target = Path(path)
    payload = data.encode() if isinstance(data, str) else bytes(data)
    temp = _temp_name(target)
    try:
        fd = _create_exclusive(temp, mode)
    except OSError as exc:
        raise CacheError(
            f"cannot write ortplug cache file {target} ({exc.strerror or exc}); "
            f"{_fix(cache_root())}"
        ) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise CacheError(
                f"cannot write ortplug cache file {target} ({exc.strerror or exc}); "
                f"{_fix(cache_root())}"
            ) from exc
        raise
    _fsync_directory(target.parent)
    return target


def _check_regular(path: Path, info: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise CacheError(f"{path} is {kind_of(info.st_mode)}, expected a regular file")
    if info.st_size > max_bytes:
        raise CacheError(f"{path} has {info.st_size} bytes, expected at most {max_bytes}")


def read_trusted(path: Path, *, max_bytes: int = _MAX_READ_BYTES) -> bytes:
    """The bytes of a record file ortplug may read back (:func:`trust_problem`: this user's, not
    a link, writable by no other user), at most ``max_bytes``: else :class:`CacheError`."""
    problem = trust_problem(path, folder=False)
    if problem is not None:
        raise CacheError(problem)
    return read_cache_file(path, max_bytes=max_bytes)


def read_cache_file(path: str | os.PathLike[str], *, max_bytes: int = _MAX_READ_BYTES) -> bytes:
    """The bytes of a regular file in the cache, at most ``max_bytes``; anything else is never
    opened (it could block): :class:`~ortplug.errors.CacheError` names it."""
    target = Path(path)
    _check_regular(target, os.stat(target), max_bytes)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(target, flags | getattr(os, "O_BINARY", 0))  # non-blocking: a swapped-in FIFO
    try:
        _check_regular(target, os.fstat(fd), max_bytes)  # what was opened, not what was named
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:
        raise CacheError(f"{target} grew past {max_bytes} bytes while being read")
    return b"".join(chunks)


def cache_key(*parts: object) -> str:
    """A short, stable hex key for a cache entry from JSON-serializable parts."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def touch(path: str | os.PathLike[str]) -> None:
    """Mark a cache entry as used now (its mtime), for least-recently-used pruning; best effort."""
    with contextlib.suppress(OSError):
        os.utime(path)


def remove_entries(folder: str, pattern: str = "*.json") -> int:
    """Remove the files matching ``pattern`` in ``<cache root>/<folder>``; how many went. Never
    through a symbolic link (a link in it is removed itself, never its target)."""
    found = trusted_folder(folder)
    if found is None:
        return 0
    try:
        paths = list(found.glob(pattern))
    except OSError:  # gone since it was checked (another `ortplug cache clear`), or unreadable
        return 0
    removed = 0
    for path in paths:
        with contextlib.suppress(OSError):
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                path.unlink()
                removed += 1
    return removed
