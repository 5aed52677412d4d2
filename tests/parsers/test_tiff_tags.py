"""GDAL metadata (rasterio's ``tags()``, ``tags(bidx)``) as the attributes rioxarray gives."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import rasterio
import tifffile
import xarray as xr

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.parsers.tiff_tags import tag_value

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

sys.path.insert(0, str(Path(__file__).parent))
from tiff_files import write_gdal  # noqa: E402


def attributes(path: Path, variable: str = "band_data", **options: object) -> dict[str, object]:
    url = str(path)
    dataset = open_virtual_dataset(url, registry=ObjectStoreRegistry.for_url(url), **options)
    return dict(dataset[variable].attrs)


def test_dataset_and_band_tags_are_attributes_read_as_rioxarray_reads_them(
    tmp_path: Path,
) -> None:
    path = write_gdal(tmp_path / "scene.tif", count=1, tags={"CLOUD_COVER": "12.5"})
    with rasterio.open(path, "r+") as dst:
        dst.update_tags(SENSOR="MSI", ORBIT="42", WAVELENGTHS="{490,560}")
        dst.update_tags(1, STATISTICS_MEAN="3.5", STATISTICS_MAXIMUM="100", NAME="red")
        dst.update_tags(ns="OTHER_DOMAIN", HIDDEN="1")  # not in tags(): not an attribute
    with rasterio.open(path) as src:
        assert src.tags()["ORBIT"] == "42" and src.tags(1)["STATISTICS_MEAN"] == "3.5"

    attrs = attributes(path)

    # rioxarray.open_rasterio's attrs: {**tags(), **tags(1)}, numbers as numbers.
    assert attrs["CLOUD_COVER"] == 12.5 and attrs["SENSOR"] == "MSI" and attrs["ORBIT"] == 42
    assert attrs["WAVELENGTHS"] == [490.0, 560.0]
    assert attrs["STATISTICS_MEAN"] == 3.5 and attrs["STATISTICS_MAXIMUM"] == 100
    assert attrs["NAME"] == "red"
    assert "HIDDEN" not in attrs


def test_bands_tags_are_one_value_when_alike_else_one_per_band(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "two.tif", count=2)
    with rasterio.open(path, "r+") as dst:
        dst.update_tags(1, STATISTICS_MEAN="3.5", STATISTICS_MAXIMUM="100", NAME="red", KIND="s")
        dst.update_tags(2, STATISTICS_MEAN="4.5", NAME="nir", KIND="s")

    attrs = attributes(path)

    # Not band 1's items for both bands (rioxarray's): each band's, in the band order.
    assert attrs["KIND"] == "s"
    assert attrs["STATISTICS_MEAN"] == [3.5, 4.5]
    assert attrs["NAME"] == ["red", "nir"]
    first, second = attrs["STATISTICS_MAXIMUM"]  # type: ignore[misc]
    assert first == 100 and math.isnan(second)  # band 2 has none


def test_bands_split_by_their_scales_each_get_their_own_tags(tmp_path: Path) -> None:
    path = write_gdal(
        tmp_path / "split.tif", count=2, interleave="band", scales=(0.1, 0.5), offsets=(0, 0)
    )
    with rasterio.open(path, "r+") as dst:
        dst.update_tags(PLATFORM="sentinel-2b")
        dst.update_tags(1, STATISTICS_MEAN="3.5")
        dst.update_tags(2, STATISTICS_MEAN="4.5")

    # As rioxarray.open_rasterio(path, band_as_variable=True) gives each band its tags.
    for variable, mean in (("band_data_1", 3.5), ("band_data_2", 4.5)):
        attrs = attributes(path, variable)
        assert attrs["STATISTICS_MEAN"] == mean and attrs["PLATFORM"] == "sentinel-2b"


def test_baseline_tiff_tags_are_reported_as_gdal_formats_them(tmp_path: Path) -> None:
    path = tmp_path / "described.tif"
    tifffile.imwrite(
        path,
        np.zeros((8, 8), "uint16"),
        description="a microscope image",
        software="tiffy",
        datetime="2020:01:01 00:00:00",
        resolution=(1 / 3, 300.5),
        resolutionunit="CENTIMETER",
        metadata=None,
        extratags=[(280, "H", 1, 5, True), (281, "H", 1, 600, True)],
    )
    with rasterio.open(path) as src:
        gdal = src.tags()

    attrs = attributes(path)

    assert {name: attrs[name] for name in gdal} == {name: tag_value(v) for name, v in gdal.items()}
    assert attrs["TIFFTAG_XRESOLUTION"] == 0.33333334  # float32 printed as GDAL prints it
    assert attrs["TIFFTAG_RESOLUTIONUNIT"] == "3 (pixels/cm)"
    assert attrs["TIFFTAG_MAXSAMPLEVALUE"] == 600


def test_items_named_as_cf_encoding_never_change_the_values(tmp_path: Path) -> None:
    # GDAL's netCDF driver keeps a variable's attributes as band items; gdal_translate copies
    # them into a GeoTIFF beside the GDAL nodata and scale, which are what GDAL applies.
    raw = np.arange(64, dtype="uint8").reshape(1, 8, 8)
    path = write_gdal(tmp_path / "from_netcdf.tif", width=8, height=8, dtype="uint8", data=raw)
    with rasterio.open(path, "r+") as dst:
        dst.update_tags(
            1, _FillValue="3", scale_factor="10", add_offset="5", _Unsigned="false", dtype="bool"
        )
        dst.update_tags(1, units="days since 2000-01-01", coordinates="lat lon")
    url = str(path)
    registry = ObjectStoreRegistry.for_url(url)

    virtual = open_virtual_dataset(url, registry=registry)
    values = xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False)["band_data"]

    for name in ("_FillValue", "scale_factor", "add_offset", "_Unsigned", "dtype", "units"):
        assert name not in virtual["band_data"].attrs
    with rasterio.open(path) as src:
        np.testing.assert_array_equal(values.values, src.read())
        assert values.dtype == src.read().dtype


def test_overviews_take_the_dataset_tags_and_their_own_band_tags(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "pyramid.tif", count=1, tiled=True, overviews=(2,))
    with rasterio.open(path, "r+") as dst:
        dst.update_tags(PLATFORM="landsat-9")
        dst.update_tags(1, STATISTICS_MEAN="3.5")
    with rasterio.open(path, overview_level=0) as src:
        overview_tags, overview_band_tags = src.tags(), src.tags(1)
    assert overview_tags["PLATFORM"] == "landsat-9" and "STATISTICS_MEAN" not in overview_band_tags

    attrs = attributes(path, overview_level=0)

    assert attrs["PLATFORM"] == "landsat-9"
    assert "STATISTICS_MEAN" not in attrs
    assert attrs["RESAMPLING"] == overview_band_tags["RESAMPLING"]  # GDAL's, on the overview
