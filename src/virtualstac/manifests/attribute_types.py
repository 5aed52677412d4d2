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

Non-finite floats are recorded too: strict JSON (the Kerchunk and Icechunk writers') spells
NaN and the infinities ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, text a plain Zarr reader
cannot tell from a string attribute. A float attribute holding one of them (``valid_max = inf``,
``missing_value = NaN``, a global ``[inf, -inf]``) has its type recorded, and reads back as the
numpy float (or array of floats) of that type netCDF4 and h5netcdf give, whatever spelling the
store used. So do complex attributes (an HDF5 file's, which h5netcdf reads), which JSON holds
as ``[real, imaginary]`` pairs. Other numbers read back as JSON gives them (Python ``int`` and
``float``, lists for arrays), equal to netCDF4's numpy values but not of their types.

The record also keeps the ``_FillValue`` of a character (``S1``) or variable-length string
variable, which cannot be an attribute: xarray's Zarr reader refuses a ``_FillValue`` on text
(its ``FillValueCoder`` has no rule for it), so the attribute would make the array unreadable
to any plain ``xr.open_zarr``. Opening values through virtualstac restores it, so the text
masks as the netcdf4 engine masks it; a plain Zarr reader reads the fill text itself.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "NON_FINITE_SPELLINGS",
    "PACKING_ATTRIBUTES",
    "TYPES_KEY",
    "decoding_record",
    "non_finite",
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
#: How strict JSON (the writers', Icechunk's) spells non-finite numbers, as zarr spells them.
NON_FINITE_SPELLINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
#: The recorded type of a character variable's ``_FillValue``, kept in the record.
_CHARACTER = np.dtype("S1").str
#: The recorded type of a variable-length string variable's ``_FillValue`` (Python's name).
_STRING = "str"


def with_types(attributes: dict[str, Any], types: Mapping[str, np.dtype[Any]]) -> dict[str, Any]:
    """``attributes`` (JSON values) with the ``types`` recorded where JSON would change them:
    packing attributes of numbers other than ``float64`` and ``int64``, which JSON numbers read
    back as (an ``int16`` ``scale_factor`` alone unpacks to ``int16``), float attributes
    holding a NaN or an infinity, which strict JSON spells as text, and complex ones, which
    JSON holds as ``[real, imaginary]`` pairs. A record already among ``attributes`` is kept,
    these types added to it."""
    recorded_types: dict[str, str] = {}
    for name, dtype in types.items():
        dtype = np.dtype(dtype)
        # A _FillValue is encoded as xarray's Zarr reader decodes it (base64 for floats).
        if name not in attributes or dtype.kind not in "iufc" or name == "_FillValue":
            continue
        narrow = dtype.newbyteorder("=") not in _JSON_TYPES
        packing = name in PACKING_ATTRIBUTES and narrow and dtype.kind != "c"
        spelled = dtype.kind == "f" and non_finite(attributes[name])
        if packing or spelled or dtype.kind == "c":
            recorded_types[name] = dtype.newbyteorder("=").str
    if recorded_types:
        recorded = attributes.get(TYPES_KEY)
        record = dict(recorded) if isinstance(recorded, Mapping) else {}
        types_before = record.get("types")
        before = dict(types_before) if isinstance(types_before, Mapping) else {}
        record["types"] = {**before, **recorded_types}
        attributes[TYPES_KEY] = record
    return attributes


def non_finite(value: Any) -> bool:
    """Whether the JSON value ``value`` holds a NaN or an infinity, as a number or spelled
    (:data:`NON_FINITE_SPELLINGS`)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, str):
        return value in NON_FINITE_SPELLINGS
    if isinstance(value, list):
        return any(non_finite(item) for item in value)
    return False


def _typed(value: Any, dtype: np.dtype[Any]) -> Any:
    """The JSON value of a float or complex attribute recorded as ``dtype`` as netCDF4 and
    h5netcdf give it: a numpy scalar of that type, or an array of them; None if it is not
    numbers (spelled or not), or ``[real, imaginary]`` pairs of them for complex numbers."""
    if dtype.kind == "c" and isinstance(value, list) and len(value) == 2:
        parts = [_number(part) for part in value]
        if parts[0] is not None and parts[1] is not None:
            return dtype.type(complex(parts[0], parts[1]))
    if isinstance(value, list):
        items = [_typed(item, dtype) for item in value]
        if any(item is None for item in items):
            return None
        try:
            return np.array(items, dtype=dtype)
        except ValueError:  # a ragged list: not what a numeric attribute holds
            return None
    number = _number(value) if dtype.kind == "f" else None
    return None if number is None else dtype.type(number)


def _number(value: Any) -> float | None:
    """A JSON number, or a non-finite one spelled as text, as a float; None otherwise."""
    if isinstance(value, str):
        return NON_FINITE_SPELLINGS.get(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


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


def decoding_record(attributes: Mapping[str, Any]) -> Any:
    """The part of ``attributes``' type record that decoding the values depends on: the types
    of the packing attributes and a recorded ``_FillValue``; None without any. The types of
    other attributes (a ``valid_max`` of ``inf``) say how they read, not how the values do, so
    arrays differing in those only can be joined."""
    recorded = attributes.get(TYPES_KEY)
    if not isinstance(recorded, Mapping):
        return recorded
    types = recorded.get("types")
    decoding: dict[str, Any] = {}
    if isinstance(types, Mapping):
        kept = {n: t for n, t in types.items() if n in (*PACKING_ATTRIBUTES, "_FillValue")}
        if kept:
            decoding["types"] = kept
    if "_FillValue" in recorded:
        decoding["_FillValue"] = recorded["_FillValue"]
    return decoding or None


def packing_types(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` with only the entries of their recorded types :func:`with_types` makes
    (an NCZarr store records the type of every attribute): the packing attributes', and those
    of float attributes holding non-finite numbers; and the recorded ``_FillValue`` of a
    character or string variable (:func:`with_character_fill`)."""
    kept = {name: value for name, value in attributes.items() if name != TYPES_KEY}
    recorded = attributes.get(TYPES_KEY)
    types = recorded.get("types") if isinstance(recorded, Mapping) else None
    if not isinstance(recorded, Mapping) or not isinstance(types, Mapping):
        return kept
    wanted = {name: np.dtype(types[name]) for name in types if _is_type(types[name])}
    kept = with_types(kept, wanted)
    fill, kind = recorded.get("_FillValue"), types.get("_FillValue")
    if kind in (_CHARACTER, _STRING) and isinstance(fill, str):
        kept = _with_recorded_fill(kept, kind, fill)
    return kept


def _is_type(recorded: Any) -> bool:
    """Whether ``recorded`` is a numpy type's name (NCZarr also records ``">S1"``, ``"str"``)."""
    try:
        return isinstance(recorded, str) and np.dtype(recorded).kind in "iufc"
    except TypeError:
        return False


def typed_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` with the packing attributes as numpy scalars of their recorded types,
    float attributes holding NaN or infinities and complex ones as numpy scalars (or arrays) of
    theirs, a
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
    for name, recorded_type in types.items():
        if name not in typed or name == "_FillValue" or not _is_type(recorded_type):
            continue
        dtype = np.dtype(recorded_type)
        if dtype.kind == "c" or (dtype.kind == "f" and non_finite(typed[name])):
            value = _typed(typed[name], dtype)
            if value is not None:
                typed[name] = value
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
