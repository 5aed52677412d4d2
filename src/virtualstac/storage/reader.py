"""A block-cached, seekable file over obstore, for parsers that read headers.

h5py and tifffile read a file through many small, scattered, often backward reads. Sent as-is
to object storage each would be a request. This reader fetches aligned blocks instead, keeps
them, fetches all the blocks one read needs with a single ``get_ranges`` call, and prefetches
the start of the file, where headers live, on open. A COG header then costs one request.
"""

from __future__ import annotations

import io
import itertools
from collections import OrderedDict
from typing import Any

import obstore
from obstore.exceptions import BaseError
from obstore.store import ObjectStore

from virtualstac.errors import ChunkReadError
from virtualstac.storage.failures import describe, network_failure, quiet, redact
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.stats import record_read

__all__ = ["BlockCachedReader"]

DEFAULT_BLOCK_SIZE = 64 * 1024
DEFAULT_PREFETCH = 64 * 1024
DEFAULT_MAX_BLOCKS = 1024


class BlockCachedReader(io.RawIOBase):
    """Read-only, seekable file object over one object in an obstore store.

    Parameters
    ----------
    store, path
        The object to read.
    size
        The object's size in bytes; looked up with a HEAD request when not given.
    block_size
        Reads are rounded out to whole blocks of this many bytes.
    prefetch
        Bytes fetched from the start of the object on open (0 to disable).
    max_blocks
        Blocks kept in memory; the least recently used are dropped beyond this.

    Attributes
    ----------
    requests
        Number of requests sent (the HEAD included).
    bytes_fetched
        Number of bytes received.
    meta
        The object's metadata (``size``, ``last_modified``, ``e_tag``, ``version``) as the store
        reported it when the reader opened, or None if the size was given.
    """

    def __init__(
        self,
        store: ObjectStore,
        path: str,
        *,
        size: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        prefetch: int = DEFAULT_PREFETCH,
        max_blocks: int = DEFAULT_MAX_BLOCKS,
        name: str | None = None,
    ) -> None:
        super().__init__()
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        self._store = store
        self._path = path
        self.name = name or path
        self._block_size = block_size
        self._max_blocks = max_blocks
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._position = 0
        self.requests = 0
        self.bytes_fetched = 0
        self.meta: dict[str, Any] | None = None
        if size is None and prefetch > 0:
            self._open_with_prefetch(-(-prefetch // block_size) * block_size)
            return
        if size is None:
            size = self._head_size()
        self._size = int(size)
        if prefetch > 0 and self._size:
            self._ensure(0, min(prefetch, self._size))

    def _open_with_prefetch(self, prefetch: int) -> None:
        """Learn the size and read the first blocks with one ranged GET (no HEAD)."""
        self.requests += 1
        try:
            result = obstore.get(self._store, self._path, options={"range": (0, prefetch)})
            data = bytes(result.bytes())
        except FileNotFoundError as err:
            raise ChunkReadError(f"{redact(self.name)!r} does not exist") from quiet(err)
        except BaseError as err:
            failure = network_failure(err, self.name)
            if failure is not None:
                raise failure from err
            # Object stores refuse any range of an empty object; learn that from a HEAD.
            self._size = self._head_size()
            if self._size:
                raise ChunkReadError(
                    f"could not read the start of {redact(self.name)!r}: {describe(err)}"
                ) from err
            return
        self.meta = dict(result.meta)
        self._size = int(self.meta["size"])
        self.bytes_fetched += len(data)
        record_read(1, len(data))
        for block, start in enumerate(range(0, len(data), self._block_size)):
            self._blocks[block] = data[start : start + self._block_size]

    @classmethod
    def from_url(cls, url: str, registry: ObjectStoreRegistry, **options: Any) -> BlockCachedReader:
        """Open ``url`` through ``registry`` (which must allow it)."""
        store, path = registry.resolve(url)
        return cls(store, path, name=url, **options)

    @property
    def size(self) -> int:
        """Size of the object in bytes."""
        return self._size

    def _head_size(self) -> int:
        self.requests += 1
        try:
            meta: dict[str, Any] = dict(obstore.head(self._store, self._path))
        except FileNotFoundError as err:
            raise ChunkReadError(f"{redact(self.name)!r} does not exist") from quiet(err)
        except BaseError as err:
            raise network_failure(err, self.name) or ChunkReadError(
                f"could not look up the size of {redact(self.name)!r}: {describe(err)}"
            ) from err
        self.meta = meta
        record_read(1, 0)
        size: int = meta["size"]
        return size

    def _ensure(self, start: int, end: int) -> None:
        """Make sure the blocks covering ``[start, end)`` are cached, in one request."""
        first, last = start // self._block_size, (end - 1) // self._block_size
        missing = [b for b in range(first, last + 1) if b not in self._blocks]
        if missing:
            starts = [b * self._block_size for b in missing]
            ends = [min((b + 1) * self._block_size, self._size) for b in missing]
            try:
                buffers = obstore.get_ranges(
                    self._store, self._path, starts=starts, ends=ends, coalesce=0
                )
            except FileNotFoundError as err:
                raise ChunkReadError(f"{redact(self.name)!r} does not exist") from quiet(err)
            except BaseError as err:
                raise network_failure(err, self.name) or ChunkReadError(
                    f"could not read bytes {starts[0]}-{ends[-1]} of {redact(self.name)!r}; it may "
                    f"be shorter than its reported size {self._size}: {describe(err)}"
                ) from err
            runs = _count_runs(missing)
            self.requests += runs
            record_read(runs, sum(ends) - sum(starts))
            for block, s, e, buffer in zip(missing, starts, ends, buffers, strict=True):
                data = bytes(buffer)
                if len(data) != e - s:
                    raise ChunkReadError(
                        f"{redact(self.name)!r} is shorter than its reported size {self._size}"
                    )
                self.bytes_fetched += len(data)
                self._blocks[block] = data
        for block in range(first, last + 1):
            self._blocks.move_to_end(block)
        while len(self._blocks) > self._max_blocks:
            self._blocks.popitem(last=False)

    def read_range(self, start: int, end: int) -> bytes:
        """Return bytes ``[start, end)`` of the object (clamped to its size)."""
        end = min(end, self._size)
        if start >= end:
            return b""
        self._ensure(start, end)
        first, last = start // self._block_size, (end - 1) // self._block_size
        data = b"".join(self._blocks[b] for b in range(first, last + 1))
        offset = first * self._block_size
        return data[start - offset : end - offset]

    # -- io.RawIOBase ---------------------------------------------------------------------

    def readable(self) -> bool:
        """Always True."""
        return True

    def seekable(self) -> bool:
        """Always True."""
        return True

    def tell(self) -> int:
        """Current position."""
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move to ``offset`` relative to the start, the current position or the end."""
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._position + offset
        elif whence == io.SEEK_END:
            position = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if position < 0:
            raise ValueError("negative seek position")
        self._position = position
        return position

    def read(self, size: int | None = -1) -> bytes:
        """Read up to ``size`` bytes (all remaining bytes if negative or None)."""
        end = self._size if size is None or size < 0 else self._position + size
        data = self.read_range(self._position, end)
        self._position += len(data)
        return data

    def readall(self) -> bytes:
        """Read to the end of the object."""
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        """Read into a writable buffer; return the number of bytes read."""
        view = memoryview(buffer).cast("B")
        start = self._position
        end = min(start + len(view), self._size)
        block = start // self._block_size
        cached = self._blocks.get(block) if start < end else None
        if cached is not None and (end - 1) // self._block_size == block:
            # h5py reads its metadata a few bytes at a time, mostly from one cached block.
            offset = block * self._block_size
            view[: end - start] = cached[start - offset : end - offset]
            self._blocks.move_to_end(block)
            self._position = end
            return end - start
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)


def _count_runs(blocks: list[int]) -> int:
    """Number of contiguous runs in a sorted list of block numbers (one request each)."""
    return 1 + sum(1 for a, b in itertools.pairwise(blocks) if b != a + 1)
