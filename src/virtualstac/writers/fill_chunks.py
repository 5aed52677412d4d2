"""Missing chunks written as inlined chunks of the fill value, for Zarr v2 output.

A Zarr v3 array reads a missing chunk as its fill value and masks only by a CF ``_FillValue``
attribute. Zarr v2 readers (xarray included) mask by ``fill_value``: written there, a fill
value the array really holds (zarr-python's ``fill_value=-9`` or ``inf`` without a
``_FillValue``) would read as NaN wherever it occurs. Written as ``null`` instead, the missing
chunks would read as zeros. So those chunks are written inline, encoded by the array's own
codecs, and ``fill_value`` is left out: every reader then gets the values the array holds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from zarr.codecs import ShardingCodec
from zarr.core.array import Array, AsyncArray
from zarr.core.array_spec import ArrayConfig
from zarr.core.buffer import default_buffer_prototype
from zarr.core.metadata import ArrayV3Metadata
from zarr.core.sync import sync
from zarr.storage import MemoryStore, StorePath

from virtualstac.errors import UnsupportedOperationError
from virtualstac.manifests import ChunkManifest, ManifestArray
from virtualstac.manifests.metadata import (
    chunk_shape_of,
    decode_cf_fill_value,
    replace_metadata,
    same_value,
)

__all__ = ["FILL_CHUNK_BYTES", "fill_is_cf_fill", "reads_as_null_fill", "with_fill_chunks"]

#: The most bytes of fill-value chunks one array may add to the references.
FILL_CHUNK_BYTES = 16 * 2**20


def reads_as_null_fill(value: Any) -> bool:
    """Whether ``value`` is what missing chunks of a ``fill_value: null`` v2 array read as."""
    if isinstance(value, str):
        # A v2 string array's null fill reads as "": written as "", xarray would mask it.
        return value == ""
    if isinstance(value, bytes | np.bytes_):
        return not any(value)
    if isinstance(value, np.void):  # a record (raw bytes too): all its bytes zero
        return not any(value.tobytes())
    try:
        return bool(np.all(np.asarray(value) == 0))
    except (TypeError, ValueError):
        return False


def fill_is_cf_fill(metadata: ArrayV3Metadata) -> bool:
    """Whether an array with a CF ``_FillValue`` holds it as its fill value (an attribute
    that does not decode to a number of its type counts as its fill, as it always did)."""
    dtype = np.dtype(metadata.data_type.to_native_dtype())
    try:
        cf_fill = decode_cf_fill_value(metadata.attributes["_FillValue"], dtype)
        return same_value(np.asarray(cf_fill, dtype=dtype)[()], metadata.fill_value)
    except (TypeError, ValueError, OverflowError):
        return True


def with_fill_chunks(name: str, array: ManifestArray) -> ManifestArray:
    """``array`` with its missing chunks inlined as chunks of its fill value, where its fill
    value would otherwise have to be written as a v2 ``fill_value`` that xarray masks by.

    Arrays whose fill value is their ``_FillValue`` (meant as a mask), without missing
    chunks, without a ``_FillValue`` whose missing chunks read as zeros anyway, and of dates
    and durations (which xarray does not mask) are returned as they are.

    Raises
    ------
    UnsupportedOperationError
        If the inlined chunks would add more than :data:`FILL_CHUNK_BYTES` to the references.
    """
    metadata = array.metadata
    manifest = array.manifest
    # The v2 fill_value is the _FillValue when there is one (missing chunks then read as it),
    # else null (they read as zeros): missing chunks that hold anything else are inlined, such
    # as netCDF's default fill past the records of a variable written with fill off.
    if "_FillValue" in metadata.attributes:
        kept = fill_is_cf_fill(metadata)
    else:
        kept = reads_as_null_fill(metadata.fill_value)
    if (
        kept
        or len(manifest) == math.prod(manifest.shape_chunk_grid)
        or np.dtype(metadata.data_type.to_native_dtype()).kind in "mM"
        or any(isinstance(codec, ShardingCodec) for codec in metadata.codecs)
    ):
        return array
    missing = manifest.path_codes == -2
    chunk = _encoded_fill_chunk(array)
    count = int(missing.sum())
    if count * len(chunk) > FILL_CHUNK_BYTES:
        fill = metadata.fill_value
        fill = fill.item() if isinstance(fill, np.generic) else fill
        if "_FillValue" in metadata.attributes:
            why = "where Zarr v2 readers would read its _FillValue (the v2 fill_value) instead"
        else:
            why = "which Zarr v2 readers would mask as if it were a _FillValue"
        raise UnsupportedOperationError(
            f"array {name!r}: its {count} missing chunks read as its fill value {fill!r}, "
            f"{why}; written inline they would take {count * len(chunk)} bytes (at most "
            f"{FILL_CHUNK_BYTES}). Write the references to Icechunk, which keeps the fill value"
        )
    positions = [tuple(int(i) for i in index) for index in np.argwhere(missing)]
    paths = manifest.paths.astype(object)
    lengths = manifest.lengths.copy()
    lengths[missing] = len(chunk)
    filled = ChunkManifest.from_arrays(
        paths=paths,
        offsets=manifest.offsets,
        lengths=lengths,
        inlined={**manifest.inlined, **dict.fromkeys(positions, chunk)},
        validate_paths=False,
        separator=manifest.separator,
    ).with_source_stamps(manifest.source_stamps)
    return ManifestArray(metadata, filled)


def _encoded_fill_chunk(array: ManifestArray) -> bytes:
    """One chunk of the fill value, encoded by the array's codecs (written by zarr)."""
    metadata = replace_metadata(array.metadata, shape=chunk_shape_of(array.metadata))
    store = MemoryStore()
    config = ArrayConfig.from_dict({"write_empty_chunks": True})
    one_chunk = Array(AsyncArray(metadata=metadata, store_path=StorePath(store), config=config))
    one_chunk[...] = np.full(metadata.shape, metadata.fill_value, dtype=one_chunk.dtype)
    key = metadata.encode_chunk_key((0,) * metadata.ndim)
    buffer = sync(store.get(key, default_buffer_prototype()))
    if buffer is None:  # zarr writes every chunk when told to write empty ones
        raise AssertionError(f"zarr wrote no chunk {key!r}")
    return buffer.to_bytes()
