"""Headers and blocks of local files read with ``pread``, with the metadata obstore reports.

obstore serves a ranged GET of a :class:`~obstore.store.LocalStore` on a worker thread of its
runtime: a future, a thread hop and a copy cost 150-500 us for a small file's header, against
about 15 us for ``open``, ``fstat`` and ``pread``, and a small netCDF4 file's whole parse costs
about 6 ms. Parsers' readers therefore read local files here.

The metadata is built as obstore's ``LocalStore`` builds it (size, modification time to the
microsecond, and its ETag: inode, microseconds and size in hex), so a source stamp is the same
whichever path read the file, and stays comparable with a later ``head``. Whatever is not a
plain case (not a regular file, a modification time before 1970, a file system error other
than a missing file) returns None, and obstore reads it as before, with its own errors.
"""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime, timedelta
from typing import Any

from virtualstac.storage.local_ranges import local_file
from virtualstac.storage.objects import Store

__all__ = ["local_object", "read_local_blocks", "read_local_head"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def read_local_head(store: Store, path: str, nbytes: int) -> tuple[bytes, dict[str, Any]] | None:
    """The first ``nbytes`` of object ``path`` of ``store`` and its metadata, if it is a local
    file this module reads; None for obstore to read it.

    Raises FileNotFoundError when there is no such file, as obstore does.
    """
    opened = _open_plain(store, path)
    if opened is None:
        return None
    descriptor, status = opened
    try:
        data = _pread(descriptor, nbytes, 0)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    return data, _meta(path, status)


def local_object(store: Store, path: str) -> tuple[str, dict[str, Any]] | None:
    """The file system path and obstore's metadata of object ``path`` of ``store``, if it is
    a local regular file this module reads (None for obstore to read it).

    A parser that opens the file itself (HDF5's own file driver) compares the metadata before
    and after parsing to learn that the file did not change meanwhile.

    Raises FileNotFoundError when there is no such file, as obstore does.
    """
    opened = _open_plain(store, path)
    if opened is None:
        return None
    os.close(opened[0])
    file = _local_path(store, path)
    assert file is not None  # it was just opened
    return file, _meta(path, opened[1])


def read_local_blocks(
    store: Store, path: str, starts: list[int], ends: list[int]
) -> list[bytes] | None:
    """The byte ranges ``[starts[i], ends[i])`` of object ``path`` of ``store`` if it is a
    local file (each shorter where the file ends first); None for obstore to read them (and
    report a missing file)."""
    try:
        descriptor = _open(store, path)
    except FileNotFoundError:
        return None
    if descriptor is None:
        return None
    try:
        return [
            _pread(descriptor, end - start, start) for start, end in zip(starts, ends, strict=True)
        ]
    except OSError:
        return None
    finally:
        os.close(descriptor)


def _local_path(store: Store, path: str) -> str | None:
    return local_file(store, path) if os.name == "posix" else None


def _open(store: Store, path: str) -> int | None:
    """A descriptor of the local file of object ``path``; None for obstore to read it.

    Raises FileNotFoundError when there is no such file.
    """
    file = _local_path(store, path)
    if file is None:
        return None
    try:
        return os.open(file, _FLAGS)
    except FileNotFoundError:
        raise
    except OSError:
        return None


def _open_plain(store: Store, path: str) -> tuple[int, os.stat_result] | None:
    """A descriptor and the status of object ``path``'s local file, if it is a regular file
    whose obstore metadata :func:`_meta` builds; None for obstore to read it.

    Raises FileNotFoundError when there is no such file.
    """
    descriptor = _open(store, path)
    if descriptor is None:
        return None
    try:
        status = os.fstat(descriptor)
    except OSError:
        status = None
    if status is None or not stat.S_ISREG(status.st_mode) or status.st_mtime_ns < 0:
        os.close(descriptor)
        return None
    return descriptor, status


def _pread(descriptor: int, nbytes: int, offset: int) -> bytes:
    """``nbytes`` from ``offset``, fewer only where the file ends."""
    parts = []
    while nbytes > 0:
        part = os.pread(descriptor, nbytes, offset)
        if not part:
            break
        parts.append(part)
        nbytes -= len(part)
        offset += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _meta(path: str, status: os.stat_result) -> dict[str, Any]:
    """obstore's metadata of a local file (``object_store``'s ``LocalFileSystem``)."""
    micros = status.st_mtime_ns // 1000
    return {
        "path": path,
        "last_modified": _EPOCH + timedelta(microseconds=micros),
        "size": status.st_size,
        "e_tag": f'"{status.st_ino:x}-{micros:x}-{status.st_size:x}"',
        "version": None,
    }
