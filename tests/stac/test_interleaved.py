"""Multi-band pixel-interleaved COGs (GDAL's default for several bands) over time.

Three dates of one tile, each a 4-band uint16 COG with the horizontal predictor and DEFLATE,
stacked with ``xr.concat``, through ``open_stac`` and through publishing to Icechunk and
Kerchunk; every read equals rasterio's reads stacked.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio
import xarray as xr
from rasterio.transform import from_origin

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import IncompatibleArraysError
from virtualstac.stac import open_published, open_stac, publish
from virtualstac.xarray.combine import EXACT_COMBINE

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
START = dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.UTC)


def write_reflectance(path: Path, seed: int, **options: object) -> Path:
    """A 4-band uint16 COG, pixel-interleaved (GDAL's default), predictor 2, DEFLATE."""
    data = np.random.default_rng(seed).integers(1, 10000, (4, 100, 90), dtype="uint16")
    profile = {
        "driver": "COG",
        "width": 90,
        "height": 100,
        "count": 4,
        "dtype": "uint16",
        "crs": "EPSG:32633",
        "transform": from_origin(500000.0, 4000000.0, 10.0, 10.0),
        "blocksize": 32,
        "compress": "DEFLATE",
        "predictor": 2,
        "overviews": "NONE",
        **options,
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
    return path


@pytest.fixture
def dates(tmp_path: Path, make_item: Callable[..., pystac.Item]) -> list[pystac.Item]:
    items = []
    for day in range(3):
        path = write_reflectance(tmp_path / f"reflectance_{day}.tif", seed=day)
        item = make_item(
            f"S2_{day}", START + dt.timedelta(days=day), {"reflectance": (f"./{path.name}", COG)}
        )
        item.set_self_href(str(tmp_path / f"S2_{day}.json"))
        item.save_object(include_self_link=True)
        items.append(item)
    return items


def rasterio_stack(items: list[pystac.Item]) -> np.ndarray:
    reads = []
    for item in items:
        with rasterio.open(item.assets["reflectance"].get_absolute_href()) as src:
            assert src.profile["interleave"] == "pixel"
            reads.append(src.read())
    return np.stack(reads)


def test_dates_concatenate_and_read_like_rasterio(dates: list[pystac.Item]) -> None:
    paths = [item.assets["reflectance"].get_absolute_href() for item in dates]
    datasets = [open_virtual_dataset(path) for path in paths]

    cube = xr.concat(datasets, dim="time", **EXACT_COMBINE)

    registry = ObjectStoreRegistry.for_url(str(paths[0]))
    read = xr.open_zarr(cube.virtual.to_store(registry), consolidated=False)
    assert read["band_data"].dims == ("time", "band", "y", "x")
    np.testing.assert_array_equal(read["band_data"].values, rasterio_stack(dates))


def test_open_stac_stacks_the_dates(dates: list[pystac.Item]) -> None:
    cube = open_stac(dates, ["reflectance"], references=True)

    registry = ObjectStoreRegistry.for_url(dates[0].assets["reflectance"].get_absolute_href())
    read = xr.open_zarr(cube.virtual.to_store(registry), consolidated=False)
    assert read.sizes == {"time": 3, "band": 4, "y": 100, "x": 90}
    np.testing.assert_array_equal(read["reflectance"].values, rasterio_stack(dates))


@pytest.mark.parametrize(
    ("format", "target"),
    [("icechunk", "cube.icechunk"), ("kerchunk", "cube.json"), ("kerchunk", "cube.parq")],
)
def test_published_and_appended_stores_read_like_rasterio(
    tmp_path: Path, dates: list[pystac.Item], format: str, target: str
) -> None:
    collection = pystac.Collection("s2", "reflectance", pystac.Extent.from_items(dates))
    for item in dates[:2]:
        collection.add_item(item, set_parent=False)
    kerchunk_format = "parquet" if target.endswith(".parq") else "json"
    options = {"format": format, "kerchunk_format": kerchunk_format, "assets": ["reflectance"]}
    publish(collection, tmp_path / target, **options)  # type: ignore[arg-type]
    collection.add_item(dates[2], set_parent=False)

    publish(collection, tmp_path / target, **options)  # type: ignore[arg-type]

    read = open_published(collection.assets[format])
    # Kerchunk (Zarr v2) keeps the chunks' stored (y, x, band) order, under the same names.
    values = read["reflectance"].transpose("time", "band", "y", "x").values
    np.testing.assert_array_equal(values, rasterio_stack(dates))


def test_an_item_with_other_codecs_is_named(
    tmp_path: Path, dates: list[pystac.Item], make_item: Callable[..., pystac.Item]
) -> None:
    path = write_reflectance(tmp_path / "lzw.tif", seed=9, compress="LZW")
    other = make_item("S2_lzw", START + dt.timedelta(days=5), {"reflectance": (str(path), COG)})

    with pytest.raises(IncompatibleArraysError, match=r"variable 'reflectance' of item 'S2_lzw'"):
        open_stac([*dates, other], ["reflectance"])
