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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["PACKING_ATTRIBUTES", "TYPES_KEY", "packing_types", "typed_attributes", "with_types"]

#: The attribute that records attribute types (NCZarr's name for it).
TYPES_KEY = "_nczarr_attr"
#: The attributes whose type decides the type xarray unpacks to.
PACKING_ATTRIBUTES = ("scale_factor", "add_offset")
#: The types JSON numbers are read back as.
_JSON_TYPES = (np.dtype("float64"), np.dtype("int64"))


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


def packing_types(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` with only the packing attributes' entries of their recorded types, or
    none recorded (an NCZarr store records the type of every attribute)."""
    kept = {name: value for name, value in attributes.items() if name != TYPES_KEY}
    recorded = attributes.get(TYPES_KEY)
    types = recorded.get("types") if isinstance(recorded, Mapping) else None
    if isinstance(types, Mapping):
        wanted = {name: np.dtype(types[name]) for name in PACKING_ATTRIBUTES if name in types}
        return with_types(kept, wanted)
    return kept


def typed_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` with the packing attributes as numpy scalars of their recorded types,
    and the record itself removed (as netCDF4 reads them)."""
    typed = {name: value for name, value in attributes.items() if name != TYPES_KEY}
    recorded = attributes.get(TYPES_KEY)
    types = recorded.get("types") if isinstance(recorded, Mapping) else None
    if not isinstance(types, Mapping):
        return typed
    for name in PACKING_ATTRIBUTES:
        if name in typed and name in types and isinstance(typed[name], int | float):
            typed[name] = np.dtype(types[name]).type(typed[name])
    return typed
