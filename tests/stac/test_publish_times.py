"""The time coordinate of published stores, as new items arrive at any time of day.

Kerchunk references hold the ``time`` coordinate in one inlined chunk, rewritten whole by every
publish, so any new time can be written exactly; an append must not warn that xarray had to
pick other units than the first publish's (``days since ...`` for passes a day apart). An
Icechunk store appends new times in the units it was first written with, in any calendar.
"""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path

import fsspec
import icechunk
import imagecodecs.numcodecs
import netCDF4
import numpy as np
import pystac
import pytest
import rasterio
import xarray as xr
from rasterio.transform import from_origin

from virtualstac.stac import publish

PASSES = [
    dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC),
    dt.datetime(2024, 5, 2, 10, tzinfo=dt.UTC),
    dt.datetime(2024, 5, 9, 9, 31, 12, 250000, tzinfo=dt.UTC),  # another time of day
]


def write_pass(folder: Path, index: int, moment: dt.datetime) -> pystac.Item:
    path = folder / f"pass-{index}.tif"
    profile = {
        "driver": "COG", "width": 64, "height": 48, "count": 1, "dtype": "uint16",
        "crs": "EPSG:32633", "transform": from_origin(500000, 4000000, 10, 10),
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(np.full((1, 48, 64), index, "uint16"))
    item = pystac.Item(
        f"pass-{index}", {"type": "Point", "coordinates": [15.0, 36.1]},
        [15.0, 36.1, 15.0, 36.1], moment, {},
    )  # fmt: skip
    item.add_asset("red", pystac.Asset(str(path), media_type="image/tiff", roles=["data"]))
    item.set_self_href(str(path.with_suffix(".json")))
    return item


@pytest.mark.parametrize("kerchunk_format", ["json", "parquet"])
def test_an_append_at_another_time_of_day_is_written_exactly_without_a_warning(
    tmp_path: Path, kerchunk_format: str
) -> None:
    items = [write_pass(tmp_path, index, moment) for index, moment in enumerate(PASSES)]
    collection = pystac.Collection("passes", "passes", pystac.Extent.from_items(items))
    for item in items[:2]:
        collection.add_item(item, set_parent=False)
    target = tmp_path / f"passes.{kerchunk_format}"
    publish(collection, target, format="kerchunk", kerchunk_format=kerchunk_format)

    collection.add_item(items[2], set_parent=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        publish(collection, target, format="kerchunk", kerchunk_format=kerchunk_format)

    imagecodecs.numcodecs.register_codecs()  # how any Kerchunk reader of LZW COGs decodes
    store = fsspec.filesystem("reference", fo=str(target), remote_protocol="file")
    opened = xr.open_dataset(store.get_mapper(), engine="zarr", consolidated=False)
    expected = [np.datetime64(moment.replace(tzinfo=None), "ns") for moment in PASSES]
    assert list(opened["time"].values) == expected
    assert [int(opened["red"].isel(time=i).max()) for i in range(3)] == [0, 1, 2]


def write_day_without_leap_days(path: Path, day: int) -> Path:
    """A day of a ``noleap`` model run, its times counted from its own first hour, as model
    output files often count them."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 2000)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = f"hours since 2023-{('02-27', '02-28', '03-01')[day]}"
        time.calendar = "noleap"
        time[:] = [0, 12]
        tas = nc.createVariable("tas", "f4", ("time", "x"), chunksizes=(1, 2000))
        tas[:] = np.arange(4000, dtype="f4").reshape(2, 2000) + 10_000 * day
    return path


def test_a_noleap_calendar_appends_days_whose_times_count_from_their_own_start(
    tmp_path: Path,
) -> None:
    # xarray decodes noleap times to cftime objects; each file's units differ, and the appended
    # times are written in the repository's, as numpy datetimes are.
    items = []
    for day in range(3):  # 27 and 28 February, then 1 March: there is no 29th in noleap
        path = write_day_without_leap_days(tmp_path / f"day{day}.nc", day)
        when = dt.datetime(2023, 2, 27, tzinfo=dt.UTC) + dt.timedelta(days=day)
        item = pystac.Item(f"day{day}", None, None, when, {})
        item.add_asset("data", pystac.Asset(str(path), media_type="application/x-netcdf"))
        item.set_self_href(str(tmp_path / f"day{day}.json"))
        items.append(item)
    collection = pystac.Collection("run", "run", pystac.Extent.from_items(items))
    collection.add_item(items[0], set_parent=False)
    target = tmp_path / "run.icechunk"
    publish(collection, target)
    for item in items[1:]:
        collection.add_item(item, set_parent=False)
        publish(collection, target)

    repository = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(target)),
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {(tmp_path.as_uri() + "/"): icechunk.credentials.LocalFileSystemAccess}
        ),
    )
    published = xr.open_zarr(repository.readonly_session("main").store, consolidated=False)
    paths = [tmp_path / f"day{day}.nc" for day in range(3)]
    with xr.open_mfdataset(paths, combine="by_coords") as expected:
        assert list(published["time"].values) == list(expected["time"].values)
        assert (published["tas"].values == expected["tas"].values).all()
