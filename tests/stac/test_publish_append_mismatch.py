"""Appending items whose files are stored differently from the published ones, or are them.

A Zarr array has one data type, one chunk shape and one codec chain: new items whose COGs
differ in any of them cannot join the published store. A new item whose file the store
already references would hold that file's data twice. Each refusal is typed, names the store,
the variable and the new file, and leaves the store and the Collection as they were.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pystac
import pytest
import rasterio
from rasterio.transform import from_origin

from virtualstac.errors import IncompatibleArraysError
from virtualstac.stac import publish

FORMATS: dict[str, dict[str, Any]] = {
    "icechunk": {},
    "json": {"format": "kerchunk"},
    "parquet": {"format": "kerchunk", "kerchunk_format": "parquet"},
}
# What the third day's COG changes, against uint16 LZW 512 x 512 tiles of the first two.
DIFFERENCES: dict[str, dict[str, Any]] = {
    "dtype": {"dtype": "int16"},
    "chunking": {"blocksize": 256},
    "codec": {"compress": "DEFLATE"},
}


def write_day(folder: Path, day: int, **changes: Any) -> pystac.Item:
    """An item over a one-band 300 x 200 COG holding ``day + 1`` everywhere."""
    path = folder / f"day-{day}.tif"
    profile = {
        "driver": "COG", "width": 300, "height": 200, "count": 1, "dtype": "uint16",
        "crs": "EPSG:32633", "transform": from_origin(500000, 4000000, 10, 10), **changes,
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(np.full((1, 200, 300), day + 1, profile["dtype"]))
    item = pystac.Item(
        f"day-{day}", {"type": "Point", "coordinates": [15.0, 36.1]}, [15.0, 36.1, 15.0, 36.1],
        dt.datetime(2024, 5, day + 1, 10, tzinfo=dt.UTC), {},
    )  # fmt: skip
    item.add_asset("red", pystac.Asset(str(path), media_type="image/tiff", roles=["data"]))
    item.set_self_href(str(path.with_suffix(".json")))
    return item


def digest(target: Path) -> str:
    """Every file's name and bytes below (or at) ``target``."""
    found = hashlib.sha256()
    paths = [target] if target.is_file() else sorted(p for p in target.rglob("*") if p.is_file())
    for path in paths:
        found.update(os.fsencode(path.relative_to(target.parent)) + path.read_bytes())
    return found.hexdigest()


@pytest.mark.parametrize("difference", DIFFERENCES)
@pytest.mark.parametrize("store", FORMATS)
def test_an_append_of_files_stored_differently_is_refused_and_changes_nothing(
    tmp_path: Path, store: str, difference: str
) -> None:
    first = [write_day(tmp_path, day) for day in (0, 1)]
    collection = pystac.Collection("days", "days", pystac.Extent.from_items(first))
    for item in first:
        collection.add_item(item, set_parent=False)
    target = tmp_path / f"days.{store}"
    publish(collection, target, **FORMATS[store])
    before = digest(target), json.dumps(collection.to_dict())

    collection.add_item(write_day(tmp_path, 2, **DIFFERENCES[difference]), set_parent=False)
    with pytest.raises(IncompatibleArraysError) as refused:
        publish(collection, target, **FORMATS[store])

    message = str(refused.value)
    assert str(target) in message and "'red'" in message and "day-2.tif" in message
    collection.remove_item("day-2")
    assert (digest(target), json.dumps(collection.to_dict())) == before


@pytest.mark.parametrize("store", FORMATS)
def test_a_new_item_over_a_file_the_store_references_is_refused_in_every_format(
    tmp_path: Path, store: str
) -> None:
    first = [write_day(tmp_path, day) for day in (0, 1)]
    collection = pystac.Collection("days", "days", pystac.Extent.from_items(first))
    for item in first:
        collection.add_item(item, set_parent=False)
    target = tmp_path / f"days.{store}"
    publish(collection, target, **FORMATS[store])
    before = digest(target), json.dumps(collection.to_dict())

    # The same file, catalogued again as another day's item.
    again = write_day(tmp_path, 2)
    again.assets["red"].href = first[1].assets["red"].href
    collection.add_item(again, set_parent=False)
    with pytest.raises(IncompatibleArraysError) as refused:
        publish(collection, target, **FORMATS[store])

    message = str(refused.value)
    assert str(target) in message and "'red'" in message and "day-1.tif" in message
    assert "twice" in message
    collection.remove_item("day-2")
    assert (digest(target), json.dumps(collection.to_dict())) == before
