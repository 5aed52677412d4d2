"""Side-by-side tiles of one raster grid, joined in space by moving whole chunks.

Virtual references cannot resample or cut chunks, so tiles join only when the result is again
a regular grid of whole chunks: one CRS, one pixel size, no rotation, the same time steps and
variables, adjacent without gaps or overlaps, forming a complete rectangle, and every tile but
the last in a row or column ending on a chunk boundary. Anything else raises
:class:`MosaicError` saying which condition fails.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyproj
import xarray as xr

from virtualstac.xarray.combine import EXACT_COMBINE

__all__ = ["MosaicError", "mosaic"]


class MosaicError(ValueError):
    """Why tiles cannot be joined in space (wrapped by the caller into a typed error)."""


def mosaic(tiles: Sequence[xr.Dataset], labels: Sequence[str] | None = None) -> xr.Dataset:
    """Join ``tiles`` (virtual datasets with ``x``/``y`` coordinates and a ``spatial_ref``);
    ``labels`` name them in errors (``tile 1``, ``tile 2``... by default)."""
    names = list(labels) if labels is not None else [f"tile {n + 1}" for n in range(len(tiles))]
    _check_same_frame(tiles)
    _check_disjoint(tiles, names)
    try:
        joined = xr.combine_by_coords(
            list(tiles),
            **EXACT_COMBINE,
        )
    except ValueError as err:
        # xarray says "hypercube", "monotonic", "indexes along dimension ... are not equal",
        # and ours says which chunk would be partial: all are reasons worth passing on.
        raise MosaicError(str(err).splitlines()[0]) from err
    assert isinstance(joined, xr.Dataset)
    for axis in ("x", "y"):
        steps = np.diff(np.asarray(joined[axis].values, dtype=np.float64))
        if steps.size and not np.allclose(steps, steps[0]):
            raise MosaicError(f"the tiles leave gaps along {axis}: they are not adjacent")
    return _with_mosaic_transform(joined)


def _check_same_frame(tiles: Sequence[xr.Dataset]) -> None:
    frames = {_frame(tile) for tile in tiles}
    if len(frames) > 1:
        described = "; ".join(
            f"CRS {_crs_label(crs)}, pixel {dx:g} x {dy:g}" for crs, dx, dy in sorted(frames)
        )
        raise MosaicError(f"tiles differ in CRS or pixel size ({described})")
    _, dx, dy = frames.pop()
    origins = [(float(tile["x"].values[0]) / dx, float(tile["y"].values[0]) / dy) for tile in tiles]
    first = origins[0]
    for column, row in origins[1:]:
        for axis, shift in (("x", column - first[0]), ("y", row - first[1])):
            if not np.isclose(shift, round(shift)):
                raise MosaicError(
                    f"tiles are offset from each other by a fraction of a pixel in {axis}"
                )


def _check_disjoint(tiles: Sequence[xr.Dataset], names: Sequence[str]) -> None:
    """Refuse tiles covering the same pixels (overlapping footprints, e.g. MGRS tiles)."""
    extents = [_extent(tile) for tile in tiles]
    for n, (ax, ay) in enumerate(extents):
        for m in range(n + 1, len(extents)):
            bx, by = extents[m]
            columns = min(ax[1], bx[1]) - max(ax[0], bx[0])
            rows = min(ay[1], by[1]) - max(ay[0], by[0])
            if columns > 0 and rows > 0:
                raise MosaicError(
                    f"{names[n]} and {names[m]} overlap ({columns:g} x {rows:g} in CRS units): "
                    "references cannot choose between their pixels"
                )


def _extent(tile: xr.Dataset) -> tuple[tuple[float, float], tuple[float, float]]:
    """The ``(low, high)`` edges in x and in y of a tile's pixels."""
    edges = []
    for axis in ("x", "y"):
        values = np.asarray(tile[axis].values, dtype=np.float64)
        step = abs(float(values[1] - values[0])) if values.size > 1 else 0.0
        edges.append((float(values.min()) - step / 2, float(values.max()) + step / 2))
    return edges[0], edges[1]


def _frame(tile: xr.Dataset) -> tuple[str, float, float]:
    """CRS text and pixel size of a tile, from its ``spatial_ref`` and coordinates."""
    attrs = tile["spatial_ref"].attrs if "spatial_ref" in tile.variables else {}
    crs = str(attrs.get("crs_wkt") or attrs.get("spatial_ref") or "no CRS")
    text = str(attrs.get("GeoTransform", ""))
    values = [float(v) for v in text.split()] if text else []
    if len(values) == 6:
        if values[2] or values[4]:
            raise MosaicError("a tile's grid is rotated")
        return crs, values[1], values[5]
    x = np.asarray(tile["x"].values, dtype=np.float64)
    y = np.asarray(tile["y"].values, dtype=np.float64)
    return crs, float(x[1] - x[0]), float(y[1] - y[0])


def _crs_label(text: str) -> str:
    """A CRS as its authority code (``EPSG:32633``) or name: its WKT runs to kilobytes."""
    try:
        parsed = pyproj.CRS.from_user_input(text)
    except pyproj.exceptions.CRSError:
        return text
    authority = parsed.to_authority()
    return ":".join(authority) if authority else parsed.name


def _with_mosaic_transform(joined: xr.Dataset) -> xr.Dataset:
    """``spatial_ref`` with the GeoTransform of the joined grid (the first tile's is kept)."""
    if "spatial_ref" not in joined.variables:
        return joined
    x = np.asarray(joined["x"].values, dtype=np.float64)
    y = np.asarray(joined["y"].values, dtype=np.float64)
    dx, dy = float(x[1] - x[0]), float(y[1] - y[0])
    spatial_ref = joined["spatial_ref"].variable.copy(deep=False)
    spatial_ref.attrs = {
        **spatial_ref.attrs,
        "GeoTransform": f"{x[0] - dx / 2:.16g} {dx:.16g} 0 {y[0] - dy / 2:.16g} 0 {dy:.16g}",
    }
    return joined.assign_coords(spatial_ref=spatial_ref)
