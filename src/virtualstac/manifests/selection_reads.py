"""Basic selections of virtual arrays read without zarr's per-chunk bookkeeping.

Before zarr's codec pipeline sees a read, zarr walks the chunks it covers one by one in Python:
an indexer projection, a chunk key and a normalized :class:`~zarr.storage.StorePath` per chunk,
about 5 us each. Reading 3,200 uncompressed chunks of 64 KiB from the page cache takes our
decoding pool about 35 ms; zarr's walk before it took another 15, which put whole-array reads of
uncompressed files behind h5py's.

:class:`VirtualChunksArray` is a ``zarr.Array`` whose basic selections (integers and slices
of step 1) of chunks a :class:`~virtualstac.manifests.store.ManifestStore` or a published store
(:class:`~virtualstac.manifests.decoding.ChunkBytesSource`) references are read by
:func:`read_basic_selection`: it projects the selection on each axis once, takes the product of
those projections, and hands the chunks straight to the decoding pool
(:func:`~virtualstac.manifests.decoding.read_concurrently`), the path zarr's call would reach
through :class:`~virtualstac.manifests.pipeline.ManifestCodecPipeline`. Values, missing-chunk
handling (``array.read_missing_chunks``) and errors are zarr's: the selection is validated by
zarr's own indexer, and any selection or array this does not cover is read by zarr.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import zarr
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding
from zarr.core.indexing import BasicIndexer, ChunkDimProjection, SliceDimIndexer
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.core.sync import sync
from zarr.errors import ChunkNotFoundError
from zarr.storage import StorePath

from virtualstac.manifests.decoding import (
    ChunkBytesSource,
    ReadItem,
    can_read_concurrently,
    read_concurrently,
    read_in_this_thread,
)
from virtualstac.manifests.pipeline import ManifestCodecPipeline
from virtualstac.manifests.store import ManifestStore

__all__ = [
    "IN_THREAD_CHUNKS",
    "READ_BATCH",
    "VirtualChunksArray",
    "read_basic_selection",
    "reads_virtual_chunks",
]

#: Chunks handed to the decoding pool at a time. What a read holds per chunk (its path, its
#: selections, its result: about 1 kB) stays bounded however many chunks a selection covers:
#: a million chunks of 4 bytes held 1.1 GB at once (zarr's own walk, 1.25 GB).
READ_BATCH = 65_536
#: Reads of at most this many chunks of local files are decoded in the calling thread
#: (:func:`~virtualstac.manifests.decoding.read_in_this_thread`): a dask task's read of one chunk.
IN_THREAD_CHUNKS = 1


class VirtualChunksArray(zarr.Array):  # type: ignore[type-arg]
    """A ``zarr.Array`` of a virtual store whose basic selections skip zarr's per-chunk walk
    (:func:`read_basic_selection`); every other read is zarr's."""

    @classmethod
    def of(cls, array: zarr.Array) -> VirtualChunksArray:  # type: ignore[type-arg]
        """``array`` (the same metadata, store and configuration) as a VirtualChunksArray."""
        return cls(array.async_array)

    def __getitem__(self, selection: Any) -> Any:
        """``array[selection]``, as zarr reads it."""
        values = read_basic_selection(self, selection)
        return super().__getitem__(selection) if values is None else values


def reads_virtual_chunks(store: Any) -> bool:
    """Whether ``store``'s chunks are references this module reads: a ManifestStore's, or a
    published store's that reads many chunks at once."""
    return isinstance(store, ManifestStore | ChunkBytesSource)


class _ChunkPath(StorePath):
    # A chunk's path is the array's (normalized when it was opened) and a key made of chunk
    # indices and the encoding's separator: normalizing it again is zarr's cost per chunk.
    def __init__(self, store: Any, path: str) -> None:
        self.store = store
        self.path = path


def read_basic_selection(array: zarr.Array, selection: Any) -> Any | None:  # type: ignore[type-arg]
    """The values of ``array[selection]`` read without zarr's per-chunk walk; None (having read
    nothing) when the array or selection is not one this covers, for zarr to read.

    Covered: arrays of a virtual store (:func:`reads_virtual_chunks`) on a regular chunk grid
    in C order whose codecs :class:`~virtualstac.manifests.pipeline.ManifestCodecPipeline`
    decodes synchronously and whole (no sharding); selections of integers, slices of step 1 and
    ``...`` that select at least one element along every axis they keep.
    """
    if not _basic(selection):
        return None
    async_array = array.async_array
    metadata = async_array.metadata
    pipeline = async_array.codec_pipeline
    store = async_array.store_path.store
    if (
        not reads_virtual_chunks(store)
        or not isinstance(pipeline, ManifestCodecPipeline)
        or pipeline.supports_partial_decode
        or pipeline.chunk_transform is None
        or not async_array._chunk_grid.is_regular
        or (metadata.order if metadata.zarr_format == 2 else async_array.config.order) != "C"
        or metadata.dtype.to_native_dtype().fields is not None
    ):
        return None
    indexer = BasicIndexer(selection, metadata.shape, async_array._chunk_grid)
    axes = [list(dim_indexer) for dim_indexer in indexer.dim_indexers]
    if (
        not indexer.shape
        or not all(axes)
        or not all(isinstance(dim, SliceDimIndexer) and dim.step == 1 for dim in _kept(indexer))
    ):
        return None  # scalars, empty selections and strided slices: zarr's
    config = async_array.config
    prototype = default_buffer_prototype()
    spec = ArraySpec(
        shape=async_array._chunk_grid.chunk_shape,
        dtype=metadata.dtype,
        fill_value=metadata.fill_value,
        config=config,
        prototype=prototype,
    )
    transform = pipeline.chunk_transform
    batches = _batches(async_array.store_path, metadata, axes, spec, READ_BATCH)
    first = next(batches)
    if not can_read_concurrently(first, transform):
        return None
    out = prototype.nd_buffer.empty(
        shape=indexer.shape, dtype=metadata.dtype.to_native_dtype(), order="C"
    )
    # Missing chunks are the fill value unless zarr is told to refuse them, as zarr reads them.
    strict = getattr(config, "read_missing_chunks", True) is False
    coordinates = _coordinates(axes)
    missing: list[tuple[int, ...]] = []
    for batch in itertools.chain((first,), batches):
        results = None
        if len(batch) <= IN_THREAD_CHUNKS:
            results = read_in_this_thread(batch, out, transform)
        if results is None:
            results = sync(read_concurrently(batch, out, (), transform))
        if strict:
            chunks = itertools.islice(coordinates, len(batch))
            missing += [c for c, r in zip(chunks, results, strict=True) if r["status"] == "missing"]
    if missing:
        raise _missing_error(async_array.store_path, metadata, missing)
    return out.as_ndarray_like()


def _basic(selection: Any) -> bool:
    parts = selection if isinstance(selection, tuple) else (selection,)
    return all(
        part is Ellipsis
        or isinstance(part, slice)
        or (isinstance(part, int | np.integer) and not isinstance(part, bool | np.bool_))
        for part in parts
    )


def _kept(indexer: BasicIndexer) -> list[Any]:
    return [dim for dim in indexer.dim_indexers if isinstance(dim, SliceDimIndexer)]


def _batches(
    array_path: StorePath,
    metadata: Any,
    axes: Sequence[Sequence[ChunkDimProjection]],
    spec: ArraySpec,
    size: int,
) -> Iterator[list[ReadItem]]:
    """The reads of every chunk the projections ``axes`` cover, in zarr's order (C order of
    the chunk grid) and as zarr's walk would list them, ``size`` chunks at a time."""
    # Each axis's parts as 1-tuples (an integer's output part as ()), so that a chunk's tuples
    # are sums of tuples: a C loop, where building them in Python cost what zarr's walk does.
    selections = [[(p.dim_chunk_sel,) for p in axis] for axis in axes]
    places = [[() if p.dim_out_sel is None else (p.dim_out_sel,) for p in axis] for axis in axes]
    wholes = [[p.is_complete_chunk for p in axis] for axis in axes]
    base = f"{array_path.path}/" if array_path.path else ""
    store = array_path.store
    reads: Iterator[ReadItem] = (
        (_ChunkPath(store, base + key), spec, sum(chunk, ()), sum(place, ()), all(whole))
        for key, chunk, place, whole in zip(
            _keys(metadata, axes),
            itertools.product(*selections),
            itertools.product(*places),
            itertools.product(*wholes),
            strict=True,
        )
    )
    while batch := list(itertools.islice(reads, size)):
        yield batch


def _coordinates(axes: Sequence[Sequence[ChunkDimProjection]]) -> Iterator[tuple[int, ...]]:
    """The grid positions of the chunks the projections ``axes`` cover, in C order."""
    return itertools.product(*[[p.dim_chunk_ix for p in axis] for axis in axes])


def _keys(metadata: Any, axes: Sequence[Sequence[ChunkDimProjection]]) -> Iterator[str]:
    """The chunk keys of the product of ``axes``, in C order."""
    encoding = getattr(metadata, "chunk_key_encoding", None)
    if isinstance(metadata, ArrayV3Metadata) and type(encoding) is DefaultChunkKeyEncoding:
        separator = encoding.separator
        indices = [[str(p.dim_chunk_ix) for p in axis] for axis in axes]
        return (separator.join(("c", *parts)) for parts in itertools.product(*indices))
    coordinates = _coordinates(axes)
    return (metadata.encode_chunk_key(chunk) for chunk in coordinates)


def _missing_error(
    array_path: StorePath, metadata: Any, missing: Sequence[tuple[int, ...]]
) -> ChunkNotFoundError:
    """zarr's error for chunks that are missing when ``array.read_missing_chunks`` is off."""
    listed = "\n".join(
        f"  chunk '{metadata.encode_chunk_key(chunk)}' (grid position {chunk})" for chunk in missing
    )
    return ChunkNotFoundError(
        f"{len(missing)} chunk(s) not found in store '{array_path}'.\n"
        "Set the 'array.read_missing_chunks' config to True to fill missing chunks with "
        f"the fill value.\nMissing chunks:\n{listed}"
    )
