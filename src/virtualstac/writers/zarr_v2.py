"""Zarr v2 metadata for Kerchunk output, translated from a ManifestArray's Zarr v3 metadata.

Kerchunk references describe Zarr v2 stores, so each array's v3 codec chain is folded back into
v2's ``filters`` + ``compressor``, the byte order moves into the dtype, and CF fill values move
into ``fill_value`` (which zarr v2 readers, xarray included, use as the mask value).

Zarr v2 knows two chunk layouts, C and Fortran order. An array whose chunks are stored in another
axis order (a pixel-interleaved TIFF's ``(y, x, band)`` behind a ``(band, y, x)`` array) is
written in its stored order instead (:func:`in_v2_layout`): its dimensions are permuted, named as
before, so xarray reads the same values under the same names. Missing chunks of a fill value
v2 readers would mask are written inline (:mod:`virtualstac.writers.fill_chunks`).
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np
from zarr.abc.codec import ArrayArrayCodec, BytesBytesCodec
from zarr.codecs import TransposeCodec
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualstac.codecs import ComplexIntCodec, HDF5OptionalCodec, PadCodec
from virtualstac.errors import UnsupportedOperationError
from virtualstac.manifests import ManifestArray, ManifestGroup
from virtualstac.manifests.array_api import transpose
from virtualstac.manifests.metadata import (
    chunk_shape_of,
    decode_cf_fill_value,
    replace_metadata,
    same_value,
)
from virtualstac.writers.fill_chunks import fill_is_cf_fill, reads_as_null_fill, with_fill_chunks

__all__ = ["in_v2_layout", "v2_metadata", "with_v2_fill_value"]

_FILL_ATTRIBUTES = ("_FillValue", "missing_value")


def v2_metadata(
    name: str, metadata: ArrayV3Metadata, *, has_missing_chunks: bool = True
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the ``.zarray`` and ``.zattrs`` documents of one array.

    ``has_missing_chunks=False`` (every chunk referenced or inlined) lets an array without a CF
    ``_FillValue`` leave ``fill_value`` out, so that v2 readers mask nothing.
    """
    codecs: list[dict[str, Any]] = [codec.to_dict() for codec in metadata.codecs]
    dtype = np.dtype(metadata.data_type.to_native_dtype())
    filters: list[dict[str, Any]] = []
    last_is_compressor = False
    order = "C"
    serializer_seen = False
    for codec_json, codec in zip(codecs, metadata.codecs, strict=True):
        codec_name = str(codec_json["name"])
        configuration = dict(codec_json.get("configuration") or {})
        if codec_name == "bytes":
            endian = configuration.get("endian")
            if dtype.itemsize > 1 and endian is not None:
                dtype = dtype.newbyteorder("<" if endian == "little" else ">")
            serializer_seen = True
        elif codec_name in ("vlen-utf8", "vlen-bytes"):
            # Zarr v2 stores variable-length strings and bytes as objects through the same
            # encoding, named by an object codec that must come first among the filters.
            dtype = np.dtype("O")
            filters.insert(0, {"id": codec_name})
            serializer_seen = True
        elif codec_name == "transpose":
            if list(configuration["order"]) != list(range(metadata.ndim))[::-1]:
                raise UnsupportedOperationError(
                    f"array {name!r}: its chunks are stored in axis order "
                    f"{list(configuration['order'])}, which only a Zarr v3 transpose codec "
                    "describes (Zarr v2 knows C and Fortran order); write it to Icechunk, or for "
                    "a pixel-interleaved TIFF open it with TIFFParser(band_layout='native')"
                )
            order = "F" if metadata.ndim > 1 else "C"
        elif isinstance(codec, ArrayArrayCodec | BytesBytesCodec):
            if isinstance(codec, ArrayArrayCodec) and serializer_seen:
                raise UnsupportedOperationError(f"array {name!r}: codec order has no v2 form")
            filters.append(_numcodecs_config(name, codec_name, configuration))
            last_is_compressor = isinstance(codec, BytesBytesCodec)
        else:
            raise UnsupportedOperationError(
                f"array {name!r}: codec {codec_name!r} has no Zarr v2 form that Kerchunk "
                "readers decode; write the references to Icechunk instead"
            )
    compressor = filters.pop() if last_is_compressor else None
    if dtype.byteorder == ">":
        # A v2 filter reinterprets the bytes it is given as its configured data types, so they
        # name the byte order the chunks are stored in (a v3 chain holds them little-endian).
        filters = [_big_endian(config) for config in filters]
    attributes = dict(metadata.attributes)
    for key in _FILL_ATTRIBUTES:
        if key in attributes:
            attributes[key] = decode_cf_fill_value(attributes[key], dtype)
    # zarr v2 readers (xarray included) mask by fill_value, where v3 readers mask by the CF
    # _FillValue only. So fill_value carries _FillValue when there is one; otherwise it is left
    # out (null: nothing is masked) when no chunk is missing or missing chunks read as zeros
    # (or "") anyway. in_v2_layout inlines the missing chunks of any other fill value, but of
    # dates and durations, which xarray does not mask: theirs is kept, so they read as it.
    if "_FillValue" in attributes:
        fill_value = _fill_value_json(attributes.pop("_FillValue"), dtype)
    elif not has_missing_chunks or reads_as_null_fill(metadata.fill_value):
        fill_value = None
    else:
        fill_value = _fill_value_json(metadata.fill_value, dtype)
    zarray = {
        "zarr_format": 2,
        "shape": list(metadata.shape),
        "chunks": list(chunk_shape_of(metadata)) if metadata.ndim else [],
        "dtype": _dtype_json(dtype),
        "fill_value": fill_value,
        "order": order,
        "filters": filters or None,
        "compressor": compressor,
        "dimension_separator": ".",
    }
    names = metadata.dimension_names
    if names is not None:
        attributes["_ARRAY_DIMENSIONS"] = list(names)
    return zarray, attributes


def in_v2_layout(group: ManifestGroup, prefix: str = "") -> ManifestGroup:
    """``group`` as Zarr v2 holds it: every array whose chunks only a v3 ``transpose`` describes
    in stored order, and missing chunks that v2 readers would mask inlined.

    Such an array (its chain starts with a transpose that is neither C nor Fortran order) is
    transposed to the order its chunks are stored in, which drops the codec; its dimension
    names follow their axes. Missing chunks of an array without ``_FillValue`` whose fill value
    v2 readers would mask are inlined as chunks of it
    (:func:`~virtualstac.writers.fill_chunks.with_fill_chunks`).
    """
    arrays = {
        name: with_fill_chunks(prefix + name, _stored_order(array))
        for name, array in group.arrays.items()
    }
    groups = {name: in_v2_layout(sub, f"{prefix}{name}/") for name, sub in group.groups.items()}
    return ManifestGroup(arrays, groups, group.metadata.attributes)


def with_v2_fill_value(array: ManifestArray, name: str = "") -> ManifestArray:
    """``array`` with the fill value it has once written as Kerchunk and read back.

    An array without a CF ``_FillValue`` whose chunks are all there (its missing chunks inlined
    as :func:`in_v2_layout` inlines them) is written with ``fill_value: null`` (nothing to
    mask), which reads back as the data type's default, zero: a netCDF variable such as an
    integer ``crs`` (netCDF's default fill) would otherwise not join the same variable read
    from published references. ``name`` names the array in errors.
    """
    if np.dtype(array.metadata.data_type.to_native_dtype()).kind not in "biufc":
        return array
    array = with_fill_chunks(name, array)
    metadata = array.metadata
    manifest = array.manifest
    if "_FillValue" in metadata.attributes and not fill_is_cf_fill(metadata):
        # Its missing chunks are inlined now, and it is written with its _FillValue as fill.
        dtype = np.dtype(metadata.data_type.to_native_dtype())
        cf_fill = decode_cf_fill_value(metadata.attributes["_FillValue"], dtype)
        fill = np.asarray(cf_fill, dtype=dtype)[()]
        return ManifestArray(replace_metadata(metadata, fill_value=fill), manifest)
    complete = len(manifest) == math.prod(manifest.shape_chunk_grid)
    # The rule v2_metadata writes fill values by.
    written = "_FillValue" in metadata.attributes or not (
        complete or reads_as_null_fill(metadata.fill_value)
    )
    default = metadata.data_type.default_scalar()
    if written or same_value(metadata.fill_value, default):
        return array
    return ManifestArray(replace_metadata(metadata, fill_value=default), manifest)


def _stored_order(array: ManifestArray) -> ManifestArray:
    codecs = array.metadata.codecs
    if not codecs or not isinstance(codecs[0], TransposeCodec):
        return array
    order = [int(o) for o in codecs[0].order]
    if order == list(range(array.ndim))[::-1]:
        return array  # Fortran order, which v2 has
    return transpose(array, axes=order)


def _numcodecs_config(array: str, name: str, configuration: dict[str, Any]) -> dict[str, Any]:
    if name.startswith("numcodecs."):
        return {"id": name.removeprefix("numcodecs."), **configuration}
    if name.startswith("imagecodecs_"):
        return {"id": name, **configuration}
    if name == HDF5OptionalCodec.codec_name:
        # The filter's codec as a numcodecs configuration too.
        inner = configuration["codec"]
        codec = _numcodecs_config(array, inner["name"], inner.get("configuration") or {})
        return {"id": name, "size": configuration["size"], "codec": codec}
    twins = ("gzip", "zstd", PadCodec.codec_name, ComplexIntCodec.codec_name)
    if name in twins or name.startswith("virtualstac.hdf5_"):
        return {"id": name, **configuration}
    if name == "blosc":
        shuffles = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
        shuffle = shuffles[configuration.get("shuffle", "shuffle")]
        return {
            "id": "blosc",
            "cname": configuration.get("cname", "zstd"),
            "clevel": configuration.get("clevel", 5),
            "shuffle": shuffle,
            "blocksize": configuration.get("blocksize", 0),
        }
    raise UnsupportedOperationError(f"array {array!r}: codec {name!r} has no numcodecs id")


#: The numcodecs filters that reinterpret what they are given as their configured types (other
#: codecs' ``dtype``, such as imagecodecs' predictors', mean what each codec says).
_TYPED_FILTERS = frozenset(("delta", "fixedscaleoffset", "quantize", "astype"))


def _big_endian(config: dict[str, Any]) -> dict[str, Any]:
    """A numcodecs filter configuration with its multi-byte data types big-endian."""
    if config.get("id") not in _TYPED_FILTERS:
        return config
    changed = dict(config)
    for key in ("dtype", "astype", "encode_dtype", "decode_dtype"):
        if isinstance(config.get(key), str):
            dtype = np.dtype(config[key])
            if dtype.itemsize > 1 and dtype.str[0] == "<":  # "=" spelt as what it is
                changed[key] = dtype.newbyteorder(">").str
    return changed


def _dtype_json(dtype: np.dtype[Any]) -> Any:
    """The v2 ``dtype``: its ``str`` (``"<f4"``), or for a structured dtype the list of its
    fields (``[["a", ">i4"], ...]``), which ``str`` (``"|V12"``) would lose."""
    if dtype.fields is None:
        return dtype.str
    return [[name, _dtype_json(dtype.fields[name][0])] for name in dtype.names or ()]


def _fill_value_json(value: Any, dtype: np.dtype[Any]) -> Any:
    if value is None:
        return None
    if dtype.kind in "mM":
        # Zarr v2 writes a date or duration fill value as its int64 count of the dtype's unit
        # (NaT as -2**63); .item() would give a datetime that JSON cannot hold.
        return int(np.asarray(value).astype(dtype).view(np.int64))
    if isinstance(value, np.generic):
        value = value.item()
    if dtype.kind == "c":
        number = complex(value)
        # zarr v2 writes a complex fill value as its real and imaginary parts.
        return [_fill_value_json(part, np.dtype("f8")) for part in (number.real, number.imag)]
    if dtype.kind == "f":
        number = float(value)
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "Infinity" if number > 0 else "-Infinity"
        return number
    if dtype.kind in "SVO" and isinstance(value, bytes):
        return base64.standard_b64encode(value).decode("ascii")
    if dtype.kind == "b":
        return bool(value)
    if dtype.kind in "iu":
        return int(value)
    return value
