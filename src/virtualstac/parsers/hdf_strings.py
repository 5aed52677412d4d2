"""Variable-length string datasets, whose chunks hold heap addresses: read and inlined.

The strings are read as netCDF reads them: UTF-8 whatever the character set says, the chunks
never written as the dataset's fill value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from virtualstac.errors import VirtualStacError
from virtualstac.limits import check_coordinate
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.metadata import create_v3_array_metadata, grid_shape
from virtualstac.parsers.hdf_chunks import inlined_manifest
from virtualstac.parsers.hdf_metadata import Fail, Member, encode_fill_attributes

__all__ = ["string_array", "string_fill", "strings_by_chunk"]


def string_array(
    member: Member,
    shape: tuple[int, ...],
    dims: list[str],
    attributes: dict[str, Any],
    url: str,
    fail: Fail,
) -> ManifestArray:
    """The array of variable-length string dataset ``member`` of the file at ``url``, its
    strings read and inlined (its chunks hold heap addresses); ``fail`` refuses it."""
    from numcodecs.vlen import VLenUTF8

    # Each string is at least a Python object reference once read.
    check_coordinate(member.node.size * 8, source=url, name=member.path)

    ds = member.node
    dtype = np.dtypes.StringDType()
    stored = member.attrs.get("_FillValue")
    encode_fill_attributes(attributes, dtype, member.path, fail, stored)
    chunks = tuple(max(int(s), 1) for s in ds.shape)
    try:
        try:
            # UTF-8 whatever the character set says, as netCDF reads them: writers mark
            # UTF-8 text ASCII (C's default), which h5py would refuse to decode.
            values = np.asarray(ds.asstr("utf-8")[()], dtype=object)
        except OSError:
            # HDF5 refuses to read strings of chunks never written from a file open
            # read-only ("no write intent"); the chunks written read one by one.
            values = strings_by_chunk(member)
    except OSError as err:
        raise fail(member.path, f"has strings HDF5 could not read: {err}") from err
    except VirtualStacError:
        raise  # a damaged heap (hdf_heaps), not an encoding
    except (ValueError, UnicodeDecodeError) as err:
        raise fail(member.path, f"has strings that are not UTF-8: {err}") from err
    metadata = create_v3_array_metadata(
        shape=shape,
        data_type=dtype,
        chunk_shape=chunks,
        # Records past the dataset's extent read as netCDF reads them: its fill value.
        fill_value=string_fill(member),
        codecs=[{"name": "vlen-utf8"}],
        attributes=attributes,
        dimension_names=dims,
    )
    # No records stored: no chunk (even zero strings encode to a length header).
    data = VLenUTF8().encode(np.ascontiguousarray(values.reshape(-1))) if values.size else b""
    return ManifestArray(metadata, inlined_manifest(grid_shape(shape, chunks), bytes(data)))


def string_fill(member: Member) -> str:
    """What a variable-length string dataset's unwritten strings read as: its fill value, the
    empty string unless it has one (netCDF's ``NC_FILL_STRING``)."""
    fill = member.node.fillvalue
    return fill.decode("utf-8") if isinstance(fill, bytes) else str(fill or "")


def strings_by_chunk(member: Member) -> npt.NDArray[np.object_]:
    """The variable-length strings of a dataset read chunk by chunk, the chunks never written
    reading as its fill value (the empty string unless it has one), as netCDF reads them."""
    ds = member.node
    values = np.full(ds.shape, string_fill(member), dtype=object)
    if member.chunks is None:
        return values  # contiguous storage reads whole or never was written
    offsets: list[tuple[int, ...]] = []
    ds.id.chunk_iter(lambda info: offsets.append(info.chunk_offset))
    for offset in offsets:
        region = tuple(
            slice(start, min(start + size, extent))
            for start, size, extent in zip(offset, member.chunks, ds.shape, strict=True)
        )
        values[region] = ds.asstr("utf-8")[region]
    return values
