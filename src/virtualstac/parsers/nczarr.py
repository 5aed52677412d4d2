"""NCZarr's netCDF bookkeeping in Zarr v2 metadata (stores netCDF-C writes).

netCDF-C names an array's dimensions by fully qualified dimension references (``["/x",
"/grp/y"]``), not always with xarray's ``_ARRAY_DIMENSIONS`` beside them: NCZarr 1 put them
in ``.zarray`` under ``_NCZARR_ARRAY`` (``"dimrefs"``), NCZarr 2 in ``.zattrs`` under
``_nczarr_array`` (``"dimension_references"``). The other keys (``_nczarr_attr``,
``_nczarr_group``, ``_NCProperties``, ...) are bookkeeping, which netCDF-C and xarray hide:
xarray hides every Zarr v2 attribute whose name starts with ``_nc`` in any case.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from virtualstac.manifests.attribute_types import TYPES_KEY, packing_types

__all__ = [
    "SCALAR_DIMENSION",
    "nczarr_dimensions",
    "nczarr_unlimited_dims",
    "without_netcdf_attributes",
]

#: The dimension netCDF-C gives the one axis of a scalar it stores as a one-element array.
SCALAR_DIMENSION = "_scalar_"

_ARRAY_KEYS = ("_nczarr_array", "_NCZARR_ARRAY")
_GROUP_KEYS = ("_nczarr_group", "_NCZARR_GROUP")
_DIMENSION_KEYS = ("dimensions", "dims")
_REFERENCE_KEYS = ("dimension_references", "dimrefs")


def nczarr_dimensions(
    zarray: Mapping[str, Any], zattrs: Mapping[str, Any], shape: tuple[int, ...]
) -> list[str] | None:
    """The dimension names NCZarr records for an array of ``shape``, or None if it records none.

    Each name is the last part of a dimension reference, as xarray and netCDF-C name them. A
    netCDF scalar, which NCZarr stores with one element and no reference, gets netCDF-C's
    ``_scalar_`` dimension, as netCDF-C names it for xarray.
    """
    for document in (zattrs, zarray):
        for key in _ARRAY_KEYS:
            info = document.get(key)
            if not isinstance(info, Mapping):
                continue
            for field in _REFERENCE_KEYS:
                references = info.get(field)
                if not isinstance(references, list) or not all(
                    isinstance(r, str) for r in references
                ):
                    continue
                if not references and shape == (1,):
                    return [SCALAR_DIMENSION]
                return [posixpath.basename(r.rstrip("/")) for r in references]
    return None


def nczarr_unlimited_dims(zgroup: Mapping[str, Any], zattrs: Mapping[str, Any]) -> list[str] | None:
    """The group's unlimited dimensions as netCDF-C reports them for an NCZarr group, or None
    for a group NCZarr did not write (Zarr has no such notion).

    NCZarr records a group's dimensions under ``_nczarr_group`` (in ``.zattrs``; NCZarr 1's
    ``_NCZARR_GROUP`` in ``.zgroup``), each a length or ``{"size": n, "unlimited": 1}``.
    """
    for document in (zattrs, zgroup):
        for key in _GROUP_KEYS:
            info = document.get(key)
            if not isinstance(info, Mapping):
                continue
            for field in _DIMENSION_KEYS:
                dimensions = info.get(field)
                if isinstance(dimensions, Mapping):
                    return [
                        str(name)
                        for name, dimension in dimensions.items()
                        if isinstance(dimension, Mapping) and dimension.get("unlimited")
                    ]
            return []
    return None


def without_netcdf_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` without the netCDF bookkeeping xarray hides (names starting ``_nc``),
    but for the types of packing attributes (see :mod:`virtualstac.manifests.attribute_types`)."""
    kept = {k: v for k, v in attributes.items() if not k.lower().startswith("_nc")}
    if TYPES_KEY in attributes:
        kept[TYPES_KEY] = attributes[TYPES_KEY]
    return packing_types(kept)
