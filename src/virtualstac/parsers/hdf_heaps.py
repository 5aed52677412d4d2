"""HDF5 global heap collections checked before HDF5 decodes them.

A global heap collection (a ``GCOL`` block) holds a file's variable-length strings and
sequences. HDF5 decodes one by walking its objects, each header saying how far the next one
lies; an object of size zero where the free space should begin does not move the walk, and
HDF5 (1.14, as h5py ships it) then loops for ever, in C code that Python cannot interrupt.
A single damaged byte in an attribute's heap is enough.

:class:`CheckedLocalFile` (a local file) and :class:`HeapCheckingFile` (over any other file
object) are the file objects the HDF5 parser hands h5py: every read that starts a collection
is checked, walking it as HDF5 will, before HDF5 sees the bytes; a collection that would
stall the walk raises :class:`~virtualstac.errors.CorruptFileError` naming the file and the
collection's offset, which h5py passes on.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import IO, Any

from virtualstac.errors import CorruptFileError
from virtualstac.limits import check_metadata
from virtualstac.storage.failures import redact
from virtualstac.storage.reader import BlockCachedReader

__all__ = ["CheckedLocalFile", "HeapCheckingFile", "HeapChecks", "stalled_object"]

_MAGIC = b"GCOL"


def stalled_object(collection: bytes, sizeof_size: int = 8) -> int | None:
    """The offset of the object at which HDF5's walk of ``collection`` (a whole global heap
    collection, from its ``GCOL``) would stop moving, or None if the walk ends.

    The walk is HDF5's: after the collection header (magic, version, 3 reserved bytes and the
    size), each object header holds a 2-byte index, a 2-byte reference count, 4 reserved bytes
    and the object's size; the next object begins after the header and the size rounded up to
    8 bytes, or, for the free space (index 0), after the size alone.
    """
    header = 8 + sizeof_size
    end = len(collection)
    position = header
    while position + header <= end:
        index = int.from_bytes(collection[position : position + 2], "little")
        size = int.from_bytes(collection[position + 8 : position + header], "little")
        step = header + -(-size // 8) * 8 if index else size
        # An object longer than its collection is damage too: HDF5's pointer would wrap.
        if step == 0 or step > end:
            return position
        position += step
    return None


class HeapChecks:
    """The collections of one file checked so far, and how to check another."""

    def __init__(self, url: str, read_at: Callable[[int, int], bytes]) -> None:
        """Check the collections of the file ``url``, whose bytes ``read_at(start, size)``
        reads."""
        self._url = url
        self._read_at = read_at
        self._checked: set[int] = set()
        #: The superblock's size of lengths, which HDF5 tells once the file is open.
        self.sizeof_size = 8

    def after_read(self, start: int, buffer: Any, count: int) -> None:
        """Check the collection that the ``count`` bytes read at ``start`` begin, if any.

        Raises
        ------
        CorruptFileError
            If its walk would not end.
        """
        # Most reads are of other metadata: one byte tells.
        if count < 4 or buffer[0] != _MAGIC[0] or bytes(memoryview(buffer)[:4]) != _MAGIC:
            return
        if start in self._checked:
            return
        self._check(start)
        self._checked.add(start)

    def _check(self, start: int) -> None:
        header = self._read_at(start, 8 + self.sizeof_size)
        if len(header) < 8 + self.sizeof_size or header[4] != 1:
            return  # HDF5 refuses what it cannot read as a collection
        size = int.from_bytes(header[8:], "little")
        # Metadata, which HDF5 would read whole: bounded as every file's metadata is.
        check_metadata(
            size,
            source=redact(self._url),
            what=f"the global heap collection at byte {start} has {size:,} bytes",
        )
        stalled = stalled_object(self._read_at(start, size), self.sizeof_size)
        if stalled is not None:
            raise CorruptFileError(
                f"{redact(self._url)} is damaged: the global heap collection at byte {start} "
                f"(variable-length strings or sequences) has an object of impossible size at "
                f"byte {start + stalled}, on which HDF5 would loop for ever"
            )


class CheckedLocalFile(io.FileIO):
    """A local file opened for reading whose reads of global heap collections are checked
    (:class:`HeapChecks`); h5py calls its ``seek`` and ``readinto``, the second in Python
    only, since every HDF5 read of a small file's metadata passes here."""

    def __init__(self, path: str, url: str) -> None:
        """Open ``path``; errors name ``url``."""
        super().__init__(path, "rb")
        self.heaps = HeapChecks(url, lambda start, size: os.pread(self.fileno(), size, start))

    def readinto(self, buffer: Any) -> int:
        """Read into ``buffer``, checking a global heap collection that starts there."""
        start = self.tell()
        count = super().readinto(buffer) or 0
        self.heaps.after_read(start, buffer, count)
        return count


class HeapCheckingFile(io.RawIOBase):
    """A read-only file object over ``file`` (a seekable binary file object: a
    :class:`~virtualstac.storage.reader.BlockCachedReader`, ``io.BytesIO``...) whose reads of
    global heap collections are checked (:class:`HeapChecks`)."""

    def __init__(self, file: IO[bytes] | BlockCachedReader, url: str) -> None:
        """Read through ``file``; errors name ``url``."""
        super().__init__()
        self._file = file
        self.heaps = HeapChecks(url, self._read_at)

    def readable(self) -> bool:
        """Always readable."""
        return True

    def seekable(self) -> bool:
        """Always seekable."""
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move to ``offset`` (from ``whence``)."""
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        """The position in the file."""
        return self._file.tell()

    def readinto(self, buffer: Any) -> int:
        """Read into ``buffer``, checking a global heap collection that starts there."""
        start = self._file.tell()
        if isinstance(self._file, io.RawIOBase | io.BufferedIOBase):
            count = self._file.readinto(buffer) or 0
        else:  # a file object with read() only
            data = self._file.read(len(memoryview(buffer)))
            count = len(data)
            memoryview(buffer).cast("B")[:count] = data
        self.heaps.after_read(start, buffer, count)
        return count

    def _read_at(self, start: int, size: int) -> bytes:
        position = self._file.tell()
        try:
            self._file.seek(start)
            return self._file.read(size) or b""
        finally:
            self._file.seek(position)
