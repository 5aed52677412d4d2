"""STAC band metadata on multi-band COGs: names, common names, nodata, scale and offset.

A 4-band uint16 reflectance COG in GDAL's default pixel interleave with nodata 0, described as
a Sentinel-2 L2A provider does (STAC 1.0 ``eo:bands`` + ``raster:bands``, or STAC 1.1
``bands``: scale 1e-4, offset -0.1). Decoded values equal rasterio's reads with the nodata
masked and the STAC scale applied, as ``rioxarray.open_rasterio(mask_and_scale=True)`` gives
them for a file carrying that scale.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import odc.stac
import pystac
import pytest
import rasterio
import xarray as xr
from providers import landsat_item
from tiff_files import pixels, write_gdal

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import InvalidCatalogError
from virtualstac.stac import open_published, open_stac, publish
from virtualstac.stac.bands import BandMetadataError, StacBand, asset_bands

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
NAMES = ["B02", "B03", "B04", "B08"]
COMMON = ["blue", "green", "red", "nir"]
WHEN = dt.datetime(2024, 7, 1, 10, tzinfo=dt.UTC)


def reflectance(path: Path, **options: Any) -> Path:
    """4-band uint16 pixel-interleaved COG, nodata 0, its top-left corner left empty (0)."""
    data = pixels(4, 64, 64, "uint16", seed=3)
    data[:, :8, :8] = 0
    profile: dict[str, Any] = {"driver": "COG", "nodata": 0, **options}
    return write_gdal(path, width=64, height=64, count=4, data=data, compress="DEFLATE", **profile)


def item_with(path: Path, fields: dict[str, Any], item_id: str = "S2_1") -> pystac.Item:
    item = pystac.Item(item_id, None, None, WHEN, {})
    asset = pystac.Asset(str(path), media_type=COG, roles=["data"], extra_fields=fields)
    item.add_asset("reflectance", asset)
    return item


STAC_10 = {
    "eo:bands": [{"name": n, "common_name": c} for n, c in zip(NAMES, COMMON, strict=True)],
    "raster:bands": [{"nodata": 0, "scale": 0.0001, "offset": -0.1}] * 4,
}
STAC_11 = {
    "bands": [
        {"name": n, "eo:common_name": c, "nodata": 0, "raster:scale": 0.0001, "raster:offset": -0.1}
        for n, c in zip(NAMES, COMMON, strict=True)
    ]
}


def read(dataset: xr.Dataset, path: Path, **decoding: Any) -> xr.Dataset:
    store = dataset.virtual.to_store(ObjectStoreRegistry.for_url(str(path)))
    return xr.open_zarr(store, consolidated=False, **decoding)


def rasterio_masked_and_scaled(path: Path, scale: float, offset: float) -> np.ndarray:
    with rasterio.open(path) as src:
        raw = src.read()
        nodata = src.nodata
    values = np.where(raw == nodata, np.nan, raw.astype("float64"))
    return values * scale + offset


@pytest.mark.parametrize("fields", [STAC_10, STAC_11], ids=["stac-1.0", "stac-1.1"])
def test_band_names_and_scaling_come_from_the_catalog(tmp_path: Path, fields: Any) -> None:
    path = reflectance(tmp_path / "reflectance.tif")

    dataset = open_stac(item_with(path, fields), ["reflectance"], references=True)

    assert list(dataset["band"].values) == NAMES
    assert list(dataset["common_name"].values) == COMMON
    assert dataset["reflectance"].attrs["scale_factor"] == 0.0001
    assert dataset["reflectance"].attrs["add_offset"] == -0.1
    values = read(dataset, path)
    assert list(values["band"].values) == NAMES
    assert list(values["common_name"].values) == COMMON
    np.testing.assert_allclose(
        values["reflectance"].values, rasterio_masked_and_scaled(path, 0.0001, -0.1), rtol=1e-12
    )
    assert np.isnan(values["reflectance"].sel(band="B04").values[0, 0])

    raw = read(dataset, path, mask_and_scale=False)["reflectance"]
    assert raw.dtype == np.uint16
    assert raw.attrs["_FillValue"] == 0
    assert raw.attrs["scale_factor"] == 0.0001
    with rasterio.open(path) as src:
        np.testing.assert_array_equal(raw.values, src.read())


def test_one_time_series_keeps_the_labels(tmp_path: Path) -> None:
    items = []
    for day in range(2):
        path = reflectance(tmp_path / f"r{day}.tif")
        item = item_with(path, STAC_10, item_id=f"S2_{day}")
        item.datetime = WHEN + dt.timedelta(days=day)
        items.append(item)

    cube = open_stac(items, ["reflectance"], references=True)

    assert dict(cube["reflectance"].sizes) == {"time": 2, "band": 4, "y": 64, "x": 64}
    assert list(read(cube, tmp_path / "r0.tif")["band"].values) == NAMES


def test_band_descriptions_label_bands_without_stac_names(tmp_path: Path) -> None:
    path = reflectance(
        tmp_path / "described.tif", driver="GTiff", tiled=True, blockxsize=32, blockysize=32
    )
    with rasterio.open(path, "r+") as dst:
        for n, name in enumerate(NAMES, start=1):
            dst.set_band_description(n, name)
    with rasterio.open(path) as src:
        descriptions = list(src.descriptions)

    plain = open_virtual_dataset(path)
    from_stac = open_stac(item_with(path, {}), ["reflectance"])

    # A plain file keeps band numbers, as rioxarray does, with descriptions in long_name.
    assert list(plain["band"].values) == [1, 2, 3, 4]
    assert plain["band_data"].attrs["long_name"] == descriptions
    assert list(from_stac["band"].values) == descriptions


def test_the_files_own_scale_and_nodata_win_with_a_warning(tmp_path: Path) -> None:
    path = reflectance(tmp_path / "scaled.tif", scales=(0.5,) * 4, offsets=(1.0,) * 4)

    with pytest.warns(RuntimeWarning, match=r"'reflectance' of item 'S2_1'.*file's"):
        dataset = open_stac(item_with(path, STAC_10), ["reflectance"], references=True)

    assert dataset["reflectance"].attrs["scale_factor"] == 0.5
    np.testing.assert_allclose(
        read(dataset, path)["reflectance"].values, rasterio_masked_and_scaled(path, 0.5, 1.0)
    )
    other = {"raster:bands": [{"nodata": 7}] * 4}
    with pytest.warns(RuntimeWarning, match="the file's nodata 0 differs from the STAC nodata 7"):
        open_stac(item_with(path, other), ["reflectance"], references=True)


def test_a_nodata_only_the_catalog_gives_masks_the_values(tmp_path: Path) -> None:
    path = reflectance(tmp_path / "bare.tif", nodata=None)

    dataset = open_stac(item_with(path, STAC_11), ["reflectance"], references=True)

    assert read(dataset, path, mask_and_scale=False)["reflectance"].attrs["_FillValue"] == 0
    assert np.isnan(read(dataset, path)["reflectance"].values[:, :8, :8]).all()


def test_a_float32_nodata_is_compared_in_float32(tmp_path: Path) -> None:
    data = pixels(1, 32, 32, "float32")
    data[0, 0, :4] = np.finfo("float32").max
    path = write_gdal(
        tmp_path / "float.tif", width=32, height=32, dtype="float32", data=data, driver="COG"
    )
    # The float64 text of the float32 maximum: only its float32 rounding equals the pixels.
    fields = {"raster:bands": [{"nodata": 3.4028234663852886e38}]}

    dataset = open_stac(item_with(path, fields), ["reflectance"], references=True)

    values = read(dataset, path)["reflectance"].values
    assert np.isnan(values[0, :4]).all()
    assert not np.isnan(values[1:]).any()


def test_bands_the_array_cannot_hold_are_refused(tmp_path: Path) -> None:
    path = reflectance(tmp_path / "reflectance.tif")
    differing = {"raster:bands": [{"scale": 0.0001}, {"scale": 0.0002}, {}, {}]}
    with pytest.raises(BandMetadataError, match=r"'reflectance' of item 'S2_1'.*different scal"):
        open_stac(item_with(path, differing), ["reflectance"])
    three = {"eo:bands": [{"name": n} for n in NAMES[:3]]}
    with pytest.raises(BandMetadataError, match="lists 3 bands but the file has 4"):
        open_stac(item_with(path, three), ["reflectance"])


@pytest.mark.parametrize(("format", "target"), [("icechunk", "c.icechunk"), ("kerchunk", "c.json")])
def test_published_stores_keep_labels_and_scaling(tmp_path: Path, format: str, target: str) -> None:
    items = []
    for day in range(2):
        item = item_with(reflectance(tmp_path / f"r{day}.tif"), STAC_10, item_id=f"S2_{day}")
        item.datetime = WHEN + dt.timedelta(days=day)
        item.set_self_href(str(tmp_path / f"S2_{day}.json"))
        item.save_object(include_self_link=True)
        items.append(item)
    collection = pystac.Collection("s2", "reflectance", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)

    publish(collection, tmp_path / target, format=format, assets=["reflectance"])  # type: ignore[arg-type]

    read = open_published(collection.assets[format])
    assert list(read["band"].values) == NAMES
    assert list(read["common_name"].values) == COMMON
    expected = np.stack(
        [rasterio_masked_and_scaled(tmp_path / f"r{day}.tif", 0.0001, -0.1) for day in range(2)]
    )
    values = read["reflectance"].transpose("time", "band", "y", "x").values
    np.testing.assert_allclose(values, expected, rtol=1e-12)


def test_stac_nodata_follows_gdals_rules_for_the_band_type(tmp_path: Path) -> None:
    listed = asset_bands(
        pystac.Asset("x.tif", extra_fields={"bands": [{"nodata": "nan"}]}), "asset x"
    )
    assert listed.listed == (StacBand(nodata="nan"),)
    path = reflectance(tmp_path / "bare.tif", nodata=None)
    fraction = {"raster:bands": [{"nodata": 0.5}] * 4}

    with pytest.warns(RuntimeWarning, match="STAC nodata 0.5 does not fit uint16; it is ignored"):
        dataset = open_stac(item_with(path, fraction), ["reflectance"])

    assert "_FillValue" not in dataset["reflectance"].attrs


@pytest.mark.parametrize(
    "fields",
    [
        {"raster:bands": [{"nodata": "none"}] * 4},
        {"raster:bands": [{"nodata": [0]}] * 4},
        {"bands": [{"nodata": {"value": 0}}] * 4},
        {"nodata": True},
    ],
    ids=["text", "list", "object", "boolean"],
)
def test_a_stac_nodata_that_is_no_number_is_refused(tmp_path: Path, fields: dict[str, Any]) -> None:
    # Read as GDAL reads its nodata tag's text, any of these would be 0: every 0 masked.
    path = reflectance(tmp_path / "bare.tif", nodata=None)
    with pytest.raises(InvalidCatalogError, match=r"'reflectance' of item 'S2_1'.*nodata"):
        open_stac(item_with(path, fields), ["reflectance"])
    numeric_text = {"raster:bands": [{"nodata": "0"}] * 4}
    assert open_stac(item_with(path, numeric_text), ["reflectance"])["reflectance"].isnull().any()


#: STAC 1.1 puts what every band shares on the asset itself; bands only name themselves.
SHARED_ON_ASSET = {
    "nodata": 0,
    "data_type": "uint16",
    "raster:scale": 0.0001,
    "raster:offset": -0.1,
}


@pytest.mark.parametrize(
    ("count", "bands"),
    [(1, None), (4, [{"name": n} for n in NAMES])],
    ids=["one-band-no-bands-array", "names-in-bands"],
)
def test_stac_11_band_fields_on_the_asset_apply_to_every_band(
    tmp_path: Path, count: int, bands: list[dict[str, str]] | None
) -> None:
    data = pixels(count, 64, 64, "uint16", seed=3)
    data[:, :8, :8] = 0
    path = write_gdal(tmp_path / "bare.tif", width=64, height=64, count=count, data=data)
    fields = SHARED_ON_ASSET | ({"bands": bands} if bands else {})

    dataset = open_stac(item_with(path, fields), ["reflectance"], references=True)

    expected = np.where(data == 0, np.nan, data * 0.0001 - 0.1)  # the file has no nodata
    values = read(dataset, path)["reflectance"]
    np.testing.assert_allclose(values.values, expected.squeeze(), rtol=1e-12)
    assert np.isnan(values.values[..., :8, :8]).all()
    if bands:
        assert list(values["band"].values) == NAMES


def test_a_band_overrides_the_fields_on_its_asset(tmp_path: Path) -> None:
    asset = pystac.Asset("x.tif", extra_fields={**SHARED_ON_ASSET, "bands": [{"nodata": 1}, {}]})
    shared = StacBand(nodata="0", scale=0.0001, offset=-0.1)
    assert asset_bands(asset, "asset x").listed == (
        StacBand(nodata="1", scale=0.0001, offset=-0.1),
        shared,
    )

    # The file's own scale still wins over the asset's, as over a band's.
    path = reflectance(tmp_path / "scaled.tif", scales=(0.5,) * 4, offsets=(1.0,) * 4)
    with pytest.warns(RuntimeWarning, match=r"'reflectance' of item 'S2_1'.*file's"):
        dataset = open_stac(item_with(path, SHARED_ON_ASSET), ["reflectance"], references=True)
    assert dataset["reflectance"].attrs["scale_factor"] == 0.5


@pytest.mark.parametrize(
    ("fields", "units"),
    [
        ({"raster:bands": [{"nodata": 0, "unit": "W m-2 sr-1 um-1"}] * 4}, "W m-2 sr-1 um-1"),
        ({"bands": [{"name": n} for n in NAMES], "unit": "1"}, "1"),
        ({"bands": [{"unit": "m"}, {"unit": "m"}, {"unit": "m"}, {"unit": "K"}]}, None),
    ],
    ids=["stac-1.0", "stac-1.1-on-asset", "several-units"],
)
def test_a_unit_every_band_shares_is_the_cf_units(
    tmp_path: Path, fields: dict[str, Any], units: str | None
) -> None:
    path = reflectance(tmp_path / "radiance.tif")

    dataset = open_stac(item_with(path, fields), ["reflectance"], references=True)

    assert dataset["reflectance"].attrs.get("units") == units
    assert read(dataset, path)["reflectance"].attrs.get("units") == units


def test_band_fields_in_the_items_properties_apply_to_assets_that_say_nothing(
    tmp_path: Path,
) -> None:
    # STAC 1.1 common metadata: a field in an Item's properties applies to every asset that
    # does not override it.
    data = pixels(1, 64, 64, "uint16", seed=3)
    data[:, :8, :8] = 0
    bare = write_gdal(tmp_path / "bare.tif", width=64, height=64, count=1, data=data)
    item = item_with(bare, {})
    item.properties.update({**SHARED_ON_ASSET, "unit": "1"})
    own = pystac.Asset(str(bare), media_type=COG, roles=["data"], extra_fields={"nodata": 7})
    item.add_asset("own_nodata", own)

    dataset = open_stac(item, ["reflectance", "own_nodata"], references=True)

    values = read(dataset, bare)
    expected = np.where(data[0] == 0, np.nan, data[0] * 0.0001 - 0.1)
    np.testing.assert_allclose(values["reflectance"].values, expected, rtol=1e-12)
    assert values["reflectance"].attrs["units"] == "1"
    # The asset's own nodata wins over the Item's; the Item's scale still applies to it.
    assert dataset["own_nodata"].attrs["_FillValue"] == 7
    assert dataset["own_nodata"].attrs["scale_factor"] == 0.0001


def test_a_scale_in_the_items_properties_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    item = item_with(reflectance(tmp_path / "r.tif"), {})
    item.properties["raster:scale"] = "0.0001"
    with pytest.raises(InvalidCatalogError, match=r"Item's properties' raster:scale"):
        open_stac(item, ["reflectance"], references=True)


def test_a_bit_field_band_keeps_its_integers_beside_decoded_reflectances(tmp_path: Path) -> None:
    # Landsat's qa_pixel, masked like a reflectance, would become float32 with NaN and lose
    # its bit operations; odc-stac keeps the integers (and scales nothing).
    item = landsat_item(tmp_path)
    dataset = open_stac(item, ["red", "qa_pixel"], mask_and_scale={"qa_pixel": False})
    assert dataset["qa_pixel"].dtype == np.uint16 and dataset["qa_pixel"].attrs["_FillValue"] == 1
    with rasterio.open(item.assets["qa_pixel"].href) as src:
        np.testing.assert_array_equal(dataset["qa_pixel"].values, src.read(1))
    with rasterio.open(item.assets["red"].href) as src:
        raw = src.read(1)
    expected = np.where(raw == 0, np.nan, raw * 2.75e-05 - 0.2)
    np.testing.assert_allclose(dataset["red"].values, expected, rtol=1e-12)


# Catalogs halfway to STAC 1.1: the eo extension v2 (``bands``) beside the raster extension
# v1.1 (``raster:bands``), or the other way round, on one asset or split between an Item's
# asset and its Collection's ``item_assets``.
NAMES_11_SCALES_10 = {
    "bands": [{"name": n, "eo:common_name": c} for n, c in zip(NAMES, COMMON, strict=True)],
    "raster:bands": STAC_10["raster:bands"],
}
NAMES_10_SCALES_11 = {
    "eo:bands": STAC_10["eo:bands"],
    "bands": [{"nodata": 0, "raster:scale": 0.0001, "raster:offset": -0.1}] * 4,
}


@pytest.mark.parametrize(
    "fields", [NAMES_11_SCALES_10, NAMES_10_SCALES_11], ids=["bands+raster:bands", "eo:bands+bands"]
)
def test_band_lists_of_both_stac_versions_on_one_asset_are_read_together(
    tmp_path: Path, fields: dict[str, Any]
) -> None:
    path = reflectance(tmp_path / "reflectance.tif")

    dataset = open_stac(item_with(path, fields), ["reflectance"])

    assert list(dataset["band"].values) == NAMES
    assert list(dataset["common_name"].values) == COMMON
    np.testing.assert_allclose(
        dataset["reflectance"].values,
        rasterio_masked_and_scaled(path, 0.0001, -0.1),
        rtol=1e-12,
    )
    assert list(open_stac(item_with(path, fields), ["B04"]).data_vars) == ["B04"]


CURRENT_BASELINE_11 = [
    {**band, "nodata": 0, "raster:scale": 0.0001, "raster:offset": -0.1}
    for band in NAMES_11_SCALES_10["bands"]
]


@pytest.mark.parametrize(
    ("described", "own"),
    [
        ({"bands": CURRENT_BASELINE_11}, {"raster:bands": [{"nodata": 0, "scale": 0.0001}] * 4}),
        (STAC_10, {"bands": [{"nodata": 0, "raster:scale": 0.0001}] * 4}),
        (
            {"bands": NAMES_11_SCALES_10["bands"], **SHARED_ON_ASSET},
            {"raster:bands": [{"nodata": 0, "scale": 0.0001}] * 4},
        ),
    ],
    ids=[
        "item_assets-bands+own-raster:bands",
        "item_assets-raster:bands+own-bands",
        "item_assets-asset-fields+own-raster:bands",
    ],
)
def test_an_items_own_packing_overrides_its_collections_of_the_other_stac_version(
    tmp_path: Path, described: dict[str, Any], own: dict[str, Any]
) -> None:
    # The Collection describes the bands once, with the packing of processing baseline 04.00
    # (offset -0.1); an Item processed before it gives its own (no offset) in the other STAC
    # version's list. The Item's own packing wins, as a list of the same version would.
    path = reflectance(tmp_path / "reflectance.tif")
    collection = pystac.Collection(
        "s2",
        "bands described in item_assets",
        pystac.Extent(
            pystac.SpatialExtent([[-180, -90, 180, 90]]), pystac.TemporalExtent([[WHEN, None]])
        ),
        extra_fields={"item_assets": {"reflectance": described}},
    )
    collection.add_item(item_with(path, {}, "N0510"))
    old = item_with(path, own, "N0400")
    old.datetime = WHEN - dt.timedelta(days=5)
    collection.add_item(old)

    cube = open_stac(collection, ["reflectance"])

    assert list(cube["band"].values) == NAMES  # the Collection's names still apply
    np.testing.assert_allclose(
        cube["reflectance"].values,
        [rasterio_masked_and_scaled(path, 0.0001, offset) for offset in (0.0, -0.1)],
        rtol=1e-12,
    )


def test_band_lists_of_both_stac_versions_that_disagree_are_refused(tmp_path: Path) -> None:
    fields = {**NAMES_10_SCALES_11, "raster:bands": [{"nodata": 0, "scale": 0.001}] * 4}
    with pytest.raises(InvalidCatalogError, match=r"'reflectance' of item 'S2_1'.*scale"):
        open_stac(item_with(reflectance(tmp_path / "r.tif"), fields), ["reflectance"])


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # odc-geo's, while loading
@pytest.mark.filterwarnings("ignore:The 'shapely.ops.transform:DeprecationWarning")
def test_a_landsat_item_opens_its_bands_each_with_its_own_scale(tmp_path: Path) -> None:
    # USGS's Item: reflectances and surface temperature packed differently, a bit-field band
    # without role data, metadata files and a thumbnail that are no rasters.
    item = landsat_item(tmp_path)

    dataset = open_stac(item)

    assert list(dataset.data_vars) == ["red", "nir08", "lwir11"]
    for key, scale, offset in [("red", 2.75e-05, -0.2), ("lwir11", 0.00341802, 149.0)]:
        with rasterio.open(item.assets[key].href) as src:
            raw = src.read(1)
        expected = np.where(raw == 0, np.nan, raw * scale + offset)
        np.testing.assert_allclose(dataset[key].values, expected, rtol=1e-12)
    assert dataset["lwir11"].attrs["units"] == "kelvin"
    # odc-stac loads the stored integers on the same grid.
    keys = ["red", "lwir11", "qa_pixel"]
    raw = open_stac(item, keys, mask_and_scale=False)
    theirs = odc.stac.load([item], bands=keys)
    for key in keys:
        np.testing.assert_array_equal(raw[key].values, theirs[key].isel(time=0).values)
    np.testing.assert_array_equal(raw["x"].values, theirs["x"].values)
    np.testing.assert_array_equal(raw["y"].values, theirs["y"].values)
