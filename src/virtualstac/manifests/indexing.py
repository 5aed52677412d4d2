"""Indexing a ManifestArray by rewriting its references, never reading chunk bytes.

An index that selects whole chunks keeps their references. A slice inside one chunk of an
uncompressed array, along the axis that varies slowest in the stored chunk, becomes references
to that part of the chunk's bytes (its offset moved, its length shortened). Anything else would
split chunks that can only be cut after decoding them, and is refused with
:class:`~virtualstac.errors.UnsupportedIndexingError`.

Indexers follow the array API: one single-axis expression (an integer, a slice, or a 1-d
integer array that is a contiguous range) per dimension, ``None`` for new axes, and at most one
ellipsis standing for the dimensions not indexed otherwise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.codecs import BytesCodec, TransposeCodec

from virtualstac.errors import (
    IndexerTypeError,
    InvalidIndexerError,
    UnsupportedIndexingError,
)
from virtualstac.manifests.grid_ops import narrow_chunk_bytes, subset_manifest
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.metadata import codecs_with_axis, replace_metadata

if TYPE_CHECKING:
    from virtualstac.manifests.array import ManifestArray

__all__ = ["index_array", "raw_row_axis"]

# ChunkManifest.path_codes of a missing chunk.
MISSING_PATH_CODE = -2

_ADVICE = (
    "Select whole chunks, load the variable (loadable_variables=[...]), or select after "
    "opening the written store."
)


def index_array(array: ManifestArray, key: Any) -> ManifestArray:
    """``array[key]``: the referenced chunks, or parts of raw chunks, that ``key`` selects."""
    from virtualstac.manifests.array import expand_manifest_array

    items = _normalize_key(key, array.ndim)
    result = _select(array, [item for item in items if item is not None])
    kept = 0
    for item in items:
        if item is None:
            result = expand_manifest_array(result, kept)
        if not isinstance(item, int):
            kept += 1
    return result


def raw_row_axis(array: ManifestArray) -> int | None:
    """The axis whose rows are contiguous byte ranges of each stored chunk, if there is one.

    That is the case when chunks are the array's raw fixed-size elements (only a ``bytes``
    codec, perhaps after a ``transpose``): the slowest-varying stored axis, axis 0 in C order.
    """
    codecs = array.metadata.codecs
    if array.ndim == 0 or array.dtype.kind in "OT" or array.dtype.itemsize == 0:
        return None
    if len(codecs) == 1 and isinstance(codecs[0], BytesCodec):
        return 0
    if (
        len(codecs) == 2
        and isinstance(codecs[0], TransposeCodec)
        and isinstance(codecs[1], BytesCodec)
    ):
        return int(codecs[0].order[0])
    return None


def _select(array: ManifestArray, selection: list[int | slice]) -> ManifestArray:
    """Apply one integer or slice per axis (no new axes, no ellipsis)."""
    from virtualstac.manifests.array import ManifestArray

    if all(
        isinstance(item, slice) and item.indices(size) == (0, size, 1)
        for item, size in zip(selection, array.shape, strict=True)
    ):
        return array
    row_axis = raw_row_axis(array)
    grid_index: list[int | slice] = []
    shape: list[int] = []
    chunks: list[int] = []
    kept: list[int] = []
    rows: tuple[int, int, int] | None = None  # (axis, first row within the chunk, row count)
    for axis, item in enumerate(selection):
        size, chunk = array.shape[axis], array.chunks[axis]
        if isinstance(item, int):
            grid_index.append(_integer_to_grid(item, axis, size, chunk))
            continue
        start, stop, step = item.indices(size)
        stop = max(stop, start)
        if step != 1:
            raise _splits(axis, size, chunk, item, f"a step of {step} picks elements of chunks")
        if start == stop:
            grid_index.append(slice(0, 0))
            chunks.append(chunk)
        elif start % chunk == 0 and (stop % chunk == 0 or stop == size):
            grid_index.append(slice(start // chunk, -(-stop // chunk)))
            chunks.append(chunk)
        elif axis == row_axis and start // chunk == (stop - 1) // chunk:
            first = start // chunk
            grid_index.append(slice(first, first + 1))
            rows = (axis, start - first * chunk, stop - start)
            chunks.append(stop - start)
        else:
            raise _splits(axis, size, chunk, item, _why_not_rows(array, axis, row_axis))
        shape.append(stop - start)
        kept.append(axis)
    manifest = subset_manifest(array.manifest, tuple(grid_index))
    if rows is not None:
        manifest = _rows_of_chunks(array, manifest, *rows)
    names = array.metadata.dimension_names
    dropped = [axis for axis, item in enumerate(selection) if isinstance(item, int)]
    metadata = replace_metadata(
        array.metadata,
        shape=tuple(shape),
        chunk_shape=tuple(chunks),
        dimension_names=None if names is None else tuple(names[axis] for axis in kept),
        codecs=_codecs_without(array, dropped),
    )
    return ManifestArray(metadata, manifest)


def _rows_of_chunks(
    array: ManifestArray, manifest: ChunkManifest, axis: int, first: int, count: int
) -> ChunkManifest:
    """References to rows ``first:first + count`` (along ``axis``) of each raw chunk."""
    row_bytes = array.dtype.itemsize * math.prod(
        c for other, c in enumerate(array.chunks) if other != axis
    )
    chunk_bytes = row_bytes * array.chunks[axis]
    present = manifest.path_codes != MISSING_PATH_CODE
    if (manifest.lengths[present] != chunk_bytes).any():
        raise UnsupportedIndexingError(
            f"cannot cut rows out of the chunks on axis {axis}: some chunk's byte length is "
            f"not the {chunk_bytes} bytes of a raw chunk of shape {array.chunks}, so its rows "
            f"are not where they would be. {_ADVICE}"
        )
    return narrow_chunk_bytes(manifest, first * row_bytes, count * row_bytes)


def _why_not_rows(array: ManifestArray, axis: int, row_axis: int | None) -> str:
    if row_axis is None:
        return "its chunks are encoded (compressed or transformed), so they can only be whole"
    if axis != row_axis:
        return (
            f"only rows along axis {row_axis}, the slowest-varying axis of the stored chunks, "
            "are contiguous bytes"
        )
    return "the slice crosses a chunk boundary"


def _splits(axis: int, size: int, chunk: int, item: Any, reason: str) -> UnsupportedIndexingError:
    return UnsupportedIndexingError(
        f"cannot index axis {axis} (length {size}, chunks of {chunk}) with {item!r}: it would "
        f"split individual chunks, which a virtual array cannot do without reading them "
        f"({reason}). {_ADVICE}"
    )


def _integer_to_grid(item: int, axis: int, size: int, chunk: int) -> int:
    if not -size <= item < size:
        raise InvalidIndexerError(f"index {item} is out of bounds for axis {axis} with size {size}")
    if chunk != 1:
        reason = f"an integer picks one element of a chunk of {chunk}"
        raise _splits(axis, size, chunk, item, reason)
    return item % size


def _codecs_without(array: ManifestArray, axes: list[int]) -> list[dict[str, Any]]:
    """The codec chain once the length-one chunk ``axes`` are dropped."""
    codecs: list[Any] = list(array.metadata.codecs)
    ndim = array.ndim
    # The highest axis first, so that the lower axes keep their numbers.
    for axis in sorted(axes, reverse=True):
        try:
            codecs = codecs_with_axis(codecs, ndim, removed=axis)
        except ValueError as err:
            raise UnsupportedIndexingError(f"cannot drop axis {axis}: {err}") from err
        ndim -= 1
    return codecs


def _normalize_key(key: Any, ndim: int) -> list[Any]:
    """One integer, slice or ``None`` per output position, the ellipsis expanded."""
    items = list(key) if isinstance(key, tuple) else [key]
    for position, item in enumerate(items):
        if isinstance(item, np.ndarray) and item.ndim == 0 and item.dtype.kind in "iu":
            items[position] = int(item)
        elif isinstance(item, np.integer):
            items[position] = int(item)
        elif isinstance(item, np.ndarray):
            items[position] = _array_to_slice(item)
        elif isinstance(item, bool) or not (
            item is None or item is Ellipsis or isinstance(item, int | slice)
        ):
            raise IndexerTypeError(
                "indexer must be of type int, slice, ellipsis, None, or np.ndarray; or a tuple "
                f"of such types, got {type(item).__name__} in {key!r}"
            )
    ellipses = sum(1 for item in items if item is Ellipsis)
    if ellipses > 1:
        raise InvalidIndexerError(
            f"Invalid indexer: indexers containing multiple Ellipses are invalid, got {ellipses} "
            f"in {key!r}"
        )
    used = sum(1 for item in items if item is not None and item is not Ellipsis)
    if used > ndim or (used < ndim and not ellipses):
        raise InvalidIndexerError(
            "Invalid indexer for array. Indexer must contain a number of single-axis indexing "
            f"expressions equal to the array's {ndim} dimensions (or fewer, with an ellipsis "
            f"for the rest); got {used} in {key!r}"
        )
    if ellipses:
        at = items.index(Ellipsis)
        items[at : at + 1] = [slice(None)] * (ndim - used)
    return items


def _array_to_slice(array: np.ndarray[Any, Any]) -> slice:
    """Accept an integer array only if it is a contiguous ascending range, i.e. a slice."""
    if array.dtype.kind not in "iu" or array.ndim != 1:
        raise UnsupportedIndexingError(
            "cannot index a ManifestArray with boolean, float or multi-dimensional arrays "
            "(fancy indexing needs the values); use slices along chunk boundaries"
        )
    if array.size == 0:
        return slice(0, 0)
    start = int(array[0])
    if start < 0 or not np.array_equal(array, np.arange(start, start + array.size)):
        raise UnsupportedIndexingError(
            "cannot index a ManifestArray with an arbitrary integer array (fancy indexing "
            "needs the values); only contiguous chunk-aligned ranges are supported"
        )
    return slice(start, start + array.size)
