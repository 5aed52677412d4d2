"""Items that cannot share one datacube are refused, naming them and why.

netCDF4 files of daily steps written by netCDF4, whose own ``time`` axes overlap or not, and
COGs written by GDAL; the cubes are compared with ``xr.open_mfdataset`` over the same files.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path

import netCDF4
import numpy as np
import pystac
import pytest
import xarray as xr
from rasterio.transform import from_origin
from tiff_files import UTM, pixels, write_gdal

from virtualstac.errors import IncompatibleArraysError
from virtualstac.stac import MixedGridsError, open_stac, publish
from virtualstac.stac.grouping import OverlappingItemsError

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
NETCDF = "application/x-netcdf"
PASS = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)
MakeItem = Callable[..., pystac.Item]


def daily(path: Path, days: Sequence[int], value: float) -> Path:
    """A netCDF4 file of ``v(time, y)`` on the given days of January 2024, all ``value``."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("y", 3)
        time = nc.createVariable("time", "i4", ("time",))
        time.units = "days since 2024-01-01"
        time[:] = np.asarray(days)
        nc.createVariable("v", "f4", ("time", "y"))[:] = value
    return path


def file_item(make_item: MakeItem, path: Path, day: int) -> pystac.Item:
    """An Item of one netCDF file, stamped with ``day`` of January 2024, saved beside it."""
    when = dt.datetime(2024, 1, 1 + day, tzinfo=dt.UTC)
    item = make_item(path.stem, when, {"data": (str(path), NETCDF)})
    item.set_self_href(str(path.with_suffix(".json")))
    return item


def tile(
    make_item: MakeItem,
    root: Path,
    column: int,
    *,
    day: int = 0,
    common_names: Sequence[str] = (),
) -> pystac.Item:
    """Tile ``column`` of a row of 64 x 64 uint16 COGs of 10 m pixels, in 32-pixel blocks, on
    ``day``; with ``common_names``, one band for each, described by ``eo:bands``."""
    count = max(len(common_names), 1)
    item_id = f"tile{column}" + (f"_d{day}" if day else "")
    path = write_gdal(
        root / f"{item_id}.tif",
        driver="COG",
        width=64,
        height=64,
        count=count,
        crs=UTM,
        transform=from_origin(500000 + 640 * column, 4000000, 10, 10),
        data=pixels(count, 64, 64, "uint16", seed=column + 10 * day),
        blocksize=32,
        overviews=(),
    )
    item = make_item(item_id, PASS + dt.timedelta(days=day), {"red": (str(path), COG)})
    if common_names:
        item.assets["red"].extra_fields["eo:bands"] = [
            {"name": f"B{n + 1}", "common_name": common} for n, common in enumerate(common_names)
        ]
    return item


def test_netcdf_items_whose_days_overlap_are_refused_naming_them_and_the_days(
    tmp_path: Path, make_item: MakeItem
) -> None:
    first = daily(tmp_path / "first.nc", range(0, 5), 1.0)  # 1-5 January
    second = daily(tmp_path / "second.nc", range(3, 8), 2.0)  # 4-8 January
    items = [file_item(make_item, first, 0), file_item(make_item, second, 3)]

    with pytest.raises(
        OverlappingItemsError, match="'first' and 'second' overlap along 'time'"
    ) as caught:
        open_stac(items)
    assert "both have 2024-01-04T00:00:00, 2024-01-05T00:00:00" in str(caught.value)
    with pytest.raises(OverlappingItemsError):
        publish(items, tmp_path / "store.icechunk")
    assert not (tmp_path / "store.icechunk").exists()

    # xarray refuses the same files.
    with pytest.raises(ValueError, match="monotonic global indexes"):
        xr.open_mfdataset([first, second], combine="by_coords", engine="netcdf4")


def test_netcdf_items_whose_days_interleave_are_refused(
    tmp_path: Path, make_item: MakeItem
) -> None:
    even = daily(tmp_path / "even.nc", [0, 2, 4], 1.0)
    odd = daily(tmp_path / "odd.nc", [1, 3, 5], 2.0)

    with pytest.raises(OverlappingItemsError, match=r"'even' and 'odd'.*their steps interleave"):
        open_stac([file_item(make_item, even, 0), file_item(make_item, odd, 1)])


def test_netcdf_items_are_joined_in_the_order_of_their_days(
    tmp_path: Path, make_item: MakeItem
) -> None:
    paths = [daily(tmp_path / f"week{n}.nc", range(7 * n, 7 * n + 7), n) for n in range(3)]
    # Given out of order, and all stamped with the first day, as some catalogs stamp files.
    items = [file_item(make_item, paths[n], 0) for n in (2, 0, 1)]

    cube = open_stac(items)

    assert cube.indexes["time"].is_monotonic_increasing and cube.indexes["time"].is_unique
    with xr.open_mfdataset(paths, combine="by_coords", engine="netcdf4") as direct:
        xr.testing.assert_equal(cube["v"].load(), direct["v"].load())


def test_times_from_a_file_and_from_an_item_join_only_decoded(
    tmp_path: Path, make_item: MakeItem
) -> None:
    """One file has a time axis, the other a single field stamped by its Item's datetime."""
    stepped = daily(tmp_path / "stepped.nc", [0], 1.0)
    with netCDF4.Dataset(tmp_path / "static.nc", "w") as nc:
        nc.createDimension("y", 3)
        nc.createVariable("v", "f4", ("y",))[:] = 2.0
    items = [file_item(make_item, stepped, 0), file_item(make_item, tmp_path / "static.nc", 5)]

    assert [str(t)[:10] for t in open_stac(items)["time"].values] == ["2024-01-01", "2024-01-06"]
    with pytest.raises(IncompatibleArraysError, match=r"stepped: int32; static: datetime64"):
        open_stac(items, decode_times=False)


def test_tiles_and_an_item_without_a_raster_grid_are_refused_naming_them(
    tmp_path: Path, make_item: MakeItem
) -> None:
    """A catalog of a COG collection and a netCDF collection: tiles cannot take the netCDF in."""
    tiles = [tile(make_item, tmp_path, column) for column in (0, 1)]
    weather = file_item(make_item, daily(tmp_path / "weather.nc", [0], 1.0), 0)

    with pytest.raises(MixedGridsError, match=r"'tile0', 'tile1'.*'weather' \(variables v\)"):
        open_stac([*tiles, weather])

    assert open_stac(tiles).sizes["x"] == 128  # the tiles alone join
    by_grid = open_stac([*tiles, weather], group_by="grid")
    assert len(by_grid) == 3 and list(by_grid[None].data_vars) == ["v"]


def test_items_giving_a_band_another_common_name_are_refused_naming_both(
    tmp_path: Path, make_item: MakeItem
) -> None:
    first = tile(make_item, tmp_path, 0, common_names=["red", "nir"])
    swapped = tile(make_item, tmp_path, 0, day=1, common_names=["nir", "red"])
    agreeing = tile(make_item, tmp_path, 0, day=2, common_names=["red", "nir"])

    with pytest.raises(
        IncompatibleArraysError,
        match=r"'tile0' and item 'tile0_d1' disagree on the common_name of band 'B1': "
        r"'red' in item 'tile0', 'nir' in item 'tile0_d1'",
    ):
        open_stac([first, swapped])

    cube = open_stac([first, agreeing])
    assert dict(cube["red"].sizes) == {"time": 2, "band": 2, "y": 64, "x": 64}
    assert list(cube["common_name"].values) == ["red", "nir"]


def test_tiles_giving_a_band_another_common_name_are_refused_naming_both(
    tmp_path: Path, make_item: MakeItem
) -> None:
    west = tile(make_item, tmp_path, 0, common_names=["red", "nir"])
    east = tile(make_item, tmp_path, 1, common_names=["red", "rededge"])

    with pytest.raises(
        IncompatibleArraysError,
        match=r"common_name of band 'B2': 'nir' in item 'tile0', 'rededge' in item 'tile1'",
    ):
        open_stac([west, east])


def scan(path: Path, hours: float, value: float) -> Path:
    """A netCDF4 file of one scan, as GOES or daily SST files are: ``v(y)`` and a scalar
    ``time`` saying when."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("y", 3)
        time = nc.createVariable("time", "f8", ())
        time.units = "hours since 2024-01-01 00:00"
        time[:] = hours
        nc.createVariable("v", "f4", ("y",))[:] = value
    return path


# xarray's own, while open_mfdataset promotes the files' scalar times.
@pytest.mark.filterwarnings("ignore:No index created for dimension time:UserWarning")
def test_a_scalar_time_in_each_file_is_the_axis_as_open_mfdataset_takes_it(
    tmp_path: Path, make_item: MakeItem
) -> None:
    # The Items are stamped at the start of each day; the files' scans at 12:30.
    paths = [scan(tmp_path / f"scan_{day}.nc", 24 * day + 12.5, day) for day in (2, 0, 1)]
    items = [file_item(make_item, path, day) for path, day in zip(paths, (2, 0, 1), strict=True)]
    cube = open_stac(items)
    with xr.open_mfdataset(sorted(paths), combine="nested", concat_dim="time") as expected:
        xr.testing.assert_identical(cube.load(), expected.load())
    assert str(cube["time"].values[0]) == "2024-01-01T12:30:00.000000000"
    # Dropped, the Items' datetimes are the axis; kept virtual, it cannot be one.
    dropped = open_stac(items, drop_variables=["time"])
    assert str(dropped["time"].values[0]) == "2024-01-01T00:00:00.000000000"
    with pytest.raises(IncompatibleArraysError, match=r"scalar 'time' of their own.*loadable_"):
        open_stac(items, loadable_variables=[])
