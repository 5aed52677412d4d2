"""Lazy ``x``/``y`` coordinates of a regular raster grid, from its GDAL ``GeoTransform``.

A raster's coordinates follow from six numbers: built in memory, those of a GeoTIFF a billion
pixels wide take 8 GB. Parsers write them as arrays only when they fit
:attr:`~virtualstac.limits.Limits.coordinate_bytes`; otherwise the grid mapping variable's
``GeoTransform`` attribute (GDAL's and rioxarray's convention) describes them, and the virtual
dataset gets them as xarray ``RangeIndex`` coordinates, whose values are computed when indexed.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["geotransform_coordinates", "has_1d_coordinates"]

_AXES = {"x": "X", "y": "Y"}
# affine's EPSILON: rotation terms below it are rounding noise to rioxarray (Affine.is_rectilinear).
_ROTATION_NOISE = 1e-5


def has_1d_coordinates(b: float, d: float) -> bool:
    """Whether a GeoTransform of rotation terms ``b`` and ``d`` gives 1-D ``x``/``y``, as
    rioxarray decides: none, or both below 1e-5 (noise of a north-up transform, which
    ModelTransformation tags carry) and not equal (rioxarray's sign of a real rotation).

    x then varies with the column only and y with the row only, computed at the first row's
    and column's pixel centres (``0.5 * b``, ``0.5 * d`` included), as rioxarray computes them.
    """
    if b == 0 and d == 0:
        return True
    return abs(b) < _ROTATION_NOISE and abs(d) < _ROTATION_NOISE and b != d


def geotransform_coordinates(
    variables: Mapping[str, xr.Variable], sizes: Mapping[Hashable, int]
) -> xr.Coordinates:
    """Range-indexed ``x``/``y`` coordinates of pixel centres, for the dimensions of ``sizes``
    that have no variable, from the first ``GeoTransform`` attribute of ``variables``.

    Empty when no variable carries a north-up transform (:func:`has_1d_coordinates`).
    """
    import xarray as xr
    from xarray.indexes import RangeIndex

    transform = _first_transform(variables)
    missing = [dim for dim in _AXES if dim in sizes and dim not in variables]
    if transform is None or not missing:
        return xr.Coordinates()
    c, a, b, f, d, e = transform
    if not has_1d_coordinates(b, d):
        return xr.Coordinates()
    # Pixel centres: half a pixel in from the transform's corner, one pixel apart.
    ranges = {"x": (c + 0.5 * a + 0.5 * b, a), "y": (f + 0.5 * d + 0.5 * e, e)}
    variables_of: dict[Hashable, xr.Variable] = {}
    indexes: dict[Hashable, xr.Index] = {}
    for dim in missing:
        start, step = ranges[dim]
        size = sizes[dim]
        # Half a step short of the last centre's successor: the size cannot round either way.
        index = RangeIndex.arange(start, start + (size - 0.5) * step, step, dim=dim)
        coordinate = xr.Coordinates.from_xindex(index)
        variable = coordinate.variables[dim]
        variable.attrs["axis"] = _AXES[dim]
        variables_of[dim] = variable
        indexes[dim] = index
    return xr.Coordinates(variables_of, indexes=indexes)


def _first_transform(
    variables: Mapping[str, xr.Variable],
) -> tuple[float, float, float, float, float, float] | None:
    for variable in variables.values():
        text = variable.attrs.get("GeoTransform")
        if not isinstance(text, str):
            continue
        try:
            numbers = [float(v) for v in text.split()]
        except ValueError:
            continue
        if len(numbers) == 6 and numbers[1] and numbers[5]:
            c, a, b, f, d, e = numbers
            return c, a, b, f, d, e
    return None
