"""An asset's file that cannot be opened fails with the file's typed error, and among the many
Items of a catalog the message says which asset of which Item holds it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio
from rasterio.transform import from_origin

from virtualstac.errors import CorruptFileError, SourceNotFoundError
from virtualstac.stac import open_stac

COG = "image/tiff; application=geotiff; profile=cloud-optimized"


def write_cog(path: Path) -> Path:
    profile = dict(
        driver="COG", width=64, height=64, count=1, dtype="uint8", crs="EPSG:32633",
        transform=from_origin(500000, 4000000, 10, 10),
    )  # fmt: skip
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(np.ones((1, 64, 64), "uint8"))
    return path


def passes(*hrefs: Path) -> list[pystac.Item]:
    """One Item per file, a day apart, each with the file as its ``red`` asset."""
    items = []
    for day, href in enumerate(hrefs):
        when = dt.datetime(2024, 5, 1 + day, 10, tzinfo=dt.UTC)
        item = pystac.Item(f"pass-{day}", None, None, when, {})
        item.add_asset("red", pystac.Asset(str(href), media_type=COG, roles=["data"]))
        items.append(item)
    return items


def test_a_missing_file_names_its_asset_and_item(tmp_path: Path) -> None:
    items = passes(write_cog(tmp_path / "day0.tif"), tmp_path / "day1.tif")

    with pytest.raises(SourceNotFoundError) as caught:
        open_stac(items, authorize=[tmp_path.as_uri() + "/"])

    assert str(caught.value).startswith("asset 'red' of item 'pass-1': ")
    assert "day1.tif' does not exist" in str(caught.value)
    assert isinstance(caught.value, FileNotFoundError)


def test_a_damaged_file_names_its_asset_and_item_beside_the_reason(tmp_path: Path) -> None:
    damaged = tmp_path / "day1.tif"
    damaged.write_bytes(write_cog(tmp_path / "whole.tif").read_bytes()[:200])
    items = passes(write_cog(tmp_path / "day0.tif"), damaged)

    with pytest.raises(CorruptFileError, match=r"^asset 'red' of item 'pass-1': .*day1\.tif"):
        open_stac(items, authorize=[tmp_path.as_uri() + "/"])
