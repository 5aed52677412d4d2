"""The time coordinate of published Kerchunk references, as new items arrive at any time of day.

Kerchunk references hold the ``time`` coordinate in one inlined chunk, rewritten whole by every
publish, so any new time can be written exactly; an append must not warn that xarray had to
pick other units than the first publish's (``days since ...`` for passes a day apart).
"""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path

import fsspec
import imagecodecs.numcodecs
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
