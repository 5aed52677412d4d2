"""Checking, before anything is written, that a publish can write its store and its catalog.

A publish writes the store first and the catalog last; a catalog that turns out unwritable after
the store was written would leave the store ahead of it. So both are checked first, by trying:
permission bits say nothing for root, and a read-only mount, an immutable directory or a path
below a regular file only show when a write is attempted. A local directory is probed with an
anonymous file (``O_TMPFILE``, never visible, gone when closed) where the filesystem has them,
else with a named temporary removed at once; an object store with a temporary object deleted
at once, beside the target (named so that the next publish removes it should this one be
killed in between).
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import obstore

from virtualstac.errors import NotWritableError
from virtualstac.stac.targets import Target
from virtualstac.writers.staging import temporary_name

__all__ = ["check_file_writable", "check_target_writable"]


def check_target_writable(target: Target, *, inside: bool) -> None:
    """Raise :class:`NotWritableError` unless the store at ``target`` can be written.

    ``inside``: the publish writes into the target (an existing Icechunk repository), rather
    than beside it (a new repository or Kerchunk references, renamed into place).
    """
    if target.is_local:
        path = target.path
        if inside and path.is_dir():
            _probe_directory(path, f"the store at {path}")
        elif path.exists() and inside:
            raise NotWritableError(f"cannot publish at {path}: it is a file, not a directory")
        else:
            _probe_directory(path.parent, f"the store at {path}")
        return
    store, key = target.store()
    # Beside the target even for a repository: a probe left inside would make its prefix
    # unclean for Icechunk, while one beside it is an orphan the next publish removes.
    probe = temporary_name(key)
    try:
        obstore.put(store, probe, b"")
        obstore.delete(store, probe)
    except Exception as err:  # obstore's errors are not OSErrors; any failure means no
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise NotWritableError(f"cannot write the store at {target.url}: {reason}") from err


def check_file_writable(path: Path, what: str = "the catalog") -> None:
    """Raise :class:`NotWritableError` unless a file can be written at ``path`` by renaming.

    The file's directory must exist and take new entries; ``path`` must not be a directory.
    """
    if path.is_dir():
        raise NotWritableError(f"cannot write {what} at {path}: it is a directory")
    if not path.parent.is_dir():
        reason = "is not a directory" if path.parent.exists() else "does not exist"
        raise NotWritableError(f"cannot write {what} at {path}: {path.parent} {reason}")
    _probe_directory(path.parent, f"{what} at {path}")


def _probe_directory(directory: Path, what: str) -> None:
    """Try to create an entry in ``directory``, or in its nearest existing ancestor."""
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise NotWritableError(f"cannot write {what}: {existing} is not a directory")
    try:
        _try_create(existing)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise NotWritableError(
            f"cannot write {what}: {existing} is not writable ({reason})"
        ) from err


def _try_create(directory: Path) -> None:
    anonymous = getattr(os, "O_TMPFILE", 0)
    if anonymous:
        try:
            os.close(os.open(directory, anonymous | os.O_WRONLY, 0o600))
            return
        except IsADirectoryError:  # an old kernel without O_TMPFILE: try a named file
            pass
        except OSError as err:
            if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # the filesystem has none
                raise
    handle, name = tempfile.mkstemp(dir=directory, prefix=".virtualstac-probe-")
    os.close(handle)
    os.unlink(name)
