"""Items on adjacent tiles of one grid join in space: a mosaic of whole chunks, or a reason."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pystac
import pytest
import rasterio
import xarray as xr
from rasterio.transform import from_origin
from tiff_files import UTM, pixels, write_gdal

import intake
from virtualstac import ObjectStoreRegistry
from virtualstac.stac import MixedGridsError, open_stac

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
MakeItem = Callable[..., pystac.Item]
WEST, NORTH = 500000.0, 4000000.0


def tile_item(
    make_item: MakeItem,
    root: Path,
    row: int,
    col: int,
    day: int,
    *,
    size: int = 256,
    offset: tuple[float, float] = (0.0, 0.0),
    crs: str = UTM,
) -> pystac.Item:
    """An item with one red COG of ``size`` x ``size`` 10 m pixels, tile (row, col)."""
    west = WEST + col * size * 10 + offset[0]
    north = NORTH - row * size * 10 + offset[1]
    path = write_gdal(
        root / f"r{row}c{col}d{day}.tif",
        driver="COG",
        width=size,
        height=size,
        crs=crs,
        transform=from_origin(west, north, 10, 10),
        data=pixels(1, size, size, "uint16", seed=100 * day + 10 * row + col),
        blocksize=128,
        compress="DEFLATE",
        overviews=(),
    )
    when = dt.datetime(2024, 7, 1 + day, 10, tzinfo=dt.UTC)
    return make_item(f"r{row}c{col}d{day}", when, {"red": (str(path), COG)})


def band(path: Path) -> np.ndarray:
    with rasterio.open(path) as source:
        return np.asarray(source.read(1))


def test_a_two_by_two_tiling_over_two_days_is_one_cube(tmp_path: Path, make_item: MakeItem) -> None:
    items = [
        tile_item(make_item, tmp_path, row, col, day)
        for day in (0, 1)
        for row in (0, 1)
        for col in (0, 1)
    ]
    cube = open_stac(items, references=True)
    assert dict(cube["red"].sizes) == {"time": 2, "y": 512, "x": 512}
    assert cube["spatial_ref"].attrs["GeoTransform"].split()[:4] == ["500000", "10", "0", "4000000"]

    opened = xr.open_zarr(
        cube.virtual.to_store(ObjectStoreRegistry.for_url(f"{tmp_path}/")), consolidated=False
    )
    for day in (0, 1):
        expected = np.block(
            [[band(tmp_path / f"r{r}c{c}d{day}.tif") for c in (0, 1)] for r in (0, 1)]
        )
        np.testing.assert_array_equal(opened["red"].isel(time=day).values, expected)
    with rasterio.open(tmp_path / "r1c1d0.tif") as source:
        x, y = source.xy(0, 0)
    assert float(opened["x"][256]) == x and float(opened["y"][256]) == y


@pytest.mark.parametrize(
    ("layout", "reason"),
    [
        ({"size": 200}, "not a multiple of its chunk size"),
        ({"offset": (5.0, 0.0)}, "fraction of a pixel in x"),
        ({"offset": (2560.0, 0.0)}, "gaps along x"),
        ({"offset": (-1280.0, 0.0)}, "item 'r0c0d0' and item 'r0c1d0' overlap"),
    ],
)
def test_tiles_that_cannot_be_moved_as_whole_chunks_are_refused(
    tmp_path: Path, make_item: MakeItem, layout: dict[str, Any], reason: str
) -> None:
    left = tile_item(make_item, tmp_path, 0, 0, 0, size=layout.get("size", 256))
    right = tile_item(make_item, tmp_path, 0, 1, 0, **layout)
    with pytest.raises(MixedGridsError, match=reason) as caught:
        open_stac([left, right])
    assert "group_by='grid'" in str(caught.value)


def test_an_incomplete_tiling_or_other_dates_per_tile_are_refused(
    tmp_path: Path, make_item: MakeItem
) -> None:
    three = [tile_item(make_item, tmp_path, r, c, 0) for r, c in ((0, 0), (0, 1), (1, 0))]
    with pytest.raises(MixedGridsError, match="cannot be joined side by side"):
        open_stac(three)
    other_days = [tile_item(make_item, tmp_path, 0, 0, 0), tile_item(make_item, tmp_path, 0, 1, 1)]
    with pytest.raises(MixedGridsError, match="cannot be joined side by side"):
        open_stac(other_days)
    per_grid = open_stac(other_days, group_by="grid")
    assert len(per_grid) == 2


def test_tiles_in_two_utm_zones_are_refused_naming_the_zones(
    tmp_path: Path, make_item: MakeItem
) -> None:
    west = tile_item(make_item, tmp_path, 0, 0, 0)
    east = tile_item(make_item, tmp_path, 0, 1, 0, crs="EPSG:32634")  # odc-stac would reproject
    with pytest.raises(MixedGridsError, match="CRS EPSG:32633 vs EPSG:32634") as caught:
        open_stac([west, east])
    message = str(caught.value)
    assert "(CRS EPSG:32633, pixel 10 x -10; CRS EPSG:32634, pixel 10 x -10)" in message
    assert "PROJCRS" not in message and len(message) < 1500  # not two kilobytes of WKT
    assert len(open_stac([west, east], group_by="grid")) == 2


def two_tiles(make_item: MakeItem, root: Path) -> tuple[pystac.Collection, np.ndarray]:
    """A Collection of two side by side tiles of one date, saved under ``root``, and the
    mosaic rasterio reads, each tile placed by its geotransform."""
    items = [tile_item(make_item, root, 0, col, 0) for col in (0, 1)]
    collection = pystac.Collection("tiles", "two tiles", pystac.Extent.from_items(items))
    collection.add_items(items)
    collection.normalize_hrefs(str(root / "stac"))
    collection.save(pystac.CatalogType.ABSOLUTE_PUBLISHED)
    mosaic = np.zeros((256, 512), dtype="uint16")
    for col in (0, 1):
        with rasterio.open(root / f"r0c{col}d0.tif") as source:
            column = round((source.transform.c - WEST) / 10)
            mosaic[:, column : column + 256] = source.read(1)
    return collection, mosaic


def test_the_engine_and_intake_build_the_mosaic_open_stac_builds(
    tmp_path: Path, make_item: MakeItem
) -> None:
    collection, expected = two_tiles(make_item, tmp_path)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        f"sources:\n  tiles:\n    driver: stac_virtual\n    args:\n"
        f"      url: {collection.get_self_href()}\n"
    )
    opened = {
        "open_stac": open_stac(collection),
        "engine": xr.open_dataset(collection, engine="virtualstac", chunks={}),
        "intake": intake.open_catalog(str(catalog)).tiles.to_dask(),
    }
    for name, cube in opened.items():
        assert dict(cube["red"].sizes) == {"time": 1, "y": 256, "x": 512}, name
        assert cube["red"].chunks == ((1,), (128, 128), (128,) * 4), name  # the COGs' tiles
        np.testing.assert_array_equal(cube["red"].isel(time=0).values, expected, err_msg=name)
