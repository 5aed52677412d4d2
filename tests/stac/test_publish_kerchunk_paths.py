"""Kerchunk references published for items whose files lie in directories named with spaces,
'%', '#', '[' and non-ASCII characters: fsspec reads them, and publishing appends to them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import fsspec
import numpy as np
import pystac
import pytest
import rasterio
import xarray as xr

from virtualstac.stac import open_published, publish

COG = "image/tiff; application=geotiff; profile=cloud-optimized"


def band(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        return np.asarray(src.read(1))


@pytest.mark.parametrize("layout", ["json", "parquet"])
def test_published_references_to_special_directories_read_through_fsspec(
    tmp_path: Path,
    write_band: Callable[..., Path],
    make_item: Callable[..., pystac.Item],
    layout: str,
) -> None:
    files = []
    collection = None
    target = tmp_path / f"scenes.{layout}"
    for day, name in enumerate(["scène #1 [100%]", "my data?"]):
        (tmp_path / name).mkdir()
        path = write_band(tmp_path / name / "B02.tif", size=300, seed=day)
        files.append(path)
        item = make_item(
            f"S2_{day}", dt.datetime(2024, 5, 1 + day, tzinfo=dt.UTC), {"B02": (str(path), COG)}
        )
        item.set_self_href(str(tmp_path / name / "item.json"))
        item.save_object(include_self_link=True)
        if collection is None:
            collection = pystac.Collection("scenes", "scenes", pystac.Extent.from_items([item]))
        collection.add_item(item, set_parent=False)
        # The second publish reads the first's references back to append to them.
        publish(collection, target, format="kerchunk", kerchunk_format=layout, assets=["B02"])
    assert collection is not None
    fs = fsspec.filesystem("reference", fo=str(target))
    published = xr.open_dataset(fs.get_mapper(), engine="zarr", consolidated=False)
    reopened = open_published(collection.assets["kerchunk"]).load()
    for index, path in enumerate(files):
        np.testing.assert_array_equal(published["B02"].isel(time=index).values, band(path))
        np.testing.assert_array_equal(reopened["B02"].isel(time=index).values, band(path))
