"""Zarr v2 data types and fill values as Zarr v3 metadata holds them.

What :mod:`virtualstac.parsers.zarr_v2` needs to translate one ``.zarray``'s ``dtype`` and
``fill_value``: structured dtypes (Kerchunk's HDF5 compounds) in one byte order, fill values
read as zarr reads them (``"NaN"``, base64 bytes, ``"NaT"``), and the CF ``_FillValue`` xarray's
Zarr v3 reader decodes for them.
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Any

import numpy as np

from virtualstac.errors import VirtualStacError

__all__ = [
    "V2MetadataError",
    "byte_orders",
    "cf_fill_attribute",
    "fill_value_of",
    "structured_dtype",
]

_NAT = -(2**63)  # NaT's int64


class V2MetadataError(VirtualStacError, ValueError):
    """Zarr v2 metadata is malformed, or has no Zarr v3 equivalent."""


def structured_dtype(fields: list[Any], where: str) -> np.dtype[Any]:
    """A v2 structured dtype (``[["a", "<i4"], ["b", ">f8"]]``, as Kerchunk writes an HDF5
    compound) as zarr reads it, in one byte order: Zarr v3 keeps the byte order of a whole array
    in its ``bytes`` codec, so fields stored in both orders have no v3 equivalent."""
    from zarr.core.dtype import get_data_type_from_json

    try:
        zdtype = get_data_type_from_json({"name": fields, "object_codec_id": None}, zarr_format=2)
    except (TypeError, ValueError) as err:  # subarray fields, object fields, unknown types
        raise V2MetadataError(
            f"{where}: structured dtype {fields!r:.200} has no Zarr v3 equivalent ({err})"
        ) from err
    dtype = np.dtype(zdtype.to_native_dtype())
    if len(byte_orders(dtype)) > 1:
        raise V2MetadataError(
            f"{where}: structured dtype {fields!r:.200} mixes little- and big-endian fields; "
            "Zarr v3 stores one byte order per array"
        )
    return dtype


def byte_orders(dtype: np.dtype[Any]) -> set[str]:
    """The byte orders (``"<"``, ``">"``) of a dtype's multi-byte values, fields included."""
    if dtype.fields is not None:
        return set().union(*(byte_orders(dtype.fields[name][0]) for name in dtype.names or ()))
    if dtype.itemsize <= 1 or dtype.byteorder == "|" or dtype.kind in "SVO":
        return set()
    return {dtype.str[0]}  # "=" (native) spelt as what it is


def fill_value_of(value: Any, dtype: np.dtype[Any], where: str) -> Any:
    """The v2 JSON fill value as a Python scalar of ``dtype`` (None stays None)."""
    if value is None:
        return None
    try:
        if dtype.kind == "f":
            return _rounded(_float(value), dtype)
        if dtype.kind == "c":
            real, imag = value
            return _rounded(complex(_float(real), _float(imag)), dtype)
        if dtype.kind in "SVO":  # fixed-length bytes, raw bytes and vlen-bytes objects
            return base64.standard_b64decode(value)
        if dtype.kind == "b":
            return bool(value)
        if dtype.kind in "iu":
            number = float(value) if not isinstance(value, int) else value
            if number != int(number):
                raise ValueError(f"{value!r} is not an integer")
            return int(number)
        if dtype.kind in "mM":
            # zarr reads "NaT" (some writers spell the missing date so) as numpy does.
            return _NAT if value == "NaT" else int(value)
        return value
    except (TypeError, ValueError) as err:
        raise V2MetadataError(f"{where}: fill_value {value!r} is not a {dtype} value") from err


def _float(value: Any) -> float:
    """A v2 float as zarr reads it: a number, ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, or
    any other text Python reads as a float (``"1.5"``, ``"nan"``, ``"1e400"``)."""
    if isinstance(value, str):
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        return special[value] if value in special else float(value)
    return float(value)


def _rounded(number: Any, dtype: np.dtype[Any]) -> Any:
    """``number`` as ``dtype`` holds it (float32's 0.1 is 0.10000000149...; 1e40 is inf), as
    zarr reads a v2 fill value: xarray masks the values equal to the fill value, and a float32
    value never equals a float64 0.1."""
    with np.errstate(over="ignore"):
        return dtype.type(number).item()


def cf_fill_attribute(value: Any, dtype: np.dtype[Any], where: str) -> Any:
    """``_FillValue`` as xarray's Zarr v3 reader decodes it for ``dtype`` (None: no rule)."""
    try:
        if dtype.kind == "f":
            number = _rounded(_float(value), dtype)
            return base64.standard_b64encode(struct.pack("<d", number)).decode("ascii")
        if dtype.kind == "c":
            number = _rounded(complex(value), dtype)
            return [
                base64.standard_b64encode(struct.pack("<d", part)).decode("ascii")
                for part in (number.real, number.imag)
            ]
        if dtype.kind in "iu":
            return int(value)
        if dtype.kind == "b":
            return bool(value)
    except (TypeError, ValueError) as err:
        raise V2MetadataError(f"{where}: _FillValue {value!r} is not a {dtype} value") from err
    # Strings, bytes, dates and durations: xarray's Zarr v3 reader has no _FillValue rule for
    # them (it fails to open such an array that has one).
    return None
