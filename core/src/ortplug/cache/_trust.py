"""Whether another user could change a folder or file of the cache (by mode, shared group or
POSIX ACL): the one trust check, as pip and ssh make it."""

from __future__ import annotations

import errno
import os
import stat
import struct
from pathlib import Path

__all__ = ["foreign_writers", "kind_of", "resolved_root", "trust_problem"]

#: The extended attribute holding a file's POSIX access ACL (Linux), and its entries' layout.
_ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2
_ACL_ENTRY = struct.Struct("<HHI")  # tag, permissions, uid or gid
_ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK = 0x02, 0x04, 0x08, 0x10
_ACL_WRITE = 0x02
#: What an ACL without an entry for the thing says (the file has no ACL, the filesystem none).
_NO_ACL = (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP)
#: Links followed at most while resolving the cache root (the kernel's own limit).
_MAX_LINKS = 40


def _account_name(uid: int) -> str:
    import pwd  # deferred, as all account lookups: only a group-writable folder asks

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _group_name(gid: int) -> str:
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return f"gid {gid}"


def _other_members(gid: int, uid: int) -> list[str]:
    """The accounts other than this user (and root) in group ``gid``: those that have it as
    primary group (``useradd -g``, absent from the group's member list) and its listed members."""
    import grp
    import pwd

    accounts = pwd.getpwall()
    trusted = {a.pw_name for a in accounts if a.pw_uid in (uid, 0)}
    primary = {a.pw_name for a in accounts if a.pw_gid == gid}
    try:
        listed = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        listed = set()
    return sorted((primary | listed) - trusted)


def _own_private_group(gid: int, uid: int) -> bool:
    """Whether group ``gid`` is this user's own (a user-private group, as umask 002 systems give)
    that no other account is in."""
    return _group_name(gid) == _account_name(uid) and not _other_members(gid, uid)


def _acl_entries(path: Path) -> list[tuple[int, int, int]] | str | None:
    """The (tag, permissions, id) entries of ``path``'s POSIX access ACL; ``None`` without one
    (or on a platform without ACLs); why it cannot be read, then ortplug does not trust it."""
    getxattr = getattr(os, "getxattr", None)
    if getxattr is None:
        return None
    try:
        raw: bytes = getxattr(path, _ACL_XATTR)
    except OSError as exc:
        if exc.errno in _NO_ACL:
            return None
        return f"{path} has a POSIX ACL that cannot be read ({exc.strerror or exc})"
    body = raw[4:]
    if len(raw) < 4 or struct.unpack_from("<I", raw)[0] != _ACL_VERSION or len(body) % 8:
        return f"{path} has a POSIX ACL in a form ortplug does not know"
    return list(_ACL_ENTRY.iter_unpack(body))


def _acl_writers(path: Path, info: os.stat_result, uid: int) -> tuple[list[str], bool] | str:
    """Who else ``path``'s ACL lets write (named users and groups, through its mask), and whether
    its owning group may write; why the ACL cannot be judged."""
    entries = _acl_entries(path)
    if entries is None:
        return [], bool(info.st_mode & stat.S_IWGRP)
    if isinstance(entries, str):
        return entries
    masks = [perm for tag, perm, _ in entries if tag == _ACL_MASK]
    mask = masks[0] if masks else 0o7
    others, group_writes = [], False
    for tag, perm, ident in entries:
        if not perm & mask & _ACL_WRITE:
            continue
        if tag == _ACL_GROUP_OBJ:
            group_writes = True
        elif tag == _ACL_USER and ident not in (uid, 0):
            others.append(f"user {_account_name(ident)}")
        elif tag == _ACL_GROUP and not _own_private_group(ident, uid):
            others.append(f"group {_group_name(ident)}")
    return others, group_writes


def _harm(info: os.stat_result) -> str:
    """What another writer could do to a folder or file."""
    return "could plant records in it" if stat.S_ISDIR(info.st_mode) else "could rewrite it"


def _fixed(path: Path, info: os.stat_result) -> str:
    """What another writer could do, and the fix."""
    return f"{_harm(info)} (`chmod go-w {path}` makes it yours alone)"


def foreign_writers(path: Path, info: os.stat_result) -> str | None:
    """Why another user could change what ``path`` (already stat'ed) holds, or ``None``."""
    if os.name != "posix":
        return None
    uid, mode = os.getuid(), stat.S_IMODE(info.st_mode)
    if info.st_uid not in (uid, 0):
        return (
            f"{path} belongs to another user (uid {info.st_uid}; expected yours, uid {uid}, or "
            f"root), who {_harm(info)}"
        )
    if mode & stat.S_IWOTH:
        return f"{path} is writable by every user (mode {mode:o}), who {_fixed(path, info)}"
    if not mode & stat.S_IWGRP:
        return None  # an ACL's named entries are bounded by its mask, which the group bits show
    writers = _acl_writers(path, info, uid)
    if isinstance(writers, str):
        return writers
    others, group_writes = writers
    if others:
        return (
            f"{path} is writable through its ACL by {', '.join(others)} (mode {mode:o}), who "
            f"{_fixed(path, info)}"
        )
    if not group_writes or _own_private_group(info.st_gid, uid):
        return None
    group = _group_name(info.st_gid)
    members = _other_members(info.st_gid, uid)
    if members:
        more = f" and {len(members) - 3} more" if len(members) > 3 else ""
        whose = f"so by {', '.join(members[:3])}{more}, who"
    else:
        whose = "not your own private group, whose members"
    return f"{path} is writable by its group {group} (mode {mode:o}), {whose} {_fixed(path, info)}"


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is (``a FIFO``), for messages."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def trust_problem(path: Path, info: os.stat_result | None = None, *, folder: bool) -> str | None:
    """Why ortplug may not trust ``path`` (a folder, a record or a marker), or ``None``: a link
    (unless followed, as the root), another kind, or writable by another user."""
    info = os.lstat(path) if info is None else info
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link (ortplug never follows one inside its cache)"
    if folder and not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory"
    if not folder and not stat.S_ISREG(info.st_mode):
        return f"{path} is {kind_of(info.st_mode)}, expected a regular file"
    return foreign_writers(path, info)


def _link_owner_problem(link: Path, info: os.stat_result) -> str | None:
    """Why the symbolic link ``link`` could be pointed elsewhere by another user, or ``None``."""
    if os.name != "posix" or info.st_uid in (os.getuid(), 0):
        return None
    return (
        f"{link} is a symbolic link of another user (uid {info.st_uid}; expected yours, uid "
        f"{os.getuid()}, or root), who could point it at another folder"
    )


def _ancestors(path: str) -> list[str]:
    """``path`` and each folder above it up to (not with) its anchor, outermost first."""
    found: list[str] = []
    while (parent := os.path.dirname(path)) != path:
        found, path = [path, *found], parent
    return found


def resolved_root(root: Path) -> tuple[Path, str | None]:
    """The cache root with every symbolic link on its way followed (each this user's or root's:
    its owner can re-point it), and why it may not be used (``None``: it may); walked as
    strings (every build passes here: a ``Path`` a level cost more than its ``lstat``)."""
    current = os.path.abspath(root)
    for _ in range(_MAX_LINKS):
        for prefix in _ancestors(current):
            try:
                info = os.lstat(prefix)
            except OSError:
                return Path(current), None  # absent (made later) or unusable: the caller says
            if stat.S_ISLNK(info.st_mode):
                problem = _link_owner_problem(Path(prefix), info)
                if problem is not None:
                    return Path(current), problem
                below = current[len(prefix) :].lstrip(os.sep)
                target = os.path.join(os.path.dirname(prefix), os.readlink(prefix))
                current = os.path.join(target, below) if below else target
                break
        else:  # no link left on the way: ``..`` can be read as the parent
            return Path(os.path.normpath(current)), None
    return Path(current), f"{root} cannot be used (over {_MAX_LINKS} symbolic links on its way)"
