"""Reading many chunks at once: fetch them in waves, decode them on a pool of threads.

zarr's batched pipeline fetches one chunk per coroutine and decodes each codec of each chunk in
its own ``asyncio.to_thread`` hop, so a read of thousands of small chunks spends more time
scheduling than decoding, and a :class:`~virtualstac.manifests.store.ManifestStore` sees its
requests a few at a time. Here the chunks of one read are fetched in waves (a ManifestStore
gets a whole wave in one call, one request per source object), and each chunk is decoded and
copied into the output by tasks of a few chunks each, which one job per thread of a pool
takes in turn (one wake-up of the event loop per thread, not per task), while the next wave
is being fetched. The codecs that dominate reads of archives (zlib, imagecodecs' decoders,
numpy's copies) release the GIL, so the pool uses every core; codecs that hold it still overlap
with fetching.
Chains of the ``bytes`` codec and bytes-to-bytes codecs are decoded from the fetched bytes
straight into the output (:mod:`virtualstac.manifests.direct_decode`), skipping zarr's
per-chunk buffers, which cost more than decoding a small chunk; chunks side by side in the
output are written a strip at a time (:mod:`virtualstac.manifests.planar`): shuffled ones one
copy per byte plane, uncompressed ones that also follow each other in their file with one copy.
Their chunks in local files are not fetched at all: the pool threads read them with ``pread``
(:mod:`virtualstac.storage.local_ranges`), a task's nearby chunks with one call into a buffer
each thread keeps, and decode them from there; obstore's per-chunk cost
(futures, a bytes object per range) was more than the read. When every chunk of a read is in a
local file, the read needs no waves (nothing is held before it is decoded): its chunks are
located at once, before the pool starts, since locating a wave while the pool decodes the last
competed with it for the GIL. A ManifestStore's single-chunk reads (dask's, one chunk per task)
take this path too.

A chunk of a ManifestStore or of a :class:`ChunkBytesSource` that fails to decode raises
:class:`~virtualstac.errors.ChunkDecodeError` naming that chunk (and the source's store); the
chunks of other stores raise the codec's own exception, as with zarr's pipeline.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from typing import Any, Protocol, runtime_checkable

import numpy as np
import zarr
from zarr.abc.codec import GetResult
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer, NDBuffer
from zarr.core.chunk_utils import ChunkTransform, decode_and_scatter_chunk
from zarr.core.indexing import SelectorTuple
from zarr.storage import StorePath

from virtualstac.errors import ChunkDecodeError, VirtualStacError
from virtualstac.manifests.direct_decode import DirectDecoder
from virtualstac.manifests.planar import copy_strip, decode_strip, strips
from virtualstac.manifests.store import ManifestStore
from virtualstac.storage.failures import describe
from virtualstac.storage.local_ranges import (
    LocalRange,
    LocalRun,
    local_files,
    read_local_range_into,
    read_local_ranges,
)

__all__ = [
    "ChunkBytesSource",
    "can_read_concurrently",
    "decode_pool",
    "read_concurrently",
    "read_in_this_thread",
]

type ReadItem = tuple[Any, ArraySpec, SelectorTuple, SelectorTuple, bool]

_PRESENT = GetResult(status="present")

# A wave holds about this many decoded bytes: enough chunks to fill a request and keep the
# pool busy, few enough that two waves in flight stay small beside the output array.
WAVE_BYTES = 16 * 1024 * 1024
MAX_WAVE_CHUNKS = 1024

_pool: ThreadPoolExecutor | None = None
_workers = 1
_pool_lock = threading.Lock()


@runtime_checkable
class ChunkBytesSource(Protocol):
    """A store other than a ManifestStore that reads many chunks' bytes in one call (a
    published Icechunk store); None where a chunk is missing."""

    async def get_chunk_bytes(
        self, keys: Sequence[str], *, local_ranges: bool = False
    ) -> list[Any]:
        """The bytes of the chunks ``keys``, bytes-like or zarr ``Buffer``s; with
        ``local_ranges``, chunks of local files as their
        :class:`~virtualstac.storage.local_ranges.LocalRange`."""

    async def local_chunk_ranges(self, keys: Sequence[str]) -> list[Any] | None:
        """The chunks ``keys`` as ``get_chunk_bytes(keys, local_ranges=True)`` gives them,
        reading nothing; None if one of them is not in a local file."""

    def name_failure(self, error: VirtualStacError) -> VirtualStacError:
        """``error``, raised reading or decoding a chunk of this store, naming the store."""


def decode_pool() -> ThreadPoolExecutor:
    """The threads chunks are decoded on: zarr's ``threading.max_workers``, else one per CPU."""
    global _pool, _workers
    with _pool_lock:
        if _pool is None:
            _workers = int(zarr.config.get("threading.max_workers", None) or os.cpu_count() or 1)
            _pool = ThreadPoolExecutor(_workers, thread_name_prefix="virtualstac-decode")
        return _pool


def _forget_pool_after_fork() -> None:
    # A forked child inherits the pool object but none of its threads.
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def can_read_concurrently(batch: Sequence[ReadItem], transform: ChunkTransform | None) -> bool:
    """Whether ``batch`` can take this path: chunks of one store, every codec synchronous
    (``transform``); several chunks, or one of a ManifestStore (which this path reads
    without zarr's per-chunk buffers, as dask reads one chunk per task)."""
    if transform is None or not batch:
        return False
    first = batch[0][0]
    if not isinstance(first, StorePath):
        return False
    if len(batch) == 1:
        return isinstance(first.store, ManifestStore)
    return all(
        isinstance(getter, StorePath) and getter.store is first.store for getter, *_ in batch
    )


def read_in_this_thread(
    batch: Sequence[ReadItem], out: NDBuffer, transform: ChunkTransform
) -> tuple[GetResult, ...] | None:
    """Read the chunks of ``batch`` in the calling thread when they are all in local files of
    a ManifestStore and decode straight into a numpy ``out``; None (having read nothing)
    otherwise.

    For reads of a chunk or two (a dask task's): a hop to zarr's event loop and another to the
    decoding pool and back cost more than reading a small chunk, and a dask worker's threads
    already use the cores.
    """
    store = batch[0][0].store
    target = out.as_ndarray_like()
    if not isinstance(store, ManifestStore) or not isinstance(target, np.ndarray):
        return None
    direct = DirectDecoder.for_chain(transform, batch[0][1])
    if direct is None:
        return None
    located = store.local_chunk_ranges([getter.path for getter, *_ in batch])
    if located is None:
        return None
    chunks = list(zip(located, batch, strict=True))
    return tuple(_decode_some(chunks, out, (), direct, store.describe_chunk))


async def read_concurrently(
    batch: Sequence[ReadItem],
    out: NDBuffer,
    drop_axes: tuple[int, ...],
    transform: ChunkTransform,
) -> tuple[GetResult, ...]:
    """Fetch and decode every chunk of ``batch`` into ``out``; see the module's description."""
    store = batch[0][0].store
    spec = batch[0][1]
    chunk_nbytes = max(1, spec.dtype.to_native_dtype().itemsize * math.prod(spec.shape))
    per_wave = max(1, min(MAX_WAVE_CHUNKS, WAVE_BYTES // chunk_nbytes))
    loop = asyncio.get_running_loop()
    pool = decode_pool()
    describe_chunk: Callable[[str], str] | None = None
    if isinstance(store, ManifestStore):
        describe_chunk = store.describe_chunk
    elif isinstance(store, ChunkBytesSource):
        describe_chunk = _chunk_key  # the store names itself (_decoded)
    direct = (
        DirectDecoder.for_chain(transform, spec)
        if isinstance(out.as_ndarray_like(), np.ndarray)
        else None
    )
    # Several chunks per task: a hop to the pool costs about as much as copying a small chunk.
    per_task = max(1, per_wave // (4 * _workers))
    waves: list[_Wave] = []
    try:
        located = await _locate_local(store, batch, direct) if len(batch) > per_wave else None
        if located is not None:
            per_wave = len(batch)
        for start in range(0, len(batch), per_wave):
            wave = batch[start : start + per_wave]
            # At most two waves decode while the next is fetched: memory stays bounded.
            if len(waves) >= 2:
                await _decoded(store, waves[-2].futures)
            fetched = located if located is not None else await _fetch(store, wave, direct)
            chunks = list(zip(fetched, wave, strict=True))
            tasks = [chunks[first : first + per_task] for first in range(0, len(chunks), per_task)]
            waves.append(
                _Wave.submit(
                    pool, loop, tasks, (out, drop_axes, direct or transform, describe_chunk)
                )
            )
        results: list[GetResult] = []
        for decoding in waves:
            await _decoded(store, decoding.futures)
            for done in decoding.results:
                results.extend(done or ())
        return tuple(results)
    finally:
        # On a failure, the chunks already submitted (two waves at most) finish before the
        # error reaches the caller, so nothing writes into ``out`` afterwards.
        pending = [future for wave in waves for future in wave.futures if not future.done()]
        await asyncio.gather(*pending, return_exceptions=True)


class _Wave:
    """The decoding tasks of one wave, drained by one job per pool thread.

    One job per thread rather than one per task: every job that ends wakes the event loop
    from its thread, and each wake-up is a hand-over of the GIL, which costs as much as
    copying a small task's chunks while the other threads wait for it.
    """

    def __init__(self, tasks: Sequence[Sequence[tuple[Any, ReadItem]]], decoding: tuple[Any, ...]):
        self.tasks = tasks
        self.results: list[list[GetResult] | None] = [None] * len(tasks)
        self.futures: list[asyncio.Future[None]] = []
        self._decoding = decoding
        self._taken = itertools.count()  # next() on it is atomic: each task is taken once
        self._failed = threading.Event()

    @classmethod
    def submit(
        cls,
        pool: ThreadPoolExecutor,
        loop: asyncio.AbstractEventLoop,
        tasks: Sequence[Sequence[tuple[Any, ReadItem]]],
        decoding: tuple[Any, ...],
    ) -> _Wave:
        """Start decoding ``tasks`` on ``pool``, ``decoding`` being the arguments of
        :func:`_decode_some` after the chunks."""
        wave = cls(tasks, decoding)
        jobs = min(_workers, len(tasks))
        wave.futures = [
            asyncio.wrap_future(pool.submit(wave._drain), loop=loop) for _ in range(jobs)
        ]
        return wave

    def _drain(self) -> None:
        # A failed task stops the other jobs at their next task: its error is what the
        # caller gets, and nothing else is written into the output after it is raised.
        while not self._failed.is_set():
            index = next(self._taken)
            if index >= len(self.tasks):
                return
            try:
                self.results[index] = _decode_some(self.tasks[index], *self._decoding)
            except BaseException:
                self._failed.set()
                raise


def _chunk_key(key: str) -> str:
    return f"chunk {key!r}"


async def _decoded(store: Any, futures: list[asyncio.Future[None]]) -> None:
    """Wait for decoding jobs; a chunk of a ChunkBytesSource that fails names it."""
    try:
        await asyncio.gather(*futures)
    except VirtualStacError as err:
        if isinstance(store, ChunkBytesSource):
            raise store.name_failure(err) from err
        raise


async def _locate_local(
    store: Any, batch: Sequence[ReadItem], direct: DirectDecoder | None
) -> list[Any] | None:
    """Every chunk of ``batch`` as the range of a local file that the pool reads where it
    decodes it (or its inlined bytes, or None where missing); None if some chunk would have to
    be fetched, which is then done a wave at a time.

    A read of local chunks holds no bytes until they are decoded, so it needs no waves; and
    locating its chunks a wave at a time, while the pool decodes, competed with the pool for
    the GIL.
    """
    if direct is None:
        return None
    keys = [getter.path for getter, *_ in batch]
    if isinstance(store, ManifestStore):
        return store.local_chunk_ranges(keys)
    if isinstance(store, ChunkBytesSource):
        return await store.local_chunk_ranges(keys)
    return None


async def _fetch(store: Any, wave: Sequence[ReadItem], direct: DirectDecoder | None) -> list[Any]:
    if isinstance(store, ManifestStore):
        keys = [getter.path for getter, *_ in wave]
        if direct is not None:
            return await store.get_chunk_bytes(keys, local_ranges=True)
        return await store.get_chunks(keys, wave[0][1].prototype)
    if direct is not None and isinstance(store, ChunkBytesSource):
        return await store.get_chunk_bytes([getter.path for getter, *_ in wave], local_ranges=True)
    limit = asyncio.Semaphore(zarr.config.get("async.concurrency"))

    async def get(getter: StorePath, spec: ArraySpec) -> Buffer | None:
        async with limit:
            return await getter.get(spec.prototype)

    return list(await asyncio.gather(*(get(getter, spec) for getter, spec, *_ in wave)))


def _decode_some(
    chunks: Sequence[tuple[Any, ReadItem]],
    out: NDBuffer,
    drop_axes: tuple[int, ...],
    decoder: ChunkTransform | DirectDecoder,
    describe_chunk: Callable[[str], str] | None,
) -> list[GetResult]:
    decoding = (drop_axes, decoder, describe_chunk)
    results: list[GetResult | None] = [None] * len(chunks)
    local = [index for index, (raw, _) in enumerate(chunks) if isinstance(raw, LocalRange)]
    fetched = [index for index, (raw, _) in enumerate(chunks) if not isinstance(raw, LocalRange)]
    _decode_strips(chunks, fetched, [chunks[i][0] for i in fetched], out, decoder, results)
    for index in fetched:
        if results[index] is None:
            results[index] = _decode_one(chunks[index][0], chunks[index][1], out, *decoding)
    if local and isinstance(decoder, DirectDecoder) and not drop_axes:
        for index in set(local) - set(_read_into_place(chunks, local, out, decoder)):
            results[index] = _PRESENT
        local = [index for index in local if results[index] is None]
    # The other local chunks are read here, on the pool, nearby ones with one call into the
    # thread's buffer, and decoded before the next are read.
    # closing: a chunk that fails to decode closes the files at once, not when collected.
    with closing(read_local_ranges([chunks[index][0] for index in local])) as runs:
        for run in runs:
            indices = [local[position] for position, _ in run]
            _decode_strips(chunks, indices, [view for _, view in run], out, decoder, results)
            _copy_strips(chunks, indices, run, out, decoder, results)
            for index, (_, view) in zip(indices, run, strict=True):
                if results[index] is None:
                    results[index] = _decode_one(view, chunks[index][1], out, *decoding)
    return [result for result in results if result is not None]


def _decode_strips(
    chunks: Sequence[tuple[Any, ReadItem]],
    indices: list[int],
    raws: list[Any],
    out: NDBuffer,
    decoder: ChunkTransform | DirectDecoder,
    results: list[GetResult | None],
) -> None:
    """Decode the strips among chunks ``indices`` (whose bytes are ``raws``) plane by plane
    (:mod:`virtualstac.manifests.planar`), marking those done in ``results``."""
    if not isinstance(decoder, DirectDecoder) or not decoder.shuffled or len(indices) < 2:
        return
    target = out.as_ndarray_like()
    if not isinstance(target, np.ndarray) or not target.flags.writeable:
        return
    spec = chunks[indices[0]][1][1]
    places = [
        None if raw is None else (chunks[index][1][3], chunks[index][1][4])
        for index, raw in zip(indices, raws, strict=True)
    ]
    for strip in strips(places, spec):
        data = [_as_bytes(raws[position]) for position in strip.positions]
        if decode_strip(
            data,
            target,
            strip.box,
            spec,
            decoder.shuffled,
            decoder.stored,
            compressed=decoder.deflated,
        ):
            for position in strip.positions:
                results[indices[position]] = _PRESENT


def _copy_strips(
    chunks: Sequence[tuple[Any, ReadItem]],
    indices: list[int],
    run: LocalRun,
    out: NDBuffer,
    decoder: ChunkTransform | DirectDecoder,
    results: list[GetResult | None],
) -> None:
    """Copy the uncompressed chunks among ``indices`` (read in ``run``) that sit side by side
    both in the output and in their file with one copy per strip, marking them in ``results``."""
    if not isinstance(decoder, DirectDecoder) or decoder.steps or len(indices) < 2:
        return
    target = out.as_ndarray_like()
    if not isinstance(target, np.ndarray) or not target.flags.writeable:
        return
    spec = chunks[indices[0]][1][1]
    size = decoder.stored.itemsize * math.prod(spec.shape)
    width = spec.shape[-1]
    places = [(chunks[index][1][3], chunks[index][1][4]) for index in indices]
    for strip in strips(places, spec):
        ranges: list[LocalRange] = [chunks[indices[p]][0] for p in strip.positions]
        for first, stop in _contiguous(ranges, size):
            left = strip.box[-1].start + first * width
            box = (*strip.box[:-1], slice(left, left + (stop - first) * width))
            data = run.span(ranges[first].start, ranges[stop - 1].end)
            if copy_strip(data, target, box, spec, decoder.stored):
                for position in strip.positions[first:stop]:
                    results[indices[position]] = _PRESENT


def _contiguous(ranges: Sequence[LocalRange], size: int) -> list[tuple[int, int]]:
    """``[first, stop)`` of each run of at least two of ``ranges`` that are ``size`` bytes
    long and each begin where the one before ends.

    A chunk of another length is left out, for the chunk-by-chunk path to name: two damaged
    references whose lengths add up to two chunks' would otherwise be copied as two chunks.
    """
    found: list[tuple[int, int]] = []
    first = 0
    for i in range(len(ranges) + 1):
        if (
            i < len(ranges)
            and ranges[i].end - ranges[i].start == size
            and (i == first or ranges[i].start == ranges[i - 1].end)
        ):
            continue
        if i - first >= 2:
            found.append((first, i))
        first = i if i < len(ranges) and ranges[i].end - ranges[i].start == size else i + 1
    return found


def _as_bytes(raw: Any) -> Any:
    return raw.as_numpy_array() if isinstance(raw, Buffer) else raw


def _read_into_place(
    chunks: Sequence[tuple[Any, ReadItem]], local: list[int], out: NDBuffer, decoder: DirectDecoder
) -> list[int]:
    """Read the whole chunks whose bytes are their values, in the output's byte order, and
    whose place in the output is one contiguous block, straight into it (one copy fewer);
    return the other chunks of ``local``."""
    target = out.as_ndarray_like()
    if decoder.steps or not isinstance(target, np.ndarray) or target.dtype != decoder.stored:
        return local
    if target.flags.c_contiguous and not _whole_rows(chunks[local[0]][1][1].shape, target.shape):
        return local
    others = []
    with local_files() as files:
        for index in local:
            raw, (_, _, _, out_selection, is_complete_chunk) = chunks[index]
            place = None
            if (
                is_complete_chunk
                and isinstance(out_selection, tuple)
                and all(isinstance(part, slice) for part in out_selection)
            ):
                place = target[out_selection]
            # A 0-d output indexed with () gives a scalar, not a view: it takes the copying path.
            if (
                not isinstance(place, np.ndarray)
                or not place.flags.c_contiguous
                or place.nbytes != raw.end - raw.start
            ):
                others.append(index)
                continue
            # As bytes through a uint8 view: a buffer of dates or durations cannot be made.
            read_local_range_into(raw, memoryview(place.reshape(-1).view(np.uint8)), files)
    return others


def _whole_rows(chunk_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> bool:
    """Whether a whole chunk's box can be one contiguous block of a C-ordered output: every
    axis after its first longer than one spans the output's whole axis. When it cannot, the
    chunks are not looked at one by one."""
    for axis, size in enumerate(chunk_shape):
        if size > 1:
            return tuple(chunk_shape[axis + 1 :]) == tuple(out_shape[axis + 1 :])
    return True


def _decode_one(
    raw: Any,
    item: ReadItem,
    out: NDBuffer,
    drop_axes: tuple[int, ...],
    decoder: ChunkTransform | DirectDecoder,
    describe_chunk: Callable[[str], str] | None,
) -> GetResult:
    getter, spec, chunk_selection, out_selection, _ = item
    try:
        if isinstance(decoder, DirectDecoder):
            if isinstance(raw, Buffer):
                raw = raw.as_numpy_array()
            target = out.as_ndarray_like()
            assert isinstance(target, np.ndarray)  # read_concurrently checked it
            return decoder.decode_into(raw, target, spec, chunk_selection, out_selection, drop_axes)
        return decode_and_scatter_chunk(
            raw,
            out,
            chunk_spec=spec,
            chunk_selection=chunk_selection,
            out_selection=out_selection,
            drop_axes=drop_axes,
            decode=decoder.decode_chunk,
        )
    except VirtualStacError:
        raise
    except Exception as err:
        if describe_chunk is None:
            raise
        raise ChunkDecodeError(
            f"{describe_chunk(getter.path)} does not decode ({describe(err)}): the source is "
            "damaged, or the reference's offset or length is wrong"
        ) from err
