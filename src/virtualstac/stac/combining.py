"""Combining the datasets of STAC assets: one Item's assets merged, Items joined in time or space.

Virtual references cannot resample, so assets or Items on different raster grids (CRS, shape or
transform) are refused with :class:`MixedGridsError`, which names them and says how the grids
differ, unless ``group_by="grid"`` asks for one dataset per :class:`Grid`.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import pyproj
import pystac
import xarray as xr

from virtualstac.errors import (
    IncompatibleArraysError,
)
from virtualstac.manifests.array import ManifestArray
from virtualstac.stac.grouping import (
    GroupBy,
    OverlappingItemsError,
    group_items,
    item_time,
    time_order,
)
from virtualstac.stac.mosaic import MosaicError, mosaic
from virtualstac.xarray.combine import check_labels_agree, concat_virtual

__all__ = ["MIXED_GRIDS_ADVICE", "Grid", "MixedGridsError"]


class MixedGridsError(IncompatibleArraysError):
    """Assets or Items lie on different raster grids, which references cannot resample."""


@dataclass(frozen=True)
class Grid:
    """A raster grid: CRS, shape ``(y, x)`` and GDAL geotransform ``(c, a, b, f, d, e)``.

    The keys of the dictionaries ``group_by="grid"`` returns; assets without a raster grid
    (netCDF, Zarr, Kerchunk) are under the key ``None``.
    """

    crs: str | None
    shape: tuple[int, int]
    transform: tuple[float, float, float, float, float, float] | None

    @property
    def resolution(self) -> tuple[float, float] | None:
        """Pixel size ``(x, y)``, positive, for unrotated grids with a transform."""
        if self.transform is None:
            return None
        return abs(self.transform[1]), abs(self.transform[5])

    def __str__(self) -> str:
        resolution = self.resolution
        size = f", {resolution[0]:g} x {resolution[1]:g} pixels" if resolution else ""
        origin = (
            f", origin ({self.transform[0]:.10g}, {self.transform[3]:.10g})"
            if self.transform
            else ""
        )
        return (
            f"{self.crs or 'no CRS'}, {self.shape[0]} rows x {self.shape[1]} columns{size}{origin}"
        )

    def differences(self, other: Grid) -> str:
        """Say how ``other`` differs from this grid."""
        found = []
        if self.crs != other.crs:
            found.append(f"CRS {self.crs} vs {other.crs}")
        if self.shape != other.shape:
            found.append(f"shape {self.shape} vs {other.shape}")
        if self.resolution != other.resolution:
            found.append(f"pixel size {self.resolution} vs {other.resolution}")
        if self.transform is not None and other.transform is not None:
            if (self.transform[0], self.transform[3]) != (other.transform[0], other.transform[3]):
                found.append(
                    f"origin {(self.transform[0], self.transform[3])} vs "
                    f"{(other.transform[0], other.transform[3])}"
                )
        return "; ".join(found) or "transforms differ"


def _grid_of(dataset: xr.Dataset) -> Grid | None:
    """The raster grid of a dataset with ``x``/``y`` dimensions, or None for other data."""
    if not {"x", "y"} <= set(dataset.dims):
        return None
    shape = (int(dataset.sizes["y"]), int(dataset.sizes["x"]))
    crs = None
    transform = None
    if "spatial_ref" in dataset.variables:
        attrs = dataset["spatial_ref"].attrs
        wkt = attrs.get("crs_wkt") or attrs.get("spatial_ref")
        if wkt:
            parsed = pyproj.CRS.from_wkt(wkt)
            authority = parsed.to_authority()
            crs = ":".join(authority) if authority else parsed.to_wkt()
        text = attrs.get("GeoTransform")
        if text:
            values = tuple(float(v) for v in str(text).split())
            if len(values) == 6:
                transform = values
    if transform is None and "x" in dataset.coords and "y" in dataset.coords:
        transform = _transform_from_coordinates(dataset)
    return Grid(crs=crs, shape=shape, transform=transform)


def _transform_from_coordinates(
    dataset: xr.Dataset,
) -> tuple[float, float, float, float, float, float] | None:
    x = np.asarray(dataset["x"].values, dtype=np.float64)
    y = np.asarray(dataset["y"].values, dtype=np.float64)
    if x.size < 2 or y.size < 2:
        return None
    a = float(x[1] - x[0])
    e = float(y[1] - y[0])
    return (float(x[0] - a / 2), a, 0.0, float(y[0] - e / 2), 0.0, e)


def _combine_assets(
    item_id: str, parts: list[tuple[str, xr.Dataset]]
) -> dict[Grid | None, xr.Dataset]:
    """Merge an Item's asset datasets, one dataset per grid."""
    by_grid: dict[Grid | None, list[tuple[str, xr.Dataset]]] = defaultdict(list)
    for key, dataset in parts:
        by_grid[_grid_of(dataset)].append((key, dataset))
    return {grid: _merge(item_id, members) for grid, members in by_grid.items()}


def _merge(item_id: str, parts: list[tuple[str, xr.Dataset]]) -> xr.Dataset:
    owners: dict[str, str] = {}
    for key, dataset in parts:
        for name in dataset.data_vars:
            if str(name) in owners:
                raise IncompatibleArraysError(
                    f"item {item_id!r}: assets {owners[str(name)]!r} and {key!r} both have a "
                    f"variable {name!r}; give one of them another name with virtual:variable "
                    "or open them separately with assets=[...]"
                )
            owners[str(name)] = key
    if len(parts) == 1:
        return parts[0][1]
    try:
        merged = xr.merge(
            [dataset for _, dataset in parts],
            compat="override",
            join="exact",
            combine_attrs="drop_conflicts",
        )
    except ValueError as err:
        keys = ", ".join(key for key, _ in parts)
        raise IncompatibleArraysError(
            f"item {item_id!r}: the coordinates of assets {keys} do not align ({err}); "
            "references cannot be reindexed, so open the assets separately"
        ) from err
    return merged


#: What a :class:`MixedGridsError` advises, which the command line words with its own options.
MIXED_GRIDS_ADVICE = (
    "Virtual references cannot resample: choose assets on one grid with assets=[...], "
    "or pass group_by='grid' for one dataset per grid."
)


def _mixed_grids_error(what: str, groups: Mapping[Grid | None, list[str]]) -> MixedGridsError:
    grids = [grid for grid in groups if grid is not None]
    lines = [f"  {', '.join(groups[grid])}: {grid}" for grid in grids]
    reasons = [grids[0].differences(other) for other in grids[1:]]
    return MixedGridsError(
        f"{what} lie on {len(grids)} different grids ({'; '.join(reasons)}):\n"
        + "\n".join(lines)
        + "\n"
        + MIXED_GRIDS_ADVICE
    )


def _single(
    item_id: str, grouped: dict[Grid | None, xr.Dataset], group_by: Literal["grid"] | None
) -> xr.Dataset | dict[Grid | None, xr.Dataset]:
    if group_by == "grid":
        return grouped
    rasters = [grid for grid in grouped if grid is not None]
    if len(rasters) > 1:
        members: dict[Grid | None, list[str]] = {
            grid: [str(name) for name in grouped[grid].data_vars] for grid in rasters
        }
        raise _mixed_grids_error(f"the assets of item {item_id!r}", members)
    return _merge(item_id, [(str(grid), dataset) for grid, dataset in grouped.items()])


def _combine_items(
    items: list[pystac.Item],
    grouped: dict[str, dict[Grid | None, xr.Dataset]],
    dims: Mapping[str, str],
    group_by: Literal["grid"] | None,
    groupby: GroupBy = "time",
) -> xr.Dataset | dict[Grid | None, xr.Dataset]:
    """Join the Items' datasets: time steps as ``groupby`` forms them, tiles side by side."""
    times = {item.id: group.time for group in group_items(items, groupby) for item in group.items}
    ordered = sorted(
        items, key=lambda item: (time_order(times[item.id]), time_order(item_time(item)), item.id)
    )
    if group_by is None:
        for item in ordered:
            rasters = [grid for grid in grouped[item.id] if grid is not None]
            if len(rasters) > 1:
                members: dict[Grid | None, list[str]] = {
                    grid: [str(name) for name in grouped[item.id][grid].data_vars]
                    for grid in rasters
                }
                raise _mixed_grids_error(f"the assets of item {item.id!r}", members)
        grids: dict[Grid | None, list[str]] = defaultdict(list)
        for item in ordered:
            for grid in grouped[item.id]:
                grids[grid].append(item.id)
        merged = {
            item.id: _merge(item.id, [(str(g), d) for g, d in grouped[item.id].items()])
            for item in ordered
        }
        rasters = [grid for grid in grids if grid is not None]
        if len(rasters) > 1:
            if None in grids:
                raise _gridless_tiles_error(grids, grouped)
            return _mosaic_of(ordered, grids, merged, dims, times)
        return _concat_items(ordered, merged, dims, times)
    result: dict[Grid | None, xr.Dataset] = {}
    all_grids = {grid for item in ordered for grid in grouped[item.id]}
    for grid in all_grids:
        sharing = [item for item in ordered if grid in grouped[item.id]]
        result[grid] = _concat_items(
            sharing, {item.id: grouped[item.id][grid] for item in sharing}, dims, times
        )
    return result


def _gridless_tiles_error(
    grids: Mapping[Grid | None, list[str]], grouped: Mapping[str, Mapping[Grid | None, xr.Dataset]]
) -> MixedGridsError:
    """Tiles are joined in space, which data without ``x``/``y`` (netCDF, Zarr) cannot be."""
    tiles = sorted({item for grid, ids in grids.items() if grid is not None for item in ids})
    others = [
        f"{item!r} (variables {', '.join(map(str, grouped[item][None].data_vars))})"
        for item in grids[None]
    ]
    return MixedGridsError(
        f"items {_shown(tiles)} lie on {len(grids) - 1} raster grids, to be joined side by side, "
        f"but item{'s' if len(others) > 1 else ''} {', '.join(others)} "
        f"{'have' if len(others) > 1 else 'has'} data on no raster grid (no x/y dimensions: "
        "netCDF, HDF5, Zarr...), which cannot be joined with tiles. Open the raster items and "
        "the others separately, or pass group_by='grid' for one dataset per grid (the data "
        "without one under the key None)."
    )


def _shown(ids: list[str]) -> str:
    """Item ids for a message: the first three and how many more."""
    return ", ".join(map(repr, ids[:3])) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def _mosaic_of(
    items: list[pystac.Item],
    grids: Mapping[Grid | None, list[str]],
    merged: Mapping[str, xr.Dataset],
    dims: Mapping[str, str],
    times: Mapping[str, np.datetime64],
) -> xr.Dataset:
    """Items on several tiles: a datacube per tile along time, the tiles joined in space."""
    cubes, labels = [], []
    for ids in grids.values():
        labels.append(f"item{'s' if len(ids) > 1 else ''} {_shown(ids)}")
        tile = [item for item in items if item.id in ids]
        cubes.append(_concat_items(tile, {item.id: merged[item.id] for item in tile}, dims, times))
    check_labels_agree(cubes, {"x", "y"}, labels)
    try:
        return mosaic(cubes, labels)
    except (MosaicError, IncompatibleArraysError) as err:
        error = _mixed_grids_error("the items", grids)
        raise MixedGridsError(
            f"{error}\nThey cannot be joined side by side either: {err}. Tiles join only on one "
            "CRS and pixel size, with the same time steps, as a complete rectangle of whole "
            f"chunks.{_time_advice(cubes)}"
        ) from err


def _time_advice(cubes: list[xr.Dataset]) -> str:
    """Advice when the tiles' time steps differ: tiles of one pass are stamped seconds apart."""
    if any("time" not in cube.indexes for cube in cubes):
        return ""
    steps = [cube.indexes["time"] for cube in cubes]
    if all(step.equals(steps[0]) for step in steps):
        return ""
    return (
        " The tiles' time steps differ (tiles of one pass are stamped seconds apart): "
        "groupby='solar_day' makes the items of one day one time step (or groupby='<property>' "
        "for items sharing a property, such as a datatake id)."
    )


def _concat_items(
    items: list[pystac.Item],
    datasets: Mapping[str, xr.Dataset],
    dims: Mapping[str, str],
    times: Mapping[str, np.datetime64],
) -> xr.Dataset:
    """Concatenate the Items' datasets (already in time order) along their concat dimension.

    Items of one grid given the same time step (``times``: their group's) cover the same
    pixels, which references cannot mosaic: :class:`OverlappingItemsError`. So do Items whose
    own axes (a netCDF file's days) overlap; those that do not are joined in the order of
    their coordinates, as ``xr.combine_by_coords`` joins files.
    """
    chosen = {dims.get(item.id, "time") for item in items}
    if len(chosen) > 1:
        raise IncompatibleArraysError(
            f"items disagree on virtual:concat_dim ({', '.join(sorted(chosen))}); pass concat_dim="
        )
    dim = chosen.pop()
    variables = {item.id: sorted(map(str, datasets[item.id].data_vars)) for item in items}
    if len({tuple(names) for names in variables.values()}) > 1:
        listing = "; ".join(f"{i} has {', '.join(names)}" for i, names in variables.items())
        raise IncompatibleArraysError(
            f"items cannot be concatenated along {dim!r}: their variables differ ({listing}); "
            "choose common assets with assets=[...]"
        )
    parts = []
    added: dict[np.datetime64, str] = {}
    nanoseconds = all(times[item.id].dtype == np.dtype("datetime64[ns]") for item in items)
    for item in items:
        dataset = datasets[item.id]
        own = dataset.variables.get(dim)
        if dim not in dataset.dims and own is not None and own.ndim == 0:
            # The file's own scalar time: the axis, as xr.open_mfdataset takes it. Expanding
            # along the Items' datetimes would replace it silently.
            if isinstance(own.data, ManifestArray):
                raise IncompatibleArraysError(
                    f"item {item.id!r}: its data have a scalar {dim!r} of their own, which "
                    f"stacking the items along their datetimes would replace: pass "
                    f"loadable_variables=[{dim!r}] to stack them along the files' {dim!r} "
                    f"values, or drop_variables=[{dim!r}] to stack them along the items' "
                    "datetimes"
                )
            dataset = dataset.set_coords(dim).expand_dims(dim)
        elif dim not in dataset.dims:
            if dim == "time":
                # One unit for every step: microseconds if any Item lies beyond 1678-2262.
                time = times[item.id] if nanoseconds else time_order(times[item.id])
                if time in added:
                    raise _overlap_error(added[time], item, time)
                added[time] = item.id
                dataset = dataset.expand_dims(time=[time])
            else:
                dataset = dataset.expand_dims(dim)
        parts.append(dataset)
    if len(parts) == 1:
        return parts[0]
    order = _in_axis_order(items, parts, dim)
    items, parts = [items[n] for n in order], [parts[n] for n in order]
    try:
        combined = concat_virtual(parts, dim, labels=[f"item {item.id!r}" for item in items])
    except ValueError as err:
        ids = ", ".join(item.id for item in items)
        raise IncompatibleArraysError(
            f"items {ids} cannot be concatenated along {dim!r}: {err}. Every item needs the same "
            "variables on the same coordinates; choose common assets with assets=[...]"
        ) from err
    return combined


def _overlap_error(first: str, item: pystac.Item, time: np.datetime64) -> OverlappingItemsError:
    when = np.datetime_as_string(time, unit="s")
    return OverlappingItemsError(
        f"items {first!r} and {item.id!r} fall in one time step ({when}) and cover the same "
        "grid, so their pixels overlap: references cannot choose between them (a reprocessed "
        "copy of a tile?). Keep one of them (filter the items, e.g. on their processing "
        "baseline), or pass a groupby= that puts them in different time steps."
    )


def _in_axis_order(items: list[pystac.Item], parts: list[xr.Dataset], dim: str) -> list[int]:
    """The positions of ``parts`` in the order of their ``dim`` coordinates.

    Two Items whose coordinates overlap (share steps, or interleave) would give an index that
    repeats or goes back, a trap for every ``sel``: :class:`OverlappingItemsError` names them
    and the steps, as ``xr.open_mfdataset(combine="by_coords")`` refuses such files.
    """
    unsorted = list(range(len(parts)))
    if any(dim not in part.indexes for part in parts):
        return unsorted
    indexes = [part.indexes[dim] for part in parts]
    filled = [n for n in unsorted if len(indexes[n])]
    try:
        order = sorted(filled, key=lambda n: indexes[n].min())
    except TypeError as err:
        # Decoded and undecoded times (decode_times=False with Items' datetimes): no order,
        # and no common data type for one index either.
        kinds = "; ".join(
            f"{item.id}: {index.dtype}" for item, index in zip(items, indexes, strict=True)
        )
        raise IncompatibleArraysError(
            f"items cannot be concatenated along {dim!r}: their coordinates cannot be compared "
            f"({kinds}). Times from files and from Items' datetimes join only decoded "
            "(decode_times=True)."
        ) from err
    for previous, n in itertools.pairwise(order):
        # Sorted by start, consecutive items apart means every two apart.
        if indexes[n].min() <= indexes[previous].max():
            raise _axes_overlap_error(
                dim, (items[previous], indexes[previous]), (items[n], indexes[n])
            )
    # Empty parts add no step: where they go changes nothing.
    return order + [n for n in unsorted if not len(indexes[n])]


def _axes_overlap_error(
    dim: str, first: tuple[pystac.Item, pd.Index], second: tuple[pystac.Item, pd.Index]
) -> OverlappingItemsError:
    (a, a_steps), (b, b_steps) = first, second
    shared = a_steps.intersection(b_steps)
    both = f"both have {_steps(shared)}" if len(shared) else "their steps interleave"
    return OverlappingItemsError(
        f"items {a.id!r} and {b.id!r} overlap along {dim!r}: {both} ({a.id}: "
        f"{_step(a_steps.min())} to {_step(a_steps.max())}; {b.id}: {_step(b_steps.min())} to "
        f"{_step(b_steps.max())}). Joined, the {dim!r} index would repeat or go back "
        "(xr.open_mfdataset refuses such files too), and references cannot choose between "
        "their values (a reprocessed copy, files sharing steps?). Keep one of the items, or "
        "open them separately and select the steps you want."
    )


def _steps(index: pd.Index) -> str:
    shown = ", ".join(_step(value) for value in index[:3])
    return shown + (f" and {len(index) - 3} more" if len(index) > 3 else "")


def _step(value: object) -> str:
    """A coordinate value as people write it: ISO 8601 for times."""
    return value.isoformat() if isinstance(value, pd.Timestamp) else str(value)
