"""Describing a dataset with the STAC datacube extension (``cube:dimensions``, ``cube:variables``).

The description is built from the dataset's metadata and its loaded coordinates only, so it
reads no chunk: spatial dimensions (``x``/``y``, ``lon``/``lat``, or CF ``axis``) get their
extent, step and reference system (an EPSG code when the CRS has one, WKT2 otherwise), time
gets its ISO 8601 extent and step (dates of a CF calendar other than the standard one, such as
``noleap`` or ``360_day``, as that calendar writes them, the calendar named in its description),
other dimensions their extent or values.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import pyproj
import xarray as xr
from pystac.extensions.datacube import Dimension, Variable

from virtualstac.manifests import ManifestArray

__all__ = ["datacube_fields"]

_X_NAMES = frozenset({"x", "lon", "longitude"})
_Y_NAMES = frozenset({"y", "lat", "latitude"})
_Z_NAMES = frozenset({"z", "level", "lev", "height", "depth", "plev", "altitude"})
_GEOGRAPHIC_NAMES = frozenset({"lon", "longitude", "lat", "latitude"})
_MAX_VALUES = 100


def datacube_fields(dataset: xr.Dataset) -> tuple[dict[str, Dimension], dict[str, Variable]]:
    """The datacube dimensions and variables that describe ``dataset``.

    Data variables are ``data``, other non-dimension coordinates ``auxiliary``; ``unit`` and
    ``description`` come from the CF ``units`` and ``long_name``/``description`` attributes.
    """
    reference_system = _reference_system(dataset)
    dimensions = {
        str(name): Dimension.from_dict(_dimension(dataset, name, reference_system))
        for name in dataset.dims
    }
    variables: dict[str, Variable] = {}
    for name, variable in dataset.variables.items():
        if name in dataset.dims:
            continue
        kind = "data" if name in dataset.data_vars else "auxiliary"
        fields: dict[str, Any] = {"dimensions": [str(d) for d in variable.dims], "type": kind}
        unit = variable.attrs.get("units")
        if isinstance(unit, str) and unit:
            fields["unit"] = unit
        text = variable.attrs.get("long_name") or variable.attrs.get("description")
        if isinstance(text, str) and text:
            fields["description"] = text
        variables[str(name)] = Variable.from_dict(fields)
    return dimensions, variables


def _dimension(dataset: xr.Dataset, name: Hashable, reference_system: Any) -> dict[str, Any]:
    size = int(dataset.sizes[name])
    coordinate = dataset.coords.get(name)
    values = _loaded_values(coordinate)
    axis = _axis(str(name), coordinate)
    if values is not None and values.size and np.issubdtype(values.dtype, np.datetime64):
        return _temporal(values)
    if values is not None and values.size and _calendar(values) is not None:
        return _calendar_temporal(values)
    if axis is not None and values is not None and values.size and _is_number(values):
        fields: dict[str, Any] = {
            "type": "spatial",
            "axis": axis,
            "extent": [float(np.nanmin(values)), float(np.nanmax(values))],
        }
        step = _regular_step(values)
        if step is not None:
            fields["step"] = step
        if axis in ("x", "y"):
            system = 4326 if str(name) in _GEOGRAPHIC_NAMES else reference_system
            if system is not None:
                fields["reference_system"] = system
        elif coordinate is not None and isinstance(coordinate.attrs.get("units"), str):
            fields["unit"] = coordinate.attrs["units"]
        return fields
    fields = {"type": str(name)}
    if values is not None and values.size and _is_number(values):
        fields["extent"] = [float(np.nanmin(values)), float(np.nanmax(values))]
    elif values is not None and values.size and values.size <= _MAX_VALUES:
        fields["values"] = [str(v) for v in values.tolist()]
    else:
        fields["extent"] = [0, max(size - 1, 0)]
        fields["description"] = f"{size} positions without a coordinate"
    return fields


def _loaded_values(coordinate: xr.DataArray | None) -> np.ndarray[Any, Any] | None:
    """A coordinate's values if they are in memory (a virtual coordinate would need a read)."""
    if coordinate is None or isinstance(coordinate.data, ManifestArray):
        return None
    return np.asarray(coordinate.values)


def _is_number(values: np.ndarray[Any, Any]) -> bool:
    return bool(np.issubdtype(values.dtype, np.number)) and bool(np.isfinite(values).any())


def _axis(name: str, coordinate: xr.DataArray | None) -> str | None:
    declared = str(coordinate.attrs.get("axis", "")).lower() if coordinate is not None else ""
    if declared in ("x", "y", "z"):
        return declared
    lowered = name.lower()
    if lowered in _X_NAMES:
        return "x"
    if lowered in _Y_NAMES:
        return "y"
    if lowered in _Z_NAMES:
        return "z"
    return None


def _regular_step(values: np.ndarray[Any, Any]) -> float | None:
    if values.size < 2:
        return None
    steps = np.diff(values.astype(np.float64))
    if np.allclose(steps, steps[0], rtol=1e-9, atol=0):
        return float(steps[0])
    return None


def _temporal(values: np.ndarray[Any, Any]) -> dict[str, Any]:
    seconds = values.astype("datetime64[s]")
    fields: dict[str, Any] = {
        "type": "temporal",
        "extent": [_iso(seconds.min()), _iso(seconds.max())],
    }
    if values.size >= 2:
        steps = np.unique(np.diff(values).astype("timedelta64[s]").astype(np.int64))
        fields["step"] = _duration(int(steps[0])) if steps.size == 1 and steps[0] > 0 else None
    return fields


def _calendar(values: np.ndarray[Any, Any]) -> str | None:
    """The CF calendar of times xarray decoded as ``cftime`` dates, None for other values."""
    if values.dtype != object:
        return None
    calendars = {getattr(v, "calendar", None) for v in values.flat}
    return calendars.pop() if len(calendars) == 1 and None not in calendars else None


def _calendar_temporal(values: np.ndarray[Any, Any]) -> dict[str, Any]:
    """A temporal dimension of ``cftime`` dates: each is the date its calendar names."""
    calendar = _calendar(values)
    fields: dict[str, Any] = {
        "type": "temporal",
        "extent": [_calendar_iso(values.min()), _calendar_iso(values.max())],
    }
    if calendar not in ("standard", "gregorian", "proleptic_gregorian"):
        fields["description"] = f"dates in the {calendar} calendar"
    if values.size >= 2:
        steps = {round(step.total_seconds()) for step in np.diff(values.ravel())}
        step = steps.pop() if len(steps) == 1 else 0
        fields["step"] = _duration(step) if step > 0 else None
    return fields


def _calendar_iso(moment: Any) -> str:
    return f"{moment.year:04d}-{moment.strftime('%m-%dT%H:%M:%S')}Z"


def _iso(moment: np.datetime64) -> str:
    return str(np.datetime_as_string(moment, unit="s")) + "Z"


def _duration(seconds: int) -> str:
    """An ISO 8601 duration in the largest whole unit."""
    if seconds % 86400 == 0:
        return f"P{seconds // 86400}D"
    if seconds % 3600 == 0:
        return f"PT{seconds // 3600}H"
    if seconds % 60 == 0:
        return f"PT{seconds // 60}M"
    return f"PT{seconds}S"


def _reference_system(dataset: xr.Dataset) -> int | str | None:
    """The EPSG code, or WKT2, of the CRS a CF grid mapping (``spatial_ref``, ...) describes."""
    names = {
        str(v.attrs["grid_mapping"]).split(":")[0]
        for v in dataset.variables.values()
        if "grid_mapping" in v.attrs
    } | {"spatial_ref"}
    for name in sorted(names):
        if name not in dataset.variables:
            continue
        attrs = dataset.variables[name].attrs
        wkt = attrs.get("crs_wkt") or attrs.get("spatial_ref")
        if not wkt:
            continue
        crs = pyproj.CRS.from_wkt(str(wkt))
        code = crs.to_epsg()
        return int(code) if code is not None else str(crs.to_wkt())
    return None
