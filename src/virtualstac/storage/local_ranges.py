"""Byte ranges of local files read with ``pread``, nearby ranges in one read.

A chunk of a local file costs obstore tens of microseconds (a future, a Rust call, a bytes
object, an event-loop hop), more than the system call that copies it from the page cache.
Ranges read here are plain ``os.preadv`` calls (which release the GIL) into a buffer each
thread keeps, nearby ranges in one call, so the threads decoding the chunks of a read also
read them, on every core.
A file shorter than a range, or gone, raises :class:`~virtualstac.errors.ChunkReadError`
naming the chunk and the file.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from obstore.store import LocalStore

from virtualstac.errors import ChunkReadError
from virtualstac.storage.failures import describe, redact
from virtualstac.storage.objects import Store
from virtualstac.storage.stats import record_read

__all__ = [
    "LocalRange",
    "LocalRun",
    "local_file",
    "local_files",
    "read_local_range_into",
    "read_local_ranges",
    "short_read_error",
]

# Ranges of one file at most this many bytes apart are read with one call while the read stays
# within RUN_BYTES: reading a small gap costs less than another system call. A run holds about
# a decoding task's chunks (tens of chunks of tens of kB): each call releases and takes back the
# GIL, and with several decoding threads taking it back costs more than the read itself
# (runs of 2 MiB read 15-20% faster than runs of 64 KiB, zlib+shuffle and uncompressed alike, on
# 2 cores). The buffer is the thread's own, kept between reads: fresh memory would cost a page
# fault per 4 KiB.
DEFAULT_GAP = 4096
RUN_BYTES = 2 * 1024 * 1024
# A thread keeps a buffer for the largest range it read, up to this size.
KEPT_BYTES = 8 * 1024 * 1024


class LocalRange(NamedTuple):
    """The bytes ``[start, end)`` of the local file ``path`` (``url``) that chunk ``key``
    references."""

    # A named tuple: a read makes one per chunk, and a frozen dataclass costs four times as
    # much to make.

    path: str
    url: str
    start: int
    end: int
    key: str


@dataclass(frozen=True, slots=True)
class LocalRun:
    """Ranges of one file read with one call: ``(position in the ranges read, bytes)`` of each,
    and the bytes read, which begin at offset ``start`` of the file."""

    views: list[tuple[int, memoryview]]
    start: int
    buffer: memoryview

    def __iter__(self) -> Iterator[tuple[int, memoryview]]:
        return iter(self.views)

    def __len__(self) -> int:
        return len(self.views)

    def span(self, start: int, end: int) -> memoryview:
        """The bytes ``[start, end)`` of the file, which lie within the run."""
        return self.buffer[start - self.start : end - self.start]


def local_file(store: Store, path: str) -> str | None:
    """The file system path of object ``path`` of ``store``; None unless it is a LocalStore."""
    if not isinstance(store, LocalStore):
        return None
    return os.path.join(str(store.prefix) if store.prefix is not None else os.sep, path)


def short_read_error(key: str, url: str, start: int, end: int, available: int) -> ChunkReadError:
    """The error of chunk ``key``, bytes ``[start, end)`` of ``url``, of which only
    ``available`` bytes exist."""
    return ChunkReadError(
        f"reading chunk {key!r} from {redact(url)!r} failed: it references bytes "
        f"{start}-{end}, but only {available} of {end - start} bytes exist: the reference is "
        "wrong, or the file was cut short after it was referenced"
    )


def read_local_ranges(
    ranges: Sequence[LocalRange], gap: int = DEFAULT_GAP, run_bytes: int = RUN_BYTES
) -> Generator[LocalRun]:
    """Read ``ranges`` a run at a time: each run is the ranges of one file at most ``gap``
    bytes apart spanning at most ``run_bytes`` (or one range, if longer), read with one call,
    in the order of the file; iterating a run yields ``(position in ranges, bytes)``.

    The bytes are views of this thread's buffer, which the next run overwrites: use them before
    asking for the next run.
    """
    order = sorted(range(len(ranges)), key=lambda i: (ranges[i].path, ranges[i].start))
    descriptors: dict[str, int] = {}
    try:
        run: list[int] = []
        run_end = 0
        for index in order:
            item = ranges[index]
            if run and (
                item.path != ranges[run[0]].path
                or item.start > run_end + gap
                or max(run_end, item.end) - ranges[run[0]].start > run_bytes
            ):
                yield _read_run(ranges, run, run_end, descriptors)
                run = []
            run_end = max(run_end, item.end) if run else item.end
            run.append(index)
        if run:
            yield _read_run(ranges, run, run_end, descriptors)
    finally:
        for descriptor in descriptors.values():
            os.close(descriptor)


_scratch = threading.local()


def _thread_buffer(nbytes: int) -> memoryview:
    # Fresh memory costs a page fault per 4 KiB page when first written, which on virtual
    # machines costs about as much as the read: each thread keeps its buffer, unless a chunk
    # too large to keep around needs a larger one.
    buffer: np.ndarray[Any, np.dtype[np.uint8]] | None = getattr(_scratch, "buffer", None)
    if buffer is None or buffer.nbytes < nbytes:
        buffer = np.empty(max(nbytes, RUN_BYTES), dtype=np.uint8)
        if nbytes <= KEPT_BYTES:
            _scratch.buffer = buffer
    return memoryview(buffer)[:nbytes]


def _open(item: LocalRange, descriptors: dict[str, int]) -> int:
    descriptor = descriptors.get(item.path)
    if descriptor is None:
        try:
            descriptor = os.open(item.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError as err:
            raise ChunkReadError(
                f"chunk {item.key!r} references {redact(item.url)!r}, which does not exist "
                f"({describe(err)})"
            ) from err
        except OSError as err:
            raise ChunkReadError(
                f"reading chunk {item.key!r} from {redact(item.url)!r} failed ({describe(err)})"
            ) from err
        descriptors[item.path] = descriptor
    return descriptor


def _read_run(
    ranges: Sequence[LocalRange], run: list[int], end: int, descriptors: dict[str, int]
) -> LocalRun:
    first = ranges[run[0]]
    start = first.start
    descriptor = _open(first, descriptors)
    # A reference may claim more bytes than the file holds (a damaged or hostile one): only
    # what exists is allocated and read, and the ranges past it are named below.
    end = max(start, min(end, _file_size(descriptor, first)))
    buffer = _thread_buffer(end - start)
    filled = _read_fully(descriptor, buffer, first) if end > start else 0
    views = []
    for index in run:
        item = ranges[index]
        if item.end - start > filled:
            raise short_read_error(
                item.key, item.url, item.start, item.end, max(0, start + filled - item.start)
            )
        views.append((index, buffer[item.start - start : item.end - start]))
    return LocalRun(views, start, buffer[:filled])


def _file_size(descriptor: int, item: LocalRange) -> int:
    try:
        return os.fstat(descriptor).st_size
    except OSError as err:
        raise ChunkReadError(
            f"reading chunk {item.key!r} from {redact(item.url)!r} failed ({describe(err)})"
        ) from err


@contextmanager
def local_files() -> Iterator[dict[str, int]]:
    """Descriptors of the local files that reads into place share (:func:`read_local_range_into`),
    each file opened once, all closed at the end: opening and closing a file per chunk cost
    more than reading a small chunk."""
    descriptors: dict[str, int] = {}
    try:
        yield descriptors
    finally:
        for descriptor in descriptors.values():
            os.close(descriptor)


def read_local_range_into(
    item: LocalRange, destination: memoryview, files: dict[str, int] | None = None
) -> None:
    """Read the bytes of ``item`` straight into ``destination`` (as long as the range), with
    the descriptors of ``files`` (:func:`local_files`) if given."""
    if files is None:
        with local_files() as own:
            filled = _read_fully(_open(item, own), destination, item)
    else:
        filled = _read_fully(_open(item, files), destination, item)
    if filled < item.end - item.start:
        raise short_read_error(item.key, item.url, item.start, item.end, filled)


def _read_fully(descriptor: int, buffer: memoryview, first: LocalRange) -> int:
    """Read into ``buffer`` from ``first.start`` until it is full or the file ends; the bytes
    read."""
    try:
        filled = os.preadv(descriptor, [buffer], first.start)
        while 0 < filled < len(buffer):
            # A read may return fewer bytes than asked before the end of the file.
            more = os.preadv(descriptor, [buffer[filled:]], first.start + filled)
            if not more:
                break
            filled += more
    except OSError as err:
        raise ChunkReadError(
            f"reading chunk {first.key!r} from {redact(first.url)!r} failed ({describe(err)})"
        ) from err
    record_read(1, filled)
    return filled
