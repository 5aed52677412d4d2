"""Loaded times appended in the units a store already holds them in, as ``to_zarr`` appends.

Files often count time from their own start (``hours since <file date>``): their loaded time
coordinates keep those units, which differ from the ones the store was first written with. The
values must be encoded in the store's units before they are appended; the writer refuses units
that still differ, since numbers in other units would decode to other times.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
import zarr
from zarr.errors import NodeNotFoundError

from virtualstac.manifests import ManifestArray

__all__ = ["encoded_like_store", "holds_datetimes"]


def holds_datetimes(variable: xr.Variable) -> bool:
    """Whether ``variable`` holds decoded times: numpy's, or cftime's (the calendars numpy
    lacks, ``noleap`` or ``360_day``), which are objects."""
    if np.issubdtype(variable.dtype, np.datetime64):
        return True
    if variable.dtype != object or variable.size == 0:
        return False
    import cftime  # type: ignore[import-untyped]

    return isinstance(np.asarray(variable.values).flat[0], cftime.datetime)


def encoded_like_store(dataset: xr.Dataset, store: Any, group: str | None) -> xr.Dataset:
    """``dataset`` whose loaded times are encoded as the arrays of the same names in ``store``
    (at ``group``) hold them: their ``units``, ``calendar`` and data type.

    Variables the store lacks, or holds without time units, are left as they are.
    """
    loaded = [
        name
        for name, variable in dataset.variables.items()
        if not isinstance(variable.data, ManifestArray) and holds_datetimes(variable)
    ]
    if not loaded:
        return dataset
    try:
        stored = zarr.open_group(store, path=group or "", mode="r", zarr_format=3)
    except NodeNotFoundError:
        return dataset
    encodings = {}
    for name in loaded:
        array = stored.get(str(name))
        if not isinstance(array, zarr.Array):
            continue
        units = array.attrs.get("units")
        if not isinstance(units, str) or " since " not in units:
            continue
        encoding = {"units": units, "dtype": array.dtype}
        if "calendar" in array.attrs:
            encoding["calendar"] = array.attrs["calendar"]
        encodings[name] = encoding
    if not encodings:
        return dataset
    dataset = dataset.copy()
    for name, encoding in encodings.items():
        dataset[name].encoding = {**dataset[name].encoding, **encoding}
    return dataset
