"""Opening HDF5 files to read their metadata: through a file object that checks what HDF5
reads, without a file lock, and as a SWMR reader when a SWMR writer holds the file open.

Every file reaches h5py as a file object of :mod:`~virtualstac.parsers.hdf_heaps` (a local
one too, not by name through HDF5's own driver, at about 8% of a small file's parse), so that
damage on which HDF5 would loop for ever is refused first.

The exception is a local file a SWMR writer (single writer, multiple readers) is appending to:
its superblock says so (a version 3 superblock's consistency flags), and its end of file there
is stale until the writer closes it, so through a file object its newer metadata lies past
that end and it fails as if damaged. HDF5 opens it by name as a SWMR reader, reading what the
writer has flushed, as h5py's ``swmr=True`` readers do.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import IO

import h5py

from virtualstac.errors import UnknownFormatError
from virtualstac.parsers.hdf_heaps import CheckedLocalFile, HeapCheckingFile
from virtualstac.storage.reader import BlockCachedReader

__all__ = ["OpenError", "open_read_only"]

_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: A superblock's consistency flags: the file is open for writing, by a SWMR writer.
_WRITING, _SWMR_WRITING = 0x01, 0x04


class OpenError(UnknownFormatError):
    """HDF5 could not open the file (not HDF5, damaged, or refused)."""


def open_read_only(
    url: str, file: str | IO[bytes] | BlockCachedReader, opened: ExitStack
) -> h5py.File:
    """The HDF5 file ``url`` opened read-only from ``file`` (a local path or a file object);
    a local file is opened in ``opened``, which closes it.

    Raises :class:`OpenError` when HDF5 cannot open it.
    """
    try:
        checked: CheckedLocalFile | HeapCheckingFile
        if isinstance(file, str):
            if _held_by_swmr_writer(file):
                return h5py.File(file, "r", locking=False, swmr=True)
            checked = opened.enter_context(CheckedLocalFile(file, url))
        else:
            checked = HeapCheckingFile(file, url)
        # Only read: no HDF5 file lock, which read-only and network file systems refuse.
        h5file = h5py.File(checked, "r", locking=False)
    except OSError as err:
        raise OpenError(f"{url!r} is not a readable HDF5 file: {err}") from err
    checked.heaps.sizeof_size = h5file.id.get_create_plist().get_sizes()[1]
    return h5file


def _held_by_swmr_writer(path: str) -> bool:
    """Whether the superblock of the local file ``path`` says a SWMR writer has it open."""
    with open(path, "rb") as file:
        offset = 0
        # The superblock lies at 0 or after a user block of 512, 1024, 2048... bytes.
        while True:
            file.seek(offset)
            head = file.read(12)
            if len(head) < 12:
                return False
            if head[:8] == _SIGNATURE:
                flags = head[11]
                return (
                    head[8] >= 3 and flags & (_WRITING | _SWMR_WRITING) == _WRITING | _SWMR_WRITING
                )
            offset = 512 if offset == 0 else offset * 2
