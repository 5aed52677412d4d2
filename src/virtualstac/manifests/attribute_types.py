"""The types of the CF packing attributes, which JSON attributes lose.

xarray unpacks a variable to the type of its ``scale_factor``/``add_offset``: an ``int16``
variable with ``float32`` ones unpacks to ``float32`` (as netCDF4 and the netcdf4 engine do),
with ``float64`` ones to ``float64``, with only an ``int16`` ``scale_factor`` to ``int16``. Zarr
attributes are JSON, whose numbers read back as ``float64`` or ``int64``, so a parser records
the type of other packing attributes beside them,
as NCZarr records attribute types (``"_nczarr_attr": {"types": {"scale_factor": "<f4"}}``);
opening values restores the type before CF decoding
(:func:`virtualstac.xarray.unpacking.open_zarr_values`). xarray hides the key when it reads
Zarr v2 metadata (Kerchunk references) itself.

The record also keeps the ``_FillValue`` of a character (``S1``) or variable-length string
variable, which cannot be an attribute: xarray's Zarr reader refuses a ``_FillValue`` on text
(its ``FillValueCoder`` has no rule for it), so the attribute would make the array unreadable
to any plain ``xr.open_zarr``. Opening values through virtualstac restores it, so the text
masks as the netcdf4 engine masks it; a plain Zarr reader reads the fill text itself.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "PACKING_ATTRIBUTES",
    "TYPES_KEY",
    "packing_types",
    "typed_attributes",
    "typed_fill_value",
    "with_character_fill",
    "with_string_fill",
    "with_types",
]

#: The attribute that records attribute types (NCZarr's name for it).
TYPES_KEY = "_nczarr_attr"
#: The attributes whose type decides the type xarray unpacks to.
PACKING_ATTRIBUTES = ("scale_factor", "add_offset")
#: The types JSON numbers are read back as.
_JSON_TYPES = (np.dtype("float64"), np.dtype("int64"))
#: The recorded type of a character variable's ``_FillValue``, kept in the record.
_CHARACTER = np.dtype("S1").str
#: The recorded type of a variable-length string variable's ``_FillValue`` (Python's name).
_STRING = "str"


def with_types(attributes: dict[str, Any], types: Mapping[str, np.dtype[Any]]) -> dict[str, Any]:
    """``attributes`` (JSON values) with the ``types`` of their packing attributes recorded
    where JSON would change them: numbers other than ``float64`` and ``int64``, which JSON
    numbers read back as (an ``int16`` ``scale_factor`` alone unpacks to ``int16``)."""
    narrow = {
        name: np.dtype(dtype).str
        for name, dtype in types.items()
        if name in PACKING_ATTRIBUTES
        and name in attributes
        and np.dtype(dtype).kind in "iuf"
        and np.dtype(dtype).newbyteorder("=") not in _JSON_TYPES
    }
    if narrow:
        attributes[TYPES_KEY] = {"types": narrow}
    return attributes


def with_character_fill(attributes: dict[str, Any], fill: bytes) -> dict[str, Any]:
    """``attributes`` of a character (``S1``) variable whose ``_FillValue`` is ``fill``, with
    the value kept in the record (base64, as xarray encodes a bytes fill value) instead of an
    attribute, which xarray's Zarr reader refuses on text."""
    return _with_recorded_fill(
        attributes, _CHARACTER, base64.standard_b64encode(fill).decode("ascii")
    )


def with_string_fill(attributes: dict[str, Any], fill: str) -> dict[str, Any]:
    """``attributes`` of a variable-length string variable whose ``_FillValue`` is ``fill``,
    with the value kept in the record instead of an attribute, which xarray's Zarr reader
    refuses on text."""
    return _with_recorded_fill(attributes, _STRING, fill)


def _with_recorded_fill(attributes: dict[str, Any], kind: str, text: str) -> dict[str, Any]:
    attributes.pop("_FillValue", None)
    recorded = attributes.get(TYPES_KEY)
    record = dict(recorded) if isinstance(recorded, Mapping) else {}
    types = record.get("types")
    record["types"] = {**(types if isinstance(types, Mapping) else {}), "_FillValue": kind}
    record["_FillValue"] = text
    attributes[TYPES_KEY] = record
    return attributes


def packing_types(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` with only the packing attributes' entries of their recorded types, or
    none recorded (an NCZarr store records the type of every attribute), and the recorded
    ``_FillValue`` of a character or string variable (:func:`with_character_fill`)."""
    kept = {name: value for name, value in attributes.items() if name != TYPES_KEY}
    recorded = attributes.get(TYPES_KEY)
    types = recorded.get("types") if isinstance(recorded, Mapping) else None
    if not isinstance(recorded, Mapping) or not isinstance(types, Mapping):
        return kept
    wanted = {name: np.dtype(types[name]) for name in PACKING_ATTRIBUTES if name in types}
    kept = with_types(kept, wanted)
    fill, kind = recorded.get("_FillValue"), types.get("_FillValue")
    if kind in (_CHARACTER, _STRING) and isinstance(fill, str):
        kept = _with_recorded_fill(kept, kind, fill)
    return kept


def typed_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` with the packing attributes as numpy scalars of their recorded types, a
    character variable's ``_FillValue`` as ``numpy.bytes_``, a string variable's as ``str``,
    and the record itself removed (as netCDF4 reads them)."""
    typed = {name: value for name, value in attributes.items() if name != TYPES_KEY}
    recorded = attributes.get(TYPES_KEY)
    if not isinstance(recorded, Mapping) or not isinstance(recorded.get("types"), Mapping):
        return typed
    types = recorded["types"]
    for name in PACKING_ATTRIBUTES:
        if name in typed and name in types and isinstance(typed[name], int | float):
            typed[name] = np.dtype(types[name]).type(typed[name])
    fill = recorded.get("_FillValue")
    if types.get("_FillValue") == _CHARACTER and isinstance(fill, str):
        # As the netcdf4 engine gives it.
        typed["_FillValue"] = np.bytes_(base64.standard_b64decode(fill))
    elif types.get("_FillValue") == _STRING and isinstance(fill, str):
        typed["_FillValue"] = fill
    return typed


def typed_fill_value(attributes: dict[str, Any], dtype: np.dtype[Any]) -> dict[str, Any]:
    """``attributes`` whose integer ``_FillValue`` is a numpy scalar of the variable's type
    ``dtype``, as netCDF4 reads it (netCDF requires the fill to be of the variable's type).

    JSON gives a Python ``int``, which xarray's decoding of ``_Unsigned = "false"`` converts
    to the signed type without wrapping: a ``ubyte`` fill of 200 overflows ``int8``, where the
    ``numpy.uint8`` netCDF4 gives becomes -56.
    """
    fill = attributes.get("_FillValue")
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" and isinstance(fill, int) and not isinstance(fill, bool):
        bounds = np.iinfo(dtype)
        if bounds.min <= fill <= bounds.max:
            attributes["_FillValue"] = dtype.type(fill)
    return attributes
