"""A block-cached, seekable file over obstore, for parsers that read headers.

h5py and tifffile read a file through many small, scattered, often backward reads. Sent as-is
to object storage each would be a request. This reader fetches aligned blocks instead, keeps
them, fetches all the blocks one read needs with a single ``get_ranges`` call, and prefetches
the start of the file, where headers live, on open. A COG header then costs one request: the
ranged GET that fetches it also returns the object's size, last-modified time and ETag, so no
HEAD is needed to learn them. Local files are read with ``pread`` instead of through obstore
(:mod:`virtualstac.storage.local_objects`), with the metadata obstore would report.

Detecting a format and then parsing the file both need its first bytes. :func:`read_head`
fetches them for detection; inside a :func:`sharing_heads` block, readers that
:meth:`BlockCachedReader.from_url` opens later on the same object start from those bytes and
that metadata instead of fetching them again.
"""

from __future__ import annotations

import io
import itertools
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from obstore.exceptions import BaseError

from virtualstac.errors import ChunkReadError, SourceNotFoundError
from virtualstac.limits import check_metadata, get_limits
from virtualstac.storage import objects
from virtualstac.storage.failures import (
    describe,
    is_network_failure,
    network_failure,
    quiet,
    redact,
)
from virtualstac.storage.local_objects import read_local_blocks, read_local_head
from virtualstac.storage.objects import Store
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.stats import record_head, record_read

__all__ = ["BlockCachedReader", "ObjectHead", "read_document", "read_head", "sharing_heads"]

DEFAULT_BLOCK_SIZE = 64 * 1024
DEFAULT_PREFETCH = 64 * 1024
DEFAULT_MAX_BLOCKS = 1024


@dataclass(frozen=True)
class ObjectHead:
    """The first bytes of an object and its metadata, as one ranged GET returned them.

    ``data`` holds the first ``len(data)`` bytes (the whole object when it is shorter than the
    range asked for); ``meta`` is obstore's metadata of the object (``size``,
    ``last_modified``, ``e_tag``, ``version``), the same a HEAD request returns.
    """

    data: bytes
    meta: Mapping[str, Any]

    @property
    def size(self) -> int:
        """Size of the whole object in bytes."""
        return int(self.meta["size"])

    @property
    def complete(self) -> bool:
        """Whether ``data`` is the whole object."""
        return len(self.data) == self.size


# Heads fetched inside a sharing_heads() block, by (store identity, path); the store is kept
# with its head so that its identity cannot be reused by another store while the block runs.
_shared: ContextVar[dict[tuple[int, str], tuple[Store, ObjectHead]] | None] = ContextVar(
    "virtualstac_shared_heads", default=None
)


@contextmanager
def sharing_heads() -> Iterator[None]:
    """Let readers opened inside the block reuse the first bytes already fetched of an object.

    Within the block, :func:`read_head` and :meth:`BlockCachedReader.from_url` remember the
    head of each object they fetch, and a later reader of the same object (through the same
    registry) starts from it: detecting a file's format and parsing it then cost one request.
    The heads are forgotten when the block ends, so no stale bytes or stamps outlive one open.
    """
    token = _shared.set({})
    try:
        yield
    finally:
        _shared.reset(token)


def read_head(
    url: str, registry: ObjectStoreRegistry, nbytes: int = DEFAULT_PREFETCH
) -> ObjectHead | None:
    """The first ``nbytes`` of the object at ``url`` with its metadata, in one ranged GET.

    Returns None when there is no object at ``url`` (nothing, or a local directory). Inside a
    :func:`sharing_heads` block the head is remembered for readers opened on ``url`` later.
    """
    store, path = registry.resolve(url)
    shared = _shared.get()
    known = shared.get((id(store), path)) if shared is not None else None
    if known is not None and len(known[1].data) >= min(nbytes, known[1].size):
        return known[1]
    try:
        head, _ = _fetch_head(store, path, nbytes)
    except FileNotFoundError:
        return None
    except BaseError as err:
        raise network_failure(err, url) or ChunkReadError(
            f"cannot read {redact(url)!r}: {describe(err)}"
        ) from err
    if shared is not None:
        shared[(id(store), path)] = (store, head)
    return head


def read_document(url: str, registry: ObjectStoreRegistry, *, what: str) -> bytes:
    """The whole metadata document at ``url``; ``what`` names it when it does not exist.

    One ranged GET of at most ``metadata_bytes`` + 1 bytes (none inside a
    :func:`sharing_heads` block whose head of it holds them): a bigger document is refused
    without being read whole, whatever a server says its size is.
    """
    # The range is answered with the bytes there are: the whole document when it fits.
    head = read_head(url, registry, get_limits().metadata_bytes + 1)
    if head is None:
        raise SourceNotFoundError(f"{what} {redact(url)!r} does not exist")
    check_metadata(max(head.size, len(head.data)), source=url)
    return head.data


def _fetch_head(store: Store, path: str, nbytes: int) -> tuple[ObjectHead, int]:
    """One ranged GET of the first ``nbytes`` (a HEAD too for an empty object); the requests.

    A range past the end of the object is answered with the bytes there are (HTTP servers,
    S3 and local files alike), and the GET's metadata equals a HEAD's, so source stamps taken
    from it are the same. Raises FileNotFoundError when there is no object.
    """
    local = read_local_head(store, path, nbytes)
    if local is not None:
        record_read(1, len(local[0]))
        return ObjectHead(*local), 1
    try:
        result = objects.get(store, path, (0, nbytes))
        data = bytes(result.bytes())
    except FileNotFoundError:
        raise
    except BaseError as err:
        record_read(1, 0)
        if is_network_failure(err):  # a HEAD would wait for the same server again
            raise
        # Object stores refuse any range of an empty object; a HEAD tells whether it is empty.
        # Otherwise the GET's error is the one to report (a 403 refuses the HEAD as well).
        record_head()
        try:
            meta: dict[str, Any] | None = objects.head(store, path)
        except BaseError:
            meta = None
        if meta is None or meta["size"]:
            raise
        return ObjectHead(b"", meta), 2
    record_read(1, len(data))
    return ObjectHead(data, dict(result.meta)), 1


class BlockCachedReader(io.RawIOBase):
    """Read-only, seekable file object over one object in an obstore store.

    Parameters
    ----------
    store, path
        The object to read.
    size
        The object's size in bytes; when neither it nor ``head`` is given, the prefetch's
        ranged GET tells it (or, with ``prefetch=0``, a HEAD request).
    block_size
        Reads are rounded out to whole blocks of this many bytes.
    prefetch
        Bytes fetched from the start of the object on open (0 to disable).
    max_blocks
        Blocks kept in memory; the least recently used are dropped beyond this.
    head
        The object's first bytes and metadata, already fetched (see :func:`read_head`): the
        reader starts from them, and fetches only what the prefetch asks for beyond them.

    Attributes
    ----------
    requests
        Number of requests sent (the HEAD included).
    bytes_fetched
        Number of bytes received.
    meta
        The object's metadata (``size``, ``last_modified``, ``e_tag``, ``version``) as the store
        reported it when the reader opened, or None if the size was given.
    head
        The first bytes and metadata the reader started from, or None if the size was given.
    """

    def __init__(
        self,
        store: Store,
        path: str,
        *,
        size: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        prefetch: int = DEFAULT_PREFETCH,
        max_blocks: int = DEFAULT_MAX_BLOCKS,
        name: str | None = None,
        head: ObjectHead | None = None,
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
        self.head: ObjectHead | None = head
        if size is None and head is None and prefetch > 0:
            self.head = self._fetch_head(-(-prefetch // block_size) * block_size)
        if self.head is not None:
            self._start_from(self.head)
            size = self.head.size
        elif size is None:
            size = self._head_size()
        self._size = int(size)
        if prefetch > 0 and self._size:
            self._ensure(0, min(prefetch, self._size))

    def _fetch_head(self, nbytes: int) -> ObjectHead:
        """Learn the metadata and read the first bytes with one ranged GET (no HEAD)."""
        try:
            head, requests = _fetch_head(self._store, self._path, nbytes)
        except FileNotFoundError as err:
            raise SourceNotFoundError(f"{redact(self.name)!r} does not exist") from quiet(err)
        except BaseError as err:
            raise network_failure(err, self.name) or ChunkReadError(
                f"could not read the start of {redact(self.name)!r}: {describe(err)}"
            ) from err
        self.requests += requests
        self.bytes_fetched += len(head.data)
        return head

    def _start_from(self, head: ObjectHead) -> None:
        """Cache the whole blocks of ``head`` (and its last, short block at the object's end)."""
        self.meta = dict(head.meta)
        data = head.data
        for block, start in enumerate(range(0, len(data), self._block_size)):
            piece = data[start : start + self._block_size]
            if len(piece) == self._block_size or start + len(piece) == head.size:
                self._blocks[block] = piece

    @classmethod
    def from_url(cls, url: str, registry: ObjectStoreRegistry, **options: Any) -> BlockCachedReader:
        """Open ``url`` through ``registry`` (which must allow it).

        Inside a :func:`sharing_heads` block, a reader of an object whose head was already
        fetched starts from it, and the head this reader fetches is kept for later readers.
        """
        store, path = registry.resolve(url)
        shared = _shared.get()
        if shared is None:
            return cls(store, path, name=url, **options)
        known = shared.get((id(store), path))
        reader = cls(store, path, name=url, head=known[1] if known else None, **options)
        if known is None and reader.head is not None:
            shared[(id(store), path)] = (store, reader.head)
        return reader

    @property
    def size(self) -> int:
        """Size of the object in bytes."""
        return self._size

    def _head_size(self) -> int:
        self.requests += 1
        try:
            meta: dict[str, Any] = objects.head(self._store, self._path)
        except FileNotFoundError as err:
            raise SourceNotFoundError(f"{redact(self.name)!r} does not exist") from quiet(err)
        except BaseError as err:
            raise network_failure(err, self.name) or ChunkReadError(
                f"could not look up the size of {redact(self.name)!r}: {describe(err)}"
            ) from err
        self.meta = meta
        record_head()
        size: int = meta["size"]
        return size

    def _ensure(self, start: int, end: int) -> list[bytes]:
        """The blocks covering ``[start, end)``, fetching those not cached in one request.

        They are returned rather than looked up in the cache afterwards: a read longer than the
        cache (a TIFF's millions of tile offsets) evicts its own first blocks.
        """
        first, last = start // self._block_size, (end - 1) // self._block_size
        blocks = {b: self._blocks[b] for b in range(first, last + 1) if b in self._blocks}
        missing = [b for b in range(first, last + 1) if b not in blocks]
        if missing:
            starts = [b * self._block_size for b in missing]
            ends = [min((b + 1) * self._block_size, self._size) for b in missing]
            buffers: list[Any] | None = read_local_blocks(self._store, self._path, starts, ends)
            try:
                if buffers is None:
                    buffers = objects.get_ranges(self._store, self._path, starts, ends, coalesce=0)
            except FileNotFoundError as err:
                raise ChunkReadError(f"{redact(self.name)!r} does not exist") from quiet(err)
            except BaseError as err:
                raise network_failure(err, self.name) or ChunkReadError(
                    f"could not read bytes {starts[0]}-{ends[-1]} of {redact(self.name)!r}; it "
                    f"may be shorter than its reported size {self._size}: {describe(err)}"
                ) from err
            runs = _count_runs(missing)
            self.requests += runs
            record_read(runs, sum(ends) - sum(starts))
            for block, s, e, buffer in zip(missing, starts, ends, buffers, strict=True):
                data = buffer if isinstance(buffer, bytes) else bytes(buffer)
                if len(data) != e - s:
                    raise ChunkReadError(
                        f"{redact(self.name)!r} is shorter than its reported size {self._size}"
                    )
                self.bytes_fetched += len(data)
                self._blocks[block] = blocks[block] = data
        for block in range(first, last + 1):
            self._blocks.move_to_end(block)
        while len(self._blocks) > self._max_blocks:
            self._blocks.popitem(last=False)
        return [blocks[b] for b in range(first, last + 1)]

    def read_range(self, start: int, end: int) -> bytes:
        """Return bytes ``[start, end)`` of the object (clamped to its size)."""
        end = min(end, self._size)
        if start >= end:
            return b""
        data = b"".join(self._ensure(start, end))
        offset = start // self._block_size * self._block_size
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
