"""Chunk manifests of HDF5 datasets: where each chunk's bytes lie in the file.

Chunked datasets are read from their chunk index in one pass (``chunk_iter``); contiguous
datasets are one chunk, or equal slices of one when large. Chunks no Zarr codec chain can
decode (some filters skipped, or partial edge chunks left unfiltered by
``H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS``, which no filter mask shows), ranges past the end of
the file and unfiltered chunks of the wrong size are refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import h5py
import numpy as np
import numpy.typing as npt

from virtualstac.limits import check_references
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.metadata import grid_shape
from virtualstac.parsers.blocks import block_chunks
from virtualstac.parsers.hdf_filters import (
    Filter,
    filter_name,
    is_szip,
    skip_frame,
    skippable_filters,
)
from virtualstac.parsers.hdf_metadata import Fail, Member

__all__ = [
    "ChunkedStorage",
    "check_edge_chunks",
    "check_undefined_fill",
    "chunked_manifest",
    "contiguous_manifest",
    "file_size",
    "inlined_manifest",
    "missing_manifest",
    "stored_elsewhere",
    "unwritten_chunks",
]

_SHUFFLE = 2  # HDF5's filter id

#: How many source files an error names.
_NAMED = 3

#: Contiguous storage is cut into slices no smaller than this (unless it is smaller itself).
_MIN_SLICE_BYTES = 64 * 1024


def chunked_manifest(
    member: Member,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    chunk_url: str,
    file_size: int | None,
    fail: Fail,
    *,
    filters: Sequence[Filter] = (),
) -> ChunkedStorage:
    """The filters the chunks of a chunked dataset went through and its manifest, for an array
    of ``shape`` (at least the dataset's).

    HDF5 skips an optional filter for a chunk it fails on (one it cannot compress), storing
    the chunk as the filter got it and recording it in the chunk's filter mask. A filter every
    stored chunk skipped is left out of the returned ``filters``; chunks that skipped a filter
    others went through are referenced where their size tells them apart
    (:func:`~virtualstac.parsers.hdf_filters.skippable_filters`), and refused otherwise.
    """
    ds = member.node
    grid = grid_shape(shape, chunks)
    # A dataset shrunk after writing keeps chunks beyond its shape; nothing reads them.
    stored_grid = np.asarray(grid_shape(ds.shape, chunks), dtype=np.int64)
    rows: list[tuple[tuple[int, ...], int, int, int]] = []

    def collect(info: Any) -> None:
        rows.append((info.chunk_offset, info.filter_mask, info.byte_offset, info.size))

    ds.id.chunk_iter(collect)
    rows = [r for r in rows if r[3] > 0]
    if not rows:
        return ChunkedStorage(list(filters), {}, missing_manifest(grid))
    coords = np.array([r[0] for r in rows], dtype=np.int64).reshape(len(rows), len(chunks))
    masks = np.array([r[1] for r in rows], dtype=np.int64)
    offsets = np.array([r[2] for r in rows], dtype=np.uint64)
    lengths = np.array([r[3] for r in rows], dtype=np.uint64)
    indices = coords // np.asarray(chunks, dtype=np.int64)
    inside = (indices < stored_grid).all(axis=1)
    indices, masks, offsets, lengths = (
        indices[inside],
        masks[inside],
        offsets[inside],
        lengths[inside],
    )
    # The size HDF5 stores a value in, which h5py's dtype may not have (a padded compound).
    expected = math.prod(chunks) * ds.id.get_type().get_size()
    unfiltered = _unfiltered_edges(member, chunks, filters, indices, masks, lengths, expected)
    masks = np.where(unfiltered, (1 << len(filters)) - 1, masks)
    kept, kept_masks = _skipped_by_all(filters, masks)
    skippable = skippable_filters(kept)
    if (kept_masks & ~skippable).any():
        at = int(np.flatnonzero(kept_masks & ~skippable)[0])
        mask = int(masks[at])
        names = [filter_name(f) for i, f in enumerate(filters) if mask >> i & 1]
        why = f"has filter mask {mask}: {', '.join(names) or 'no filter of its pipeline'}"
        if unfiltered[at]:
            # H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS, which the chunk's filter mask does not show.
            why = "is a partial edge chunk HDF5 stored unfiltered"
        raise fail(
            member.path,
            f"has chunks stored with some filters skipped (chunk {_index(indices[at])} {why}); "
            "one Zarr codec chain cannot decode them",
        )
    masks = kept_masks
    _check_ranges(member, offsets, lengths, file_size, fail)
    if not kept and (lengths != expected).any():
        at = int(np.flatnonzero(lengths != expected)[0])
        raise fail(
            member.path,
            f"has an unfiltered chunk {_index(indices[at])} of {int(lengths[at])} bytes; a "
            f"chunk of shape {chunks} holds {expected}",
        )
    skipped = _skipped_sizes(member, kept, masks, lengths, expected, indices, fail)
    codes = np.zeros(grid, dtype=np.uint8)
    full_offsets = np.zeros(grid, dtype=np.uint64)
    full_lengths = np.zeros(grid, dtype=np.uint64)
    where = tuple(indices.T)
    codes[where] = 1
    full_offsets[where] = offsets
    full_lengths[where] = lengths
    manifest = ChunkManifest.from_path_table(
        path_table=["", chunk_url],
        path_codes=codes,
        offsets=full_offsets,
        lengths=full_lengths,
        validate_paths=False,
    )
    return ChunkedStorage(kept, skipped, manifest)


def _unfiltered_edges(
    member: Member,
    chunks: tuple[int, ...],
    filters: Sequence[Filter],
    indices: npt.NDArray[np.int64],
    masks: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.uint64],
    chunk_bytes: int,
) -> npt.NDArray[np.bool_]:
    """Which stored chunks are partial edge chunks HDF5 left unfiltered, as a dataset created
    with ``H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS`` stores them, their filter masks saying
    nothing of it.

    Such chunks have the size of the values; one is read raw and through HDF5 to tell them
    from chunks the filters gave that size (a pipeline of shuffle alone gives it to all, and
    values a shuffle leaves as they are, zeros, do not tell).
    """
    offsets = indices * np.asarray(chunks, dtype=np.int64)
    partial = (offsets + np.asarray(chunks) > np.asarray(member.node.shape)).any(axis=1)
    candidates: npt.NDArray[np.bool_] = partial & (masks == 0) & (lengths == chunk_bytes)
    if not filters or not candidates.any():
        return np.zeros(len(masks), dtype=bool)
    size = member.dtype.itemsize
    raw = _stored_as_read(member, offsets[int(np.flatnonzero(candidates)[0])], chunks)
    shuffles_only = all(filter_id == _SHUFFLE for filter_id, _, _ in filters)
    if raw is None or (shuffles_only and _shuffled(raw, size) == raw):
        return np.zeros(len(masks), dtype=bool)
    return candidates


def _shuffled(raw: bytes, size: int) -> bytes:
    """``raw`` as HDF5's shuffle of ``size``-byte elements stores it."""
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, size).T.tobytes()


def _stored_as_read(member: Member, offset: Any, chunks: tuple[int, ...]) -> bytes | None:
    """The stored bytes of the chunk at ``offset`` if they are the values HDF5 reads there."""
    ds = member.node
    corner = tuple(int(o) for o in offset)
    region = tuple(
        slice(o, min(o + c, s)) for o, c, s in zip(corner, chunks, ds.shape, strict=True)
    )
    try:
        _, raw = ds.id.read_direct_chunk(corner)
        values = np.ascontiguousarray(ds[region], dtype=member.dtype)
        stored = np.frombuffer(raw, dtype=member.dtype).reshape(chunks)
    except (OSError, ValueError, TypeError):
        return None  # not the values' bytes, or not readable: left to the filters
    inner = tuple(slice(0, r.stop - r.start) for r in region)
    return bytes(raw) if np.ascontiguousarray(stored[inner]).tobytes() == values.tobytes() else None


class ChunkedStorage(NamedTuple):
    """What :func:`chunked_manifest` found of a chunked dataset."""

    #: The filters the stored chunks went through (the pipeline less those all skipped).
    filters: list[Filter]
    #: The positions in ``filters`` of those some chunks skipped, and the size of such a chunk
    #: as the filter would have got it (see ``codecs_for_filters``).
    skipped: dict[int, int]
    manifest: ChunkManifest


def _skipped_by_all(
    filters: Sequence[Filter], masks: npt.NDArray[np.int64]
) -> tuple[list[Filter], npt.NDArray[np.int64]]:
    """The filters some stored chunk went through, and the masks of the chunks against them.

    A filter every chunk skipped (an incompressible dataset through LZF) is one no chunk
    needs decoding with: the chunks then read through the other filters alone.
    """
    everywhere = int(np.bitwise_and.reduce(masks)) & ((1 << len(filters)) - 1) if masks.size else 0
    if not everywhere:
        return list(filters), masks
    kept: list[Filter] = []
    squeezed = np.zeros_like(masks)
    for position, pipeline_filter in enumerate(filters):
        if not everywhere >> position & 1:
            squeezed |= ((masks >> position) & 1) << len(kept)
            kept.append(pipeline_filter)
    # Bits of no filter stay set, past the kept filters' bits, and are refused.
    return kept, squeezed | (masks >> len(filters)) << len(kept)


def _skipped_sizes(
    member: Member,
    filters: Sequence[Filter],
    masks: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.uint64],
    chunk_bytes: int,
    indices: npt.NDArray[np.int64],
    fail: Fail,
) -> dict[int, int]:
    """The size of a chunk, as each filter some chunks skipped would have got it, by the
    filter's position; refused where the size of a chunk does not tell whether to decode it
    (a chunk the filter compressed to exactly that size)."""
    sizes: dict[int, int] = {}
    for position, pipeline_filter in enumerate(filters):
        frame = skip_frame(filters, position)
        skipped = (masks >> position & 1).astype(bool)
        if frame is None or is_szip(pipeline_filter) or not skipped.any():
            continue  # szip's codec tells its own apart
        size = chunk_bytes + 4 * frame.checksums_before
        # A chunk's size as the filter gave it or got it: without the checksums added after.
        at_filter = lengths.astype(np.int64) - 4 * frame.checksums_after
        wrong = skipped & (at_filter != size) | ~skipped & (at_filter == size)
        if wrong.any():
            at = int(np.flatnonzero(wrong)[0])
            state = "skipped" if skipped[at] else "went through"
            raise fail(
                member.path,
                f"has chunks stored with {filter_name(pipeline_filter)} skipped, and chunk "
                f"{_index(indices[at])} of {int(lengths[at])} bytes {state} it; its size does "
                "not tell whether to decode it",
            )
        sizes[position] = size
    return sizes


def contiguous_manifest(
    member: Member,
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    chunk_url: str,
    file_size: int | None,
    fail: Fail,
    *,
    max_chunk_bytes: int,
    source: str,
) -> tuple[tuple[int, ...], ChunkManifest]:
    """The chunk shape and manifest of a contiguous dataset: its storage as one chunk, or as
    equal slices along its leading axes when larger than ``max_chunk_bytes`` (a read then
    fetches and holds only the slices it needs)."""
    dsid = member.node.id
    whole = tuple(max(s, 1) for s in shape)
    offset = dsid.get_offset()
    nbytes = math.prod(shape) * dtype.itemsize
    if offset is None or nbytes == 0:
        # Never written: HDF5 allocates contiguous storage on first write.
        return whole, missing_manifest(grid_shape(shape, whole))
    length = int(dsid.get_storage_size())
    if length != nbytes:
        raise fail(
            member.path,
            f"has {length} bytes of contiguous storage for {nbytes} bytes of values",
        )
    _check_ranges(
        member,
        np.array([offset], dtype=np.uint64),
        np.array([length], dtype=np.uint64),
        file_size,
        fail,
    )
    # The storage lies within the file, so its lengths are bounded by the file's size.
    chunks = block_chunks(shape, dtype.itemsize, max_chunk_bytes)
    if math.prod(chunks) * dtype.itemsize < min(nbytes, _MIN_SLICE_BYTES):
        # A long axis of prime length leaves only tiny slices (a value each): one request
        # for the whole block costs less than millions of references.
        chunks = whole
    grid = grid_shape(shape, chunks)
    count = math.prod(grid)
    check_references(count, source=source, array=member.path)
    chunk_bytes = math.prod(chunks) * dtype.itemsize
    offsets = np.uint64(offset) + np.arange(count, dtype=np.uint64) * np.uint64(chunk_bytes)
    return chunks, ChunkManifest.from_path_table(
        path_table=[chunk_url],
        path_codes=np.zeros(grid, dtype=np.uint8),
        offsets=offsets.reshape(grid),
        lengths=np.full(grid, chunk_bytes, dtype=np.uint64),
        validate_paths=False,
    )


def file_size(h5file: h5py.File) -> int | None:
    """The size of the open file, which no chunk reference may reach past; None if unknown."""
    try:
        return int(h5file.id.get_filesize())
    except (OSError, ValueError):
        return None


def stored_elsewhere(dcpl: Any) -> str | None:
    """Why a dataset's values are not in its file and cannot be referenced there (a virtual
    dataset's sources), naming where they are; None otherwise (external raw files are
    referenced: :mod:`~virtualstac.parsers.hdf_external`)."""
    if dcpl.get_layout() == h5py.h5d.VIRTUAL:
        count = dcpl.get_virtual_count()
        files = [str(dcpl.get_virtual_filename(i)) for i in range(min(count, _NAMED))]
        sources = [
            f"{str(dcpl.get_virtual_dsetname(i))!r} in "
            + ("this file" if name == "." else repr(name))
            for i, name in enumerate(files)
        ]
        more = ", ..." if count > _NAMED else ""
        return (
            f"is an HDF5 virtual dataset of {', '.join(sources)}{more}; virtualize its source "
            "files instead"
        )
    return None


def check_undefined_fill(member: Member, manifest: ChunkManifest, fail: Fail) -> None:
    """Refuse a dataset without a fill value and without storage, which HDF5 cannot read.

    HDF5 reads the unwritten chunks of a dataset whose fill value is undefined as zeros (the
    fill value the parser gives it), but refuses to read the dataset at all ("no data can be
    read") while none of its storage was ever written.
    """
    if math.prod(manifest.shape_chunk_grid) and not len(manifest):
        raise fail(
            member.path,
            "has no fill value (HDF5's fill value is undefined) and was never written, so HDF5 "
            "refuses to read it",
        )


def unwritten_chunks(member: Member) -> int:
    """How many chunks within the dataset's extent HDF5 never allocated (a contiguous dataset
    never written counts as one).

    Only asked of datasets with fill time never, whose unallocated chunks HDF5 reads by leaving
    the reader's buffer as it was: h5py's zeros, netCDF's uninitialised memory.
    """
    dsid = member.node.id
    shape = tuple(int(s) for s in member.node.shape)
    if not math.prod(shape):
        return 0
    if member.chunks is None:
        return 1 if dsid.get_offset() is None else 0
    total = math.prod(grid_shape(shape, member.chunks))
    return total - int(dsid.get_num_chunks(dsid.get_space()))


def check_edge_chunks(
    member: Member, shape: tuple[int, ...], chunks: tuple[int, ...], fail: Fail
) -> None:
    """Refuse a stored chunk that reaches past the records of an extended dataset.

    Written with fill off, the part of that chunk past the dataset's extent holds undefined
    bytes, where netCDF reads fill values.
    """
    for axis, (stored, size, chunk) in enumerate(
        zip(member.node.shape, shape, chunks, strict=True)
    ):
        if size > stored and stored % chunk:
            raise fail(
                member.path,
                f"was written with fill off and has {stored} of {size} records along axis "
                f"{axis}; its last stored chunk of {chunk} records holds undefined values "
                "where netCDF reads fill values",
            )


def _check_ranges(
    member: Member,
    offsets: npt.NDArray[np.uint64],
    lengths: npt.NDArray[np.uint64],
    file_size: int | None,
    fail: Fail,
) -> None:
    """Refuse references past the end of the file (a truncated file)."""
    if file_size is None or not offsets.size:
        return
    ends = offsets + lengths
    if int(ends.max()) > file_size:
        raise fail(
            member.path,
            f"references bytes up to {int(ends.max())} but the file has {file_size} bytes; "
            "it may be truncated",
        )


def missing_manifest(grid: tuple[int, ...]) -> ChunkManifest:
    """A manifest of ``grid`` with every chunk missing (read as the fill value)."""
    empty = np.zeros(grid, dtype=np.uint64)
    return ChunkManifest.from_path_table(
        path_table=[""],
        path_codes=np.zeros(grid, dtype=np.uint8),
        offsets=empty,
        lengths=empty,
        validate_paths=False,
    )


def inlined_manifest(grid: tuple[int, ...], data: bytes) -> ChunkManifest:
    """The whole stored dataset as the first chunk of ``grid`` (the others are missing).

    The grid has more than one chunk only for a dataset extended along an unlimited dimension,
    and none for an array of no elements.
    """
    if math.prod(grid) == 0 or not data:
        return missing_manifest(grid)
    return ChunkManifest.from_inlined_chunk(data, grid)


def _index(indices: Any) -> tuple[int, ...]:
    """Grid indices as plain ints, which print as ``(1, 2)`` rather than ``np.int64(1)``."""
    return tuple(int(i) for i in indices)
