"""An Item opened from its Collection's store gives what parsing its own sources gives."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np
import pystac
import rasterio
import xarray as xr
from rasterio.transform import from_origin

from virtualstac.stac import open as stac_open
from virtualstac.stac import open_stac, publish

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
NETCDF = "application/x-netcdf"
PASS = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)


def parsed(opening: Callable[[], xr.Dataset]) -> bool:
    """Whether ``opening`` parsed source assets rather than reading a published store."""
    with mock.patch.object(stac_open, "_open_tasks", wraps=stac_open._open_tasks) as parsing:
        opening()
    return parsing.called


def collection_of(items: list[pystac.Item], directory: Path) -> pystac.Collection:
    collection = pystac.Collection("c", "published items", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    collection.set_self_href(str(directory / "collection.json"))
    return collection


def span(start: dt.datetime, length: dt.timedelta) -> dict[str, str]:
    """An Item's ``start_datetime`` and ``end_datetime`` properties."""
    return {"start_datetime": start.isoformat(), "end_datetime": (start + length).isoformat()}


def tile(directory: Path, column: int) -> pystac.Item:
    """A 128 x 128 tile of one pass, ``column`` tiles east, stamped 5 s after the one west."""
    folder = directory / f"tile-{column}"
    folder.mkdir()
    profile = dict(
        driver="COG", width=128, height=128, count=1, dtype="uint16", crs="EPSG:32633",
        transform=from_origin(500000 + 1280 * column, 4000000, 10, 10), blocksize=128,
    )  # fmt: skip
    with rasterio.open(folder / "red.tif", "w", **profile) as dst:
        dst.write(np.full((1, 128, 128), 10 + column, "uint16"))
    when = PASS + dt.timedelta(seconds=5 * column)
    west = 15.0 + 0.014 * column
    bbox = [west, 36.1, west + 0.014, 36.11]
    point = {"type": "Point", "coordinates": bbox[:2]}
    item = pystac.Item(f"tile-{column}", point, bbox, when, span(when, dt.timedelta(seconds=4)))
    item.add_asset("red", pystac.Asset("./red.tif", media_type=COG, roles=["data"]))
    item.set_self_href(str(folder / f"{item.id}.json"))
    item.save_object()
    return item


def test_a_tile_of_a_mosaic_store_opens_as_its_own_pixels(tmp_path: Path) -> None:
    west, east = tile(tmp_path, 0), tile(tmp_path, 1)
    collection = collection_of([west, east], tmp_path)
    publish(collection, tmp_path / "pass.icechunk", groupby="solar_day")
    assert open_stac(collection)["red"].sizes == {"time": 1, "y": 128, "x": 256}
    for item in (west, east):
        # The store's one step joins both tiles: each tile's own pixels come from its sources.
        assert parsed(lambda item=item: open_stac(item))
        xr.testing.assert_identical(open_stac(item), open_stac(item, use_published=False))
    assert np.unique(open_stac(east)["red"].values).tolist() == [11]


def daily_file(directory: Path, day: int) -> pystac.Item:
    """An Item of a netCDF file of 24 hourly steps, valid from its day to the next one."""
    path = directory / f"day-{day}.nc"
    data = xr.Dataset(
        {"t2m": (("time", "y"), np.full((24, 2), day, "float32"))},
        coords={"time": np.datetime64(f"2024-01-0{day}") + np.arange(24).astype("m8[h]")},
    )
    data.to_netcdf(path, engine="netcdf4")
    start = dt.datetime(2024, 1, day, tzinfo=dt.UTC)
    item = pystac.Item(f"day-{day}", None, None, None, span(start, dt.timedelta(days=1)))
    item.add_asset("data", pystac.Asset(str(path), media_type=NETCDF, roles=["data"]))
    item.set_self_href(str(directory / f"{item.id}.json"))
    item.save_object()
    return item


def test_a_file_ending_where_the_next_begins_opens_as_its_own_steps(tmp_path: Path) -> None:
    first, second = daily_file(tmp_path, 1), daily_file(tmp_path, 2)
    publish(collection_of([first, second], tmp_path), tmp_path / "days.icechunk")
    for item, day in ((first, 1), (second, 2)):
        opened = open_stac(item)
        xr.testing.assert_identical(opened, open_stac(item, use_published=False))
        assert opened.sizes["time"] == 24
        assert np.unique(opened["t2m"].values).tolist() == [day]
    # The next day's first step lies at the first day's end: whose step it is, the store
    # cannot say. The last day's end is past the store's last step: its part is told.
    assert parsed(lambda: open_stac(first))
    assert not parsed(lambda: open_stac(second))
    both = open_stac([first, second])
    assert not parsed(lambda: open_stac([first, second]))
    assert both.sizes["time"] == 48
