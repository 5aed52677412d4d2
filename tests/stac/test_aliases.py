"""Assets asked for by band name or common name, as ``odc.stac.load(bands=[...])`` takes them.

Earth Search keys Sentinel-2's B04 asset ``red``; the Planetary Computer keys it ``B04``
(describing its bands in the Collection's ``item_assets``). Code written against one provider
asks for the other's names; odc-stac (a peer, only compared with here) resolves both.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import odc.stac
import pystac
import pytest
import rasterio
import xarray as xr
from providers import EXTENSIONS, earth_search_item, planetary_computer_collection
from sentinel2 import rasterio_mosaic, scaled, write_catalog

from virtualstac.stac import AssetNotFoundError, open_stac, publish

# odc-geo's own deprecations (of affine and shapely), raised while odc-stac loads.
pytestmark = [
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:The 'shapely.ops.transform:DeprecationWarning"),
]


def test_band_names_open_the_assets_keyed_by_common_name(tmp_path: Path) -> None:
    item = earth_search_item(tmp_path)
    dataset = open_stac(item, ["B04", "B08"], mask_and_scale=False)
    assert list(dataset.data_vars) == ["B04", "B08"]  # named as asked, as odc-stac names them
    # The single-band COG, not the three-band uint8 "visual" nor the JPEG 2000 twin.
    with rasterio.open(item.assets["red"].href) as src:
        np.testing.assert_array_equal(dataset["B04"].values, src.read(1))


def test_common_names_open_the_assets_keyed_by_band_name(tmp_path: Path) -> None:
    collection = planetary_computer_collection(tmp_path)
    cube = open_stac(collection, ["red", "nir"])  # eo:bands only in item_assets
    assert dict(cube["red"].sizes) == {"time": 2, "y": 768, "x": 768}
    first = next(iter(collection.get_items()))
    with rasterio.open(first.assets["B04"].get_absolute_href()) as src:
        raw = src.read(1)
    expected = np.where(raw == 0, np.nan, raw * 1e-4 - 0.1)
    np.testing.assert_allclose(cube["red"].isel(time=0).values, expected, rtol=1e-12)
    engine = xr.open_dataset(collection, engine="virtualstac", assets=["red"])
    assert engine["red"].shape == (2, 768, 768)


def test_an_asset_key_wins_over_an_alias(tmp_path: Path) -> None:
    item = earth_search_item(tmp_path)
    # "blue" is both an asset key and the common name of the visual asset's third band.
    dataset = open_stac(item, ["blue"], mask_and_scale=False)
    with rasterio.open(item.assets["blue"].href) as src:
        np.testing.assert_array_equal(dataset["blue"].values, src.read(1))


def test_values_and_coordinates_agree_with_odc_stac(tmp_path: Path) -> None:
    item = earth_search_item(tmp_path)
    ours = open_stac([item], ["B04", "rededge"], group_by="grid", mask_and_scale=False)
    theirs = odc.stac.load([item], bands=["B04"])
    (ten,) = [ds for ds in ours.values() if "B04" in ds]
    np.testing.assert_array_equal(ten["B04"].values, theirs["B04"].values)
    np.testing.assert_array_equal(ten["x"].values, theirs["x"].values)
    np.testing.assert_array_equal(ten["y"].values, theirs["y"].values)
    (twenty,) = [ds for ds in ours.values() if "rededge" in ds]
    coarse = odc.stac.load([item], bands=["rededge"], resolution=20)
    np.testing.assert_array_equal(twenty["rededge"].values, coarse["rededge"].values)


def test_bands_of_a_multi_band_asset_are_taken_out_of_its_values(tmp_path: Path) -> None:
    # Four bands in one pixel-interleaved COG per tile, two tiles a pass, as NAIP's "image".
    written = write_catalog(tmp_path)
    collection = pystac.Collection.from_file(str(written.sentinel2))
    cube = open_stac(collection, ["red", "nir"], groupby="solar_day")
    assert list(cube.data_vars) == ["red", "nir"] and list(cube.sizes) == ["time", "y", "x"]
    raw = rasterio_mosaic(written, "reflectance", 1)
    np.testing.assert_allclose(cube["red"].isel(time=1).values, scaled(raw[2]), rtol=1e-6)
    np.testing.assert_allclose(cube["nir"].isel(time=1).values, scaled(raw[3]), rtol=1e-6)
    # The asset asked for by key too stays whole beside its band.
    both = open_stac(collection, ["reflectance", "red"], groupby="solar_day")
    assert both["reflectance"].sizes["band"] == 4 and both["red"].dims == ("time", "y", "x")
    # References cannot take the band apart: the message says what to do.
    with pytest.raises(
        AssetNotFoundError,
        match=r"band 3 \(B04, common name red\) of asset 'reflectance'.*drop references=True.*"
        r"isel\(band=2\)",
    ):
        open_stac(collection, ["red"], groupby="solar_day", references=True)


def test_a_name_two_assets_share_is_refused_naming_both(tmp_path: Path) -> None:
    item = earth_search_item(tmp_path)
    copy = item.assets["red"].clone()
    item.add_asset("red-reprocessed", copy)
    with pytest.raises(AssetNotFoundError, match=r"'red'.*'red-reprocessed'.*with its key"):
        open_stac(item, ["B04"])


def test_a_name_no_band_has_lists_the_assets(tmp_path: Path) -> None:
    item = earth_search_item(tmp_path)
    with pytest.raises(
        AssetNotFoundError, match=r"its assets: blue.*none with a band of that name"
    ):
        open_stac(item, ["B8A"])


def test_a_published_store_answers_aliases_too(tmp_path: Path) -> None:
    collection = planetary_computer_collection(tmp_path)
    parsed = open_stac(collection, ["red"], use_published=False)
    publish(collection, tmp_path / "s2.icechunk", assets=["B04", "B08"])
    published = open_stac(collection, ["red", "B08"])
    assert list(published.data_vars) == ["red", "B08"]
    xr.testing.assert_identical(published["red"].load(), parsed["red"].load())


def test_an_item_lacking_the_asset_does_not_fall_back_to_its_jpeg2000_twin(
    tmp_path: Path,
) -> None:
    item = earth_search_item(tmp_path)
    del item.assets["nir"]  # "nir-jp2" lists the band with common name "nir"
    with pytest.raises(AssetNotFoundError, match=r"no asset 'nir'.*asset 'nir-jp2'.*image/jp2"):
        open_stac(item, ["red", "nir"])


def test_a_band_of_an_asset_split_by_its_gdal_scales_is_taken_by_its_alias(
    tmp_path: Path,
) -> None:
    # A band-interleaved file whose bands GDAL scales differently opens as one variable per
    # band (bands.md); asked for by common name, the band is that variable, named as asked.
    raw = np.random.default_rng(0).integers(1, 1000, (2, 64, 64), dtype="uint16")
    path = tmp_path / "temperatures.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=64, height=64, count=2, dtype="uint16",
        crs="EPSG:32633", transform=rasterio.transform.from_origin(5e5, 4e6, 30, 30),
        tiled=True, blockxsize=32, blockysize=32, interleave="band",
    ) as dst:  # fmt: skip
        dst.write(raw)
        dst.scales, dst.offsets = (0.01, 0.02), (0.0, 150.0)
    when = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    item = pystac.Item("L1", None, None, when, {}, stac_extensions=EXTENSIONS)
    bands = [{"name": "B10", "common_name": "lwir11"}, {"name": "B11", "common_name": "lwir12"}]
    item.add_asset(
        "thermal",
        pystac.Asset(
            str(path), media_type="image/tiff; application=geotiff", roles=["data"],
            extra_fields={
                "eo:bands": bands,
                "raster:bands": [{"data_type": "uint16"}] * 2,
                "proj:epsg": 32633,
                "proj:shape": [64, 64],
                "proj:transform": [30, 0, 5e5, 0, -30, 4e6],
            },
        ),
    )  # fmt: skip
    assert list(open_stac(item).data_vars) == ["thermal_1", "thermal_2"]

    opened = open_stac(item, ["lwir12"])

    assert list(opened.data_vars) == ["lwir12"]
    np.testing.assert_allclose(opened["lwir12"].values, raw[1] * 0.02 + 150.0, rtol=1e-6)
    theirs = odc.stac.load([item], bands=["lwir12"])
    np.testing.assert_array_equal(theirs["lwir12"].isel(time=0).values, raw[1])  # no scales
    assert list(open_stac(item, ["thermal", "B10"]).data_vars) == [
        "thermal_1", "thermal_2", "B10"
    ]  # fmt: skip
