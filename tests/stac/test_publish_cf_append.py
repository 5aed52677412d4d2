"""Appending CF netCDF4 files to published Kerchunk references, as providers write them.

Daily files with an int16-packed ``tas`` (``scale_factor``, ``add_offset``, ``_FillValue``),
``time_bnds`` and an integer ``crs`` grid-mapping variable without ``_FillValue``, written by
the netCDF4 library, published in two batches; the references read back equal netCDF4's reads.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import netCDF4
import numpy as np
import pystac
import pytest

from virtualstac.errors import IncompatibleArraysError
from virtualstac.stac import open_published, publish

FILL = np.int16(-32767)


def write_day(path: Path, day: int) -> Path:
    """One day of hourly ``tas`` on a 3 x 4 grid, packed to int16, with a few fill values."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", None)
        nc.createDimension("bnds", 2)
        nc.createDimension("lat", 3)
        nc.createDimension("lon", 4)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "hours since 2024-01-01 00:00:00"
        time.calendar = "standard"
        time.bounds = "time_bnds"
        bounds = nc.createVariable("time_bnds", "f8", ("time", "bnds"))
        nc.createVariable("lat", "f4", ("lat",))[:] = [10.0, 10.5, 11.0]
        nc.createVariable("lon", "f4", ("lon",))[:] = [20.0, 20.5, 21.0, 21.5]
        crs = nc.createVariable("crs", "i4", ())  # no _FillValue: netCDF's default applies
        crs.grid_mapping_name = "latitude_longitude"
        tas = nc.createVariable(
            "tas", "i2", ("time", "lat", "lon"), fill_value=FILL, chunksizes=(6, 3, 4)
        )
        tas.scale_factor = 0.01
        tas.add_offset = 273.15
        tas.units = "K"
        tas.grid_mapping = "crs"
        hours = np.arange(24) + 24 * day
        time[:] = hours
        bounds[:] = np.stack([hours, hours + 1], axis=1)
        values = 273.15 + np.random.default_rng(day).normal(0, 5, (24, 3, 4))
        masked = np.ma.masked_array(values, mask=np.zeros(values.shape, bool))
        masked.mask[day, 1, 2] = True
        tas[:] = masked
    return path


@pytest.fixture
def days(tmp_path: Path, make_item: Callable[..., pystac.Item]) -> list[pystac.Item]:
    items = []
    for day in range(4):
        path = write_day(tmp_path / f"tas_{day}.nc", day)
        item = make_item(
            path.stem,
            dt.datetime(2024, 1, 1 + day, tzinfo=dt.UTC),
            {"data": (str(path), "application/x-netcdf")},
        )
        item.set_self_href(str(tmp_path / f"{path.stem}.json"))
        items.append(item)
    return items


def netcdf4_reads(paths: list[Path], name: str) -> np.ndarray:
    arrays = []
    for path in paths:
        with netCDF4.Dataset(path) as nc:
            arrays.append(np.ma.filled(nc[name][:].astype("f8"), np.nan))
    return np.concatenate(arrays)


@pytest.mark.parametrize("layout", ["json", "parquet"])
def test_cf_netcdf_appends_to_kerchunk_and_reads_like_netcdf4(
    tmp_path: Path, days: list[pystac.Item], layout: str
) -> None:
    collection = pystac.Collection("tas", "daily tas", pystac.Extent.from_items(days))
    for item in days[:2]:
        collection.add_item(item, set_parent=False)
    target = tmp_path / ("tas.json" if layout == "json" else "tas.parq")
    publish(collection, target, format="kerchunk", kerchunk_format=layout)
    for item in days[2:]:
        collection.add_item(item, set_parent=False)

    publish(collection, target, format="kerchunk", kerchunk_format=layout)

    asset = collection.assets["kerchunk"]
    assert asset.extra_fields["virtual:items"] == [item.id for item in days]
    dataset = open_published(asset).load()
    paths = [Path(item.assets["data"].href) for item in days]
    assert dataset.sizes["time"] == 96
    np.testing.assert_array_equal(dataset["tas"].values, netcdf4_reads(paths, "tas"))
    hours = netcdf4_reads(paths, "time_bnds").astype("i8").astype("timedelta64[h]")
    np.testing.assert_array_equal(dataset["time_bnds"].values, np.datetime64("2024-01-01") + hours)
    assert np.isnan(dataset["tas"].values[24 * 3 + 3, 1, 2])
    with netCDF4.Dataset(paths[0]) as nc:
        assert "_FillValue" not in nc["crs"].ncattrs()
    assert dataset["crs"].attrs["grid_mapping_name"] == "latitude_longitude"


def test_an_append_that_cannot_join_names_the_variable(
    tmp_path: Path, days: list[pystac.Item], make_item: Callable[..., pystac.Item]
) -> None:
    collection = pystac.Collection("tas", "daily tas", pystac.Extent.from_items(days))
    collection.add_item(days[0], set_parent=False)
    target = tmp_path / "tas.json"
    publish(collection, target, format="kerchunk")
    repacked = write_day(tmp_path / "repacked.nc", 1)
    with netCDF4.Dataset(repacked, "a") as nc:
        nc["tas"].scale_factor = 0.02  # packed otherwise: joining would decode it wrongly
    item = make_item(
        "repacked",
        dt.datetime(2024, 1, 2, tzinfo=dt.UTC),
        {"data": (str(repacked), "application/x-netcdf")},
    )
    item.set_self_href(str(tmp_path / "repacked.json"))
    collection.add_item(item, set_parent=False)

    with pytest.raises(
        IncompatibleArraysError, match=r"variable 'tas' of the new items .*repacked\.nc"
    ):
        publish(collection, target, format="kerchunk")
