"""Replacing a local file or directory so that a kill at any moment leaves the old or the new one.

The new version is written beside the target under a temporary name that names its owner (host
and process id), then renamed over the target: a file by ``os.replace``; a directory by
exchanging the two names in one ``renameat2(RENAME_EXCHANGE)`` call where Linux and the
filesystem support it, otherwise by moving the old directory aside first (a kill between those
two renames leaves it aside, and the next writer moves it back). The next writer also removes
the temporaries of owners that no longer run on this host; those of live processes, or of other
hosts, are left alone, since they may still be writing.

Writers of one target on one host take turns (:func:`taking_turns`): a writer reads what is
there, writes beside it and swaps it in, and none of that may interleave with another writer's.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import logging
import os
import re
import shutil
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "clean_leftovers",
    "orphaned",
    "owner_ended",
    "replacing",
    "taking_turns",
    "temporary_name",
]

Kind = Literal["tmp", "old"]

_OWNED = r"\.(?P<kind>tmp|old)-(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{12}"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
# The filesystem or kernel cannot exchange names: fall back to two renames.
_NO_EXCHANGE = {errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}
_log = logging.getLogger(__name__)


def temporary_name(name: str, kind: Kind = "tmp") -> str:
    """A name beside ``name`` for a version being written (``tmp``) or replaced (``old``)."""
    return f"{name}.{kind}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def orphaned(leftover: str, name: str) -> Kind | None:
    """The kind of ``leftover`` if it is a temporary of ``name`` whose owner has died, else None.

    Only owners on this host are known to have died; a temporary of another host, or of a
    process that still runs, is not an orphan.
    """
    match = re.fullmatch(re.escape(name) + _OWNED, leftover)
    if match is None or not owner_ended(match["host"], int(match["pid"])):
        return None
    return "old" if match["kind"] == "old" else "tmp"


def owner_ended(host: str, pid: int) -> bool:
    """Whether process ``pid`` of ``host`` is known to have ended: only this host's are known."""
    return host == socket.gethostname() and not _alive(pid)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def clean_leftovers(target: Path) -> None:
    """Remove what dead writers of ``target`` left beside it; restore a version moved aside.

    A version moved aside (``old``) while ``target`` is missing is what a swap interrupted
    between its two renames leaves: it is still the current version, so it moves back.
    """
    try:
        entries = sorted(os.scandir(target.parent), key=lambda entry: entry.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        kind = orphaned(entry.name, target.name)
        if kind is None:
            continue
        leftover = Path(entry.path)
        if kind == "old" and not os.path.lexists(target):
            os.rename(leftover, target)
        else:
            _remove(leftover)


@contextmanager
def taking_turns(target: Path) -> Iterator[None]:
    """Hold the turn of writing ``target`` on this host; wait while another writer has it.

    The turn is an exclusive ``flock`` of a lock file beside ``target`` (``.NAME.lock``), so it
    ends with the process, however it ends. One lock per target, not per directory: stores
    published side by side in one directory by several processes are written at once. The
    lock file, and the directories made for it, are removed when the turn ends, so a writer
    that wrote nothing leaves nothing; a writer that locked a file removed meanwhile locks the
    new one. When the lock file cannot be made (the directory cannot be written), there is no
    turn to take: the writer finds the target unwritable and writes nothing.
    """
    lock = target.parent / f".{target.name}.lock"
    made = [d for d in (target.parent, *target.parent.parents) if not d.exists()]
    try:
        handle = _locked(lock)
    except OSError as err:
        _log.debug("no turn taken for %s (%s)", target, err)
        yield
        return
    try:
        yield
    finally:
        with suppress(OSError):
            lock.unlink()
        os.close(handle)  # releases the lock
        for directory in made:  # deepest first
            with suppress(OSError):
                directory.rmdir()  # unless something was written there


def _locked(lock: Path) -> int:
    """A descriptor of ``lock`` holding its exclusive ``flock``, waiting for other holders."""
    while True:
        lock.parent.mkdir(parents=True, exist_ok=True)
        try:
            handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            continue  # the directory was removed by a writer whose turn ended
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log.info("waiting for another process writing beside %s to finish", lock)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            current = os.stat(lock)
        except FileNotFoundError:
            current = None
        held = os.fstat(handle)
        if current is not None and (current.st_ino, current.st_dev) == (held.st_ino, held.st_dev):
            return handle
        os.close(handle)  # the holder before removed it: lock the file there now


@contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """A path beside ``target`` to write a file or directory to; it replaces ``target`` after.

    The path does not exist yet. When the block succeeds, what was written there takes the
    place of ``target`` in one rename where the filesystem allows; when it fails, or the
    process is killed, ``target`` is left as it was (the next writer removes the temporary).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(target)
    staged = target.with_name(temporary_name(target.name))
    try:
        yield staged
        _swap_in(staged, target)
    finally:
        # After a swap this is the replaced version (exchanged into the temporary name).
        _remove(staged)


def _swap_in(staged: Path, target: Path) -> None:
    directory_involved = staged.is_dir() or (target.is_dir() and not target.is_symlink())
    if not (directory_involved and os.path.lexists(target)):
        os.replace(staged, target)  # a file over a file or link, or anything to a new name
        return
    if _exchange(staged, target):
        return
    aside = target.with_name(temporary_name(target.name, "old"))
    os.rename(target, aside)
    os.rename(staged, target)
    _remove(aside)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two names atomically; False where the system cannot."""
    libc: Any = ctypes.CDLL(None, use_errno=True)
    function = getattr(libc, "renameat2", None)
    if function is None:
        return False
    done = function(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(first), None, str(second))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
