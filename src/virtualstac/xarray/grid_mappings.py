"""Refusing files whose grid mappings (their CRS) differ, before they are combined.

A grid mapping (``spatial_ref`` of a GeoTIFF, a netCDF ``crs`` variable) has no dimension, so
combining keeps the first file's (``compat="override"``), as ``xr.open_mfdataset`` keeps one:
tiles in other projections would be joined on coordinates that mean other places, and read as
if in the first file's CRS. References cannot reproject, so such files are refused, naming
both CRSs and files, as the STAC layer refuses Items on mixed grids.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import pyproj
import xarray as xr

from virtualstac.errors import IncompatibleArraysError

__all__ = ["check_grid_mappings_agree"]

#: Attributes that give a grid mapping's CRS as WKT (CF's, and GDAL's older name).
_WKT = ("crs_wkt", "spatial_ref")
#: Attributes of a grid mapping that do not say which CRS it is.
_NOT_CRS = frozenset({"GeoTransform", "long_name", "comment", "units", "_FillValue"})


def check_grid_mappings_agree(
    datasets: Sequence[xr.Dataset], labels: Sequence[str] | None = None
) -> None:
    """Refuse datasets whose grid mapping variable of one name gives other CRSs.

    Grid mappings are the variables named by a data variable's ``grid_mapping`` attribute,
    and the dimensionless variables with a ``crs_wkt``, ``spatial_ref`` or
    ``grid_mapping_name`` attribute. Their CRS attributes (a WKT, else CF's parameters) are
    compared as text first; where the text differs, as the CRSs they parse to (the same CRS
    written by two versions of a library joins).

    Raises
    ------
    IncompatibleArraysError
        Naming the variable, both CRSs and the datasets by their ``labels``.
    """
    names = labels if labels is not None else [f"dataset {i}" for i in range(len(datasets))]
    first = datasets[0]
    for name in _grid_mappings(first):
        seen = _crs_attributes(first.variables[name].attrs)
        if not seen:
            continue
        for label, dataset in zip(names[1:], datasets[1:], strict=True):
            other = dataset.variables.get(name)
            if other is None:
                continue
            theirs = _crs_attributes(other.attrs)
            # A WKT and CF parameters describe one CRS more or less fully: not compared.
            if theirs == seen or not theirs or ("wkt" in theirs) != ("wkt" in seen):
                continue
            ours, their_crs = _crs(seen), _crs(theirs)
            if ours is None or their_crs is None or ours == their_crs:
                continue
            raise IncompatibleArraysError(
                f"the grid mapping {str(name)!r} gives the CRS {_shown(their_crs)} in {label} "
                f"but {_shown(ours)} in {names[0]}: combined, every file's coordinates would "
                "read as the first one's CRS, and references cannot reproject; open the files "
                "of each CRS apart"
            )


def _grid_mappings(dataset: xr.Dataset) -> list[Hashable]:
    named = {
        variable.attrs.get("grid_mapping")
        for variable in dataset.variables.values()
        if isinstance(variable.attrs.get("grid_mapping"), str)
    }
    return [
        name
        for name, variable in dataset.variables.items()
        if variable.ndim == 0
        and (name in named or any(key in variable.attrs for key in (*_WKT, "grid_mapping_name")))
    ]


def _crs_attributes(attrs: Mapping[Any, Any]) -> dict[str, Any]:
    """The attributes of a grid mapping that say its CRS: its WKT if it has one, else the
    CF projection parameters."""
    for key in _WKT:
        if isinstance(attrs.get(key), str) and attrs[key]:
            return {"wkt": attrs[key]}
    return {str(k): v for k, v in attrs.items() if k not in _NOT_CRS}


def _crs(attributes: Mapping[str, Any]) -> pyproj.CRS | None:
    """The CRS the attributes give, or None when pyproj cannot read them (then nothing is
    refused: text alone does not show two CRSs differ)."""
    try:
        if "wkt" in attributes:
            return pyproj.CRS.from_wkt(attributes["wkt"])
        return pyproj.CRS.from_cf(dict(attributes))
    except (pyproj.exceptions.CRSError, TypeError, ValueError, KeyError):
        return None


def _shown(crs: pyproj.CRS) -> str:
    authority = crs.to_authority()
    return ":".join(authority) if authority else repr(crs.name)
