"""Opening one asset: a band-interleaved COG whose bands carry different GDAL scales.

One array has one CF ``scale_factor``, so the TIFF parser splits such a file into one ``(y, x)``
variable per band (``band_data_1``, ``band_data_2``). Opened from STAC they are named after
their asset (``<asset>_1``, ``<asset>_2``) and get the catalog's band metadata as a single
``band_data`` does: names, common names, nodata and ``proj:`` georeferencing.
"""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pystac
import pytest
import rasterio
from tiff_files import pixels, write_gdal

from virtualstac.stac import open_published, open_stac, publish
from virtualstac.stac.bands import BandMetadataError

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
WHEN = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)
SCALES = (0.1, 0.2)
BANDS = {
    "eo:bands": [{"name": "B1", "common_name": "red"}, {"name": "B2", "common_name": "nir"}],
    "raster:bands": [{"nodata": 0}, {"nodata": 0}],
}


def per_band_scales(path: Path, **options: Any) -> Path:
    """2-band uint16 band-interleaved GeoTIFF, scales 0.1 and 0.2, no nodata, corner of 0s."""
    data = pixels(2, 64, 64, "uint16", seed=5)
    data[:, :8, :8] = 0
    return write_gdal(
        path, width=64, height=64, count=2, data=data, scales=SCALES, interleave="BAND", **options
    )


def item_with(assets: dict[str, tuple[Path, dict[str, Any]]]) -> pystac.Item:
    item = pystac.Item("scene", None, None, WHEN, {})
    for key, (path, fields) in assets.items():
        asset = pystac.Asset(str(path), media_type=COG, roles=["data"], extra_fields=fields)
        item.add_asset(key, asset)
    return item


def rasterio_masked_and_scaled(path: Path) -> np.ndarray:
    """The bands as GDAL reads them, with the catalog's nodata 0 masked and each band's scale."""
    with rasterio.open(path) as src:
        raw = src.read()
        scales = np.array(src.scales)[:, None, None]
    return np.where(raw == 0, np.nan, raw * scales)


def test_each_band_is_a_variable_named_after_its_asset(tmp_path: Path) -> None:
    refl = per_band_scales(tmp_path / "refl.tif")
    other = per_band_scales(tmp_path / "other.tif")
    item = item_with({"refl": (refl, BANDS), "other": (other, BANDS)})

    dataset = open_stac(item)  # two such assets in one Item do not collide

    assert sorted(dataset.data_vars) == ["other_1", "other_2", "refl_1", "refl_2"]
    assert dataset["refl_1"].attrs["band"] == "B1"
    assert dataset["refl_2"].attrs["common_name"] == "nir"
    expected = rasterio_masked_and_scaled(refl)
    for n in (1, 2):
        np.testing.assert_allclose(dataset[f"refl_{n}"].values, expected[n - 1], rtol=1e-12)
    assert np.isnan(dataset["refl_1"].values[0, 0])


def test_virtual_variable_names_the_bands(tmp_path: Path) -> None:
    fields = {**BANDS, "virtual:variable": "reflectance"}
    item = item_with({"refl": (per_band_scales(tmp_path / "refl.tif"), fields)})

    assert sorted(open_stac(item).data_vars) == ["reflectance_1", "reflectance_2"]


def test_proj_fields_georeference_every_band(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rasterio: the dataset is not georeferenced
        plain = per_band_scales(tmp_path / "plain.tif", crs=None)
    projection = {
        "proj:code": "EPSG:32633",
        "proj:shape": [64, 64],
        "proj:transform": [10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0],
    }
    item = item_with({"refl": (plain, {**BANDS, **projection})})

    dataset = open_stac(item, references=True)

    np.testing.assert_allclose(dataset["x"].values, 500005.0 + 10.0 * np.arange(64))
    np.testing.assert_allclose(dataset["y"].values, 3999995.0 - 10.0 * np.arange(64))
    assert dataset["refl_1"].attrs["grid_mapping"] == "spatial_ref"
    assert dataset["refl_2"].attrs["grid_mapping"] == "spatial_ref"


def test_a_catalog_listing_other_bands_is_refused(tmp_path: Path) -> None:
    three = {"eo:bands": [{"name": n} for n in ("B1", "B2", "B3")]}
    item = item_with({"refl": (per_band_scales(tmp_path / "refl.tif"), three)})

    with pytest.raises(BandMetadataError, match=r"'refl' of item 'scene'.*lists 3 bands"):
        open_stac(item)


def test_each_band_keeps_its_own_nodata_and_the_files_scale_wins(tmp_path: Path) -> None:
    path = per_band_scales(tmp_path / "refl.tif")
    fields = {"raster:bands": [{"nodata": 0}, {"nodata": 1, "scale": 0.5}]}

    with pytest.warns(RuntimeWarning, match=r"'refl' of item 'scene'.*file's scale 0.2"):
        dataset = open_stac(item_with({"refl": (path, fields)}), mask_and_scale=False)

    assert dataset["refl_1"].attrs["_FillValue"] == 0
    assert dataset["refl_2"].attrs["_FillValue"] == 1
    assert dataset["refl_2"].attrs["scale_factor"] == 0.2


def test_a_published_store_keeps_the_bands_labels_and_nodata(tmp_path: Path) -> None:
    items = []
    for day in range(2):
        item = item_with({"refl": (per_band_scales(tmp_path / f"r{day}.tif"), BANDS)})
        item.id, item.datetime = f"scene_{day}", WHEN + dt.timedelta(days=day)
        item.set_self_href(str(tmp_path / f"scene_{day}.json"))
        item.save_object(include_self_link=True)
        items.append(item)
    collection = pystac.Collection("scenes", "two days", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)

    publish(collection, tmp_path / "scenes.icechunk")

    read = open_published(collection.assets["icechunk"])
    assert read["refl_2"].attrs["band"] == "B2"
    expected = np.stack([rasterio_masked_and_scaled(tmp_path / f"r{day}.tif") for day in (0, 1)])
    np.testing.assert_allclose(read["refl_2"].values, expected[:, 1], rtol=1e-12)


def test_each_assets_internal_mask_is_named_after_it(tmp_path: Path) -> None:
    valid = np.full((64, 64), 255, "uint8")
    valid[:8, :] = 0
    masked = {"driver": "COG", "blocksize": 32, "compress": "DEFLATE", "mask": valid}
    red = per_band_scales(tmp_path / "red.tif", **masked)
    nir = per_band_scales(tmp_path / "nir.tif", **masked)
    item = item_with({"red": (red, BANDS), "nir": (nir, BANDS)})

    dataset = open_stac(item)  # two masks in one Item do not collide

    assert {"red_mask", "nir_mask"} <= set(dataset.data_vars)
    with rasterio.open(red) as src:
        gdal_mask = src.read_masks(1)
    np.testing.assert_array_equal(dataset["red_mask"].values, gdal_mask == 255)
    # Applied by the user, as rioxarray's masked=True applies it.
    assert np.isnan(dataset["red_1"].where(dataset["red_mask"]).values[:8]).all()
