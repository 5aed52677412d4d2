"""TIFF features GDAL reads its own way, read through a virtual dataset as rasterio reads them.

Each case rebuilds a feature of real-world files (GDAL autotest, libtiff, image-tiff, rasterio
test data) with GDAL or tifffile: float32 nodata, band scales and offsets, negative pixel
scales, transforms without GeoKeys, short bottom tiles, and the refusals of what Zarr cannot
hold.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import tifffile
import xarray as xr
from rasterio.enums import MaskFlags
from xarray.indexes import RangeIndex

import virtualstac.limits
from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.parsers.tiff import TIFFParser, UnsupportedTIFFError

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

sys.path.insert(0, str(Path(__file__).parent))
from tiff_files import (  # noqa: E402
    GDAL_CASES,
    pixels,
    write_gdal,
    write_retagged,
    write_short_bottom_tiles,
    write_tifffile_with_geotags,
)

# GeoTIFF tags as tifffile ``extratags``: pixel scale, tiepoint, matrix, GeoKeys of EPSG:32633.
SCALE, TIEPOINT, MATRIX, GEOKEYS = 33550, 33922, 34264, 34735
NORTH_UP = [2.0, 0, 0, 100.0, 0, -3.0, 0, 200.0, 0, 0, 0, 0, 0, 0, 0, 1]
UTM_GEOKEYS = (GEOKEYS, "H", 16, [1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633])


def open_decoded(path: Path, **options: Any) -> xr.Dataset:
    """The file as a user reads it: virtual dataset -> store -> xarray's default decoding."""
    url = str(path)
    registry = ObjectStoreRegistry.for_url(url)
    virtual = open_virtual_dataset(url, parser=TIFFParser(**options), registry=registry)
    return xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False).load()


def rasterio_decoded(path: Path, band: int | None = None) -> np.ndarray:
    """rasterio's read masked by nodata (as rioxarray's ``mask_and_scale``), unpacked by its
    scales and offsets as xarray unpacks them (in float64)."""
    with rasterio.open(path) as src:
        # Alpha bands and internal masks also mask rasterio's reads (an internal mask instead
        # of the nodata), but are not nodata: they are the band and the mask variable.
        if src.nodata is None or MaskFlags.nodata in src.mask_flag_enums[0]:
            masked = src.read(band, masked=src.nodata is not None)
        else:
            masked = np.ma.masked_equal(src.read(band), src.nodata)
        scales, offsets = src.scales, src.offsets
    index = slice(None) if band is None else band - 1
    scale = np.asarray(scales)[index]
    offset = np.asarray(offsets)[index]
    if band is None:
        scale, offset = scale[:, None, None], offset[:, None, None]
    values = np.ma.getdata(masked).astype(np.float64) * scale + offset
    return np.where(np.ma.getmaskarray(masked), np.nan, values)


def xy_from_transform(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with rasterio.open(path) as src:
        transform, width, height = src.transform, src.width, src.height
    x, _ = transform @ (np.arange(width) + 0.5, np.zeros(width) + 0.5)
    _, y = transform @ (np.zeros(height) + 0.5, np.arange(height) + 0.5)
    return np.asarray(x), np.asarray(y)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("tiff")
    return {name: write_gdal(directory / f"{name}.tif", **kw) for name, kw in GDAL_CASES.items()}


@pytest.mark.parametrize("name", sorted(GDAL_CASES))
def test_default_decoding_masks_and_unpacks_as_rasterio(corpus: dict[str, Path], name: str) -> None:
    ds = open_decoded(corpus[name])
    np.testing.assert_array_equal(ds["band_data"].values, rasterio_decoded(corpus[name]))


# -- nodata -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["-3.4e+38", "-3.40282e+38", "3.3e38", "0.1", "1e39"])
def test_float32_nodata_is_rounded_to_the_band_type_as_gdal_does(tmp_path: Path, text: str) -> None:
    data = pixels(1, 40, 50, "float32")
    with np.errstate(over="ignore"):
        data[:, 10:20, 5:25] = np.float32(float(text))  # the pixels hold the float32 value
    path = write_gdal(tmp_path / "f32.tif", width=50, height=40, dtype="float32", nodata=0.5)
    with rasterio.open(path, "r+") as dst:
        dst.write(data)
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages[0].tags["GDAL_NODATA"].overwrite(text + "\x00")
    ds = open_decoded(path)
    with rasterio.open(path) as src:
        nodata = src.nodata
        expected = src.read(masked=True)
    assert ds["band_data"].encoding["_FillValue"] == nodata
    assert expected.mask.sum() == 200  # GDAL masks every nodata pixel
    np.testing.assert_array_equal(np.isnan(ds["band_data"].values), expected.mask)
    np.testing.assert_array_equal(ds["band_data"].values, expected.filled(np.nan))


@pytest.mark.parametrize(
    ("text", "nodata"),
    [
        ("None", 0.0),  # no number: GDAL reads 0
        ("-nan", 0.0),
        ("5abc", 5.0),  # the number at the start
        ("1_000", 1.0),
        ("2,5", 2.5),  # a decimal comma
        ("+-5", -5.0),
        ("1.#QNAN", np.nan),  # MSVC's spelling
        ("-1.#INF", -np.inf),
        ("  7  ", 7.0),
    ],
)
def test_nodata_text_is_read_as_gdal_reads_it(tmp_path: Path, text: str, nodata: float) -> None:
    data = np.array([[[0.0, 5.0, 1.0, 2.5], [-5.0, 7.0, np.nan, -np.inf]]], dtype="float32")
    path = write_gdal(
        tmp_path / "f32.tif", width=4, height=2, dtype="float32", nodata=9.0, data=data
    )
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages[0].tags["GDAL_NODATA"].overwrite(text + "\x00")
    with rasterio.open(path) as src:
        np.testing.assert_equal(src.nodata, nodata)
        expected = src.read(masked=True)

    ds = open_decoded(path)

    np.testing.assert_equal(ds["band_data"].encoding["_FillValue"], nodata)
    np.testing.assert_array_equal(ds["band_data"].values, expected.filled(np.nan))


def sparse_with_nodata(tmp_path: Path, data: np.ndarray[Any, Any], text: str) -> Path:
    """A 64 x 64 file of 32 x 32 tiles of which only the first is written (the rest GDAL
    fills with the nodata), its ``GDAL_NODATA`` tag rewritten to ``text``, which GDAL's API
    would not write for the band's type."""
    path = write_gdal(
        tmp_path / "sparse.tif",
        dtype=str(data.dtype),
        nodata=1,
        sparse_ok="TRUE",
        tiled=True,
        blockxsize=32,
        blockysize=32,
        window=(0, 0, 32, 32),
        width=64,
        height=64,
        data=data,
    )
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages[0].tags["GDAL_NODATA"].overwrite(text + "\x00")
    return path


@pytest.mark.parametrize(
    ("dtype", "text", "unwritten"),
    [("uint8", "300", 255), ("int16", "40000.5", 32767), ("uint16", "nan", 0)],
)
def test_unwritten_tiles_read_as_gdal_converts_a_nodata_the_band_cannot_hold(
    tmp_path: Path, dtype: str, text: str, unwritten: int
) -> None:
    data = np.full((1, 64, 64), 100, dtype)
    path = sparse_with_nodata(tmp_path, data, text)
    with pytest.warns(RuntimeWarning, match=rf"does not fit {dtype}; it masks nothing"):
        ds = open_decoded(path)
    with rasterio.open(path) as src:
        assert src.read(1)[40, 40] == unwritten  # GDAL fills unwritten tiles with it
    assert "_FillValue" not in ds["band_data"].encoding
    np.testing.assert_array_equal(ds["band_data"].values, rasterio_decoded(path))


@pytest.mark.parametrize(
    ("dtype", "text", "masked", "unwritten"),
    [("uint8", "7.5", 7, 8), ("int16", "-2.5", -2, -3), ("uint16", "0.9", 0, 1)],
)
def test_a_fractional_nodata_masks_the_integer_gdal_casts_it_to(
    tmp_path: Path, dtype: str, text: str, masked: int, unwritten: int
) -> None:
    # GDAL's nodata mask compares pixels with the nodata cast to the band's type (truncated),
    # while it fills unwritten tiles with the nodata rounded: those stay unmasked.
    data = np.full((1, 64, 64), 100, dtype)
    data[0, :4, :4] = masked
    data[0, 4:8, :4] = unwritten
    path = sparse_with_nodata(tmp_path, data, text)
    with rasterio.open(path) as src:
        assert src.read(1)[40, 40] == unwritten
        assert src.read(1, masked=True).mask.sum() == 16

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        ds = open_decoded(path)

    assert ds["band_data"].encoding["_FillValue"] == masked
    np.testing.assert_array_equal(ds["band_data"].values, rasterio_decoded(path))


@pytest.mark.parametrize(
    ("text", "nodata"),
    [
        (None, -9),  # rasterio writes -2**63 as "-9.2233720368547758e+18"
        ("12.7", 12),
    ],
)
def test_int64_nodata_is_the_leading_integer_gdal_parses(
    tmp_path: Path, text: str | None, nodata: int
) -> None:
    data = np.zeros((1, 64, 64), "int64")
    data[0, :8, :8] = nodata
    data[0, 8:16, :8] = -(2**63)
    path = write_gdal(
        tmp_path / "i64.tif",
        dtype="int64",
        nodata=-(2**63),
        sparse_ok="TRUE",
        tiled=True,
        blockxsize=32,
        blockysize=32,
        window=(0, 0, 32, 32),
        width=64,
        height=64,
        data=data,
    )
    if text is not None:
        with tifffile.TiffFile(path, mode="r+b") as tif:
            tif.pages[0].tags["GDAL_NODATA"].overwrite(text + "\x00")
    with rasterio.open(path) as src:
        assert src.read(1)[40, 40] == nodata  # unwritten tiles
        assert src.read(1, masked=True).mask.sum() == 64 + 3 * 32 * 32
    ds = open_decoded(path)
    assert ds["band_data"].encoding["_FillValue"] == nodata
    np.testing.assert_array_equal(ds["band_data"].values, rasterio_decoded(path))


def test_complex_nodata_is_a_cf_fill_value_xarray_decodes(tmp_path: Path) -> None:
    data = (pixels(1, 40, 50, "float32") * (1 + 2j)).astype("complex64")
    data[:, :10, :10] = -1  # GDAL's nodata pixels: the nodata value, imaginary part 0
    path = write_gdal(
        tmp_path / "c64.tif", width=50, height=40, dtype="complex64", nodata=-1, data=data
    )
    ds = open_decoded(path)
    assert ds["band_data"].encoding["_FillValue"] == -1 + 0j
    with rasterio.open(path) as src:
        expected = src.read(masked=True)
    assert expected.mask.sum() == 100
    np.testing.assert_array_equal(ds["band_data"].values, expected.filled(np.nan))


# -- scale and offset ---------------------------------------------------------------------


def test_shared_band_scale_and_offset_are_cf_packing(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "packed.tif", count=2, dtype="int16", nodata=-9999)
    with rasterio.open(path, "r+") as dst:
        dst.scales, dst.offsets = (0.01, 0.01), (-5.0, -5.0)
        data = dst.read()
        data[:, :10, :10] = -9999
        dst.write(data)
    ds = open_decoded(path)
    assert ds["band_data"].encoding["scale_factor"] == 0.01
    assert ds["band_data"].encoding["add_offset"] == -5.0
    assert ds["band_data"].dtype == np.float64
    np.testing.assert_array_equal(ds["band_data"].values, rasterio_decoded(path))


def test_a_band_scale_alone_is_still_cf_packing(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "scaled.tif", dtype="uint16")
    with rasterio.open(path, "r+") as dst:
        dst.scales = (2.5,)
    ds = open_decoded(path)
    assert ds["band_data"].encoding["add_offset"] == 0.0
    np.testing.assert_array_equal(ds["band_data"].values, rasterio_decoded(path))


def test_bands_of_different_scales_become_one_variable_each(tmp_path: Path) -> None:
    path = write_gdal(
        tmp_path / "bands.tif", count=3, dtype="int16", nodata=-1, interleave="band", tiled=True
    )
    with rasterio.open(path, "r+") as dst:
        dst.scales, dst.offsets = (0.01, 0.5, 1.0), (5.0, 0.0, 0.0)
    ds = open_decoded(path)
    assert sorted(ds.data_vars) == ["band_data_1", "band_data_2", "band_data_3"]
    assert "band" not in ds.dims
    for band in (1, 2, 3):
        variable = ds[f"band_data_{band}"]
        assert variable.dims == ("y", "x")
        assert variable.attrs["grid_mapping"] == "spatial_ref"
        np.testing.assert_array_equal(variable.values, rasterio_decoded(path, band))
    assert "scale_factor" not in ds["band_data_3"].encoding  # GDAL's identity: raw values


def test_overviews_keep_the_full_images_scales(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "ovr.tif", dtype="int16", tiled=True, overviews=(2,))
    with rasterio.open(path, "r+") as dst:
        dst.scales, dst.offsets = (0.1,), (3.0,)
    url = str(path)
    group = TIFFParser()(url, ObjectStoreRegistry.for_url(url)).group
    # GDAL reports scale 1 for an overview opened on its own; a pyramid with a different
    # unpacking per level would give its levels different values for the same place.
    attributes = group["overview_1/band_data"].metadata.attributes
    assert (attributes["scale_factor"], attributes["add_offset"]) == (0.1, 3.0)


def test_pixel_interleaved_bands_of_different_scales_are_refused(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "chunky.tif", count=2, dtype="int16")
    with rasterio.open(path, "r+") as dst:
        dst.scales = (0.1, 0.2)
    with pytest.raises(UnsupportedTIFFError, match=r"chunky\.tif .*different scales or offsets"):
        open_decoded(path)


def test_unreadable_gdal_metadata_is_ignored_with_a_warning(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "broken.tif", dtype="uint8", tags={"NOTE": "x"})
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tag = tif.pages[0].tags["GDAL_METADATA"]
        tag.overwrite("<GDALMetadata><Item" + " " * (len(tag.value) - 19))
    with pytest.warns(RuntimeWarning, match="GDAL_METADATA tag is not XML"):
        ds = open_decoded(path)
    with rasterio.open(path) as src:
        assert src.scales == (1.0,)
        np.testing.assert_array_equal(ds["band_data"].values, src.read())


# -- georeferencing -----------------------------------------------------------------------


def test_negative_y_pixel_scale_is_north_up_as_in_gdal(tmp_path: Path) -> None:
    path = write_tifffile_with_geotags(
        tmp_path / "negative_scale.tif",
        (SCALE, "d", 3, (10.0, -10.0, 0.0), True),
        (TIEPOINT, "d", 6, (2.0, 3.0, 0.0, 500000.0, 4000000.0, 0.0), True),
        UTM_GEOKEYS,
    )
    with rasterio.open(path) as src:
        assert src.transform.e == -10.0 and src.crs == rasterio.crs.CRS.from_epsg(32633)
    ds = open_decoded(path)
    x, y = xy_from_transform(path)
    np.testing.assert_array_equal(ds["x"].values, x)
    np.testing.assert_array_equal(ds["y"].values, y)


def test_an_epsg_code_proj_does_not_know_keeps_the_transform_as_gdal_does(
    tmp_path: Path,
) -> None:
    # ProjectedCSTypeGeoKey 12345: no CRS in PROJ's database (a newer or withdrawn code).
    unknown = (GEOKEYS, "H", 12, [1, 1, 0, 2, 1024, 0, 1, 1, 3072, 0, 1, 12345])
    path = write_tifffile_with_geotags(
        tmp_path / "unknown_code.tif",
        (SCALE, "d", 3, (10.0, 10.0, 0.0), True),
        (TIEPOINT, "d", 6, (0.0, 0.0, 0.0, 500000.0, 4000000.0, 0.0), True),
        unknown,
    )
    with pytest.warns(RuntimeWarning, match="ProjectedCSTypeGeoKey 12345 is no EPSG CRS"):
        ds = open_decoded(path)
    assert "crs_wkt" not in ds["spatial_ref"].attrs
    x, y = xy_from_transform(path)
    np.testing.assert_array_equal(ds["x"].values, x)
    np.testing.assert_array_equal(ds["y"].values, y)
    with rasterio.open(path) as src:
        np.testing.assert_array_equal(ds["band_data"].values, src.read())


def test_geokeys_beyond_their_parameters_keep_the_transform_as_gdal_does(tmp_path: Path) -> None:
    # ProjLinearUnitSizeGeoKey's value is the 5th double of GeoDoubleParams, which has one.
    damaged = (GEOKEYS, "H", 8, [1, 1, 0, 1, 3088, 34736, 1, 5])
    path = write_tifffile_with_geotags(
        tmp_path / "damaged_keys.tif",
        (SCALE, "d", 3, (10.0, 10.0, 0.0), True),
        (TIEPOINT, "d", 6, (0.0, 0.0, 0.0, 500000.0, 4000000.0, 0.0), True),
        damaged,
        (34736, "d", 1, (1.0,), True),
    )
    with pytest.warns(RuntimeWarning, match="GeoTIFF keys cannot be read"):
        ds = open_decoded(path)
    assert "crs_wkt" not in ds["spatial_ref"].attrs
    x, y = xy_from_transform(path)
    np.testing.assert_array_equal(ds["x"].values, x)
    np.testing.assert_array_equal(ds["y"].values, y)


@pytest.mark.parametrize(
    "geotags",
    [
        pytest.param(
            [
                (SCALE, "d", 3, (2.0, 3.0, 0.0), True),
                (TIEPOINT, "d", 6, (1.0, 2.0, 0.0, 100.0, 200.0, 0.0), True),
            ],
            id="scale-and-tiepoint",
        ),
        pytest.param(
            [(MATRIX, "d", 16, NORTH_UP, True)],
            id="matrix",
        ),
    ],
)
def test_transform_without_geokeys_gives_xy_without_crs(
    tmp_path: Path, geotags: list[tuple[Any, ...]]
) -> None:
    path = write_tifffile_with_geotags(tmp_path / "no_geokeys.tif", *geotags)
    with tifffile.TiffFile(path) as tif:
        assert tif.pages[0].geotiff_tags is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no CRS keys: nothing to warn about
        ds = open_decoded(path)
    x, y = xy_from_transform(path)
    np.testing.assert_array_equal(ds["x"].values, x)
    np.testing.assert_array_equal(ds["y"].values, y)
    with rasterio.open(path) as src:
        assert src.crs is None
        geotransform = [float(v) for v in ds["spatial_ref"].attrs["GeoTransform"].split()]
        assert geotransform == list(src.transform.to_gdal())
    assert "crs_wkt" not in ds["spatial_ref"].attrs


def test_pixel_scale_with_several_tiepoints_uses_the_first_as_gdal_does(tmp_path: Path) -> None:
    tiepoints = (0.0, 0.0, 0.0, 1000.0, 2000.0, 0.0, 10.0, 10.0, 0.0, 1070.0, 1930.0, 0.0)
    path = write_tifffile_with_geotags(
        tmp_path / "tiepoints.tif",
        (SCALE, "d", 3, (7.0, 7.0, 0.0), True),
        (TIEPOINT, "d", 12, tiepoints, True),
        UTM_GEOKEYS,
    )
    ds = open_decoded(path)
    x, y = xy_from_transform(path)
    np.testing.assert_array_equal(ds["x"].values, x)
    np.testing.assert_array_equal(ds["y"].values, y)


def noisy_matrix(b: float, d: float) -> tuple[Any, ...]:
    """A north-up ModelTransformation whose rotation terms are ``b`` and ``d``."""
    matrix = [10.0, b, 0, 500000.0, d, -10.0, 0, 4000000.0, 0, 0, 0, 0, 0, 0, 0, 1]
    return (MATRIX, "d", 16, matrix, True)


def test_rotation_noise_gives_xy_as_rioxarray_computes_them(tmp_path: Path) -> None:
    # Matrices written by other software carry rounding noise in their rotation terms; rioxarray
    # (affine's is_rectilinear) still gives 1-D x/y, the first row's and column's centres.
    path = write_tifffile_with_geotags(tmp_path / "noisy.tif", noisy_matrix(1e-9, -2e-9))
    x, y = xy_from_transform(path)
    ds = open_decoded(path)
    np.testing.assert_array_equal(ds["x"].values, x)
    np.testing.assert_array_equal(ds["y"].values, y)
    with virtualstac.limits.limits(coordinate_bytes=16):  # too big to hold: lazy from the transform
        lazy = open_virtual_dataset(str(path), registry=ObjectStoreRegistry.for_url(str(path)))
    assert isinstance(lazy.xindexes["x"], RangeIndex)
    np.testing.assert_allclose(lazy["x"].values, x, rtol=1e-15)
    np.testing.assert_allclose(lazy["y"].values, y, rtol=1e-15)


def test_equal_rotation_terms_are_a_rotation_without_xy_as_in_rioxarray(tmp_path: Path) -> None:
    # rioxarray takes equal non-zero terms for a rotation, however small (2-D xc/yc instead).
    path = write_tifffile_with_geotags(tmp_path / "rotated.tif", noisy_matrix(1e-9, 1e-9))
    ds = open_decoded(path)
    assert "x" not in ds and "y" not in ds
    assert ds["spatial_ref"].attrs["GeoTransform"].split()[2] == "1e-09"


# -- short bottom tiles -------------------------------------------------------------------


@pytest.mark.parametrize("planar", [False, True], ids=["chunky", "planar"])
@pytest.mark.parametrize("compression", [None, "packbits", "zlib", "lzw"])
def test_short_bottom_tiles_read_as_gdal_reads_them(
    tmp_path: Path, compression: str | None, planar: bool
) -> None:
    path = write_short_bottom_tiles(tmp_path / "short.tif", compression=compression, planar=planar)
    with tifffile.TiffFile(path) as tif:
        counts = tif.pages[0].databytecounts
        assert compression is not None or counts[-1] < counts[0]
        from_tifffile = tif.asarray()
    # Uncompressed short tiles are measured and PackBits ones padded; others need the option.
    by_default = compression in (None, "packbits")
    ds = open_decoded(path, **({} if by_default else {"short_tiles": True}))
    with rasterio.open(path) as src:
        expected = src.read()
    np.testing.assert_array_equal(ds["band_data"].values, expected)
    band_first = from_tifffile if planar else np.moveaxis(from_tifffile, -1, 0)
    np.testing.assert_array_equal(expected, band_first)


def test_whole_tiles_get_no_pad_codec(tmp_path: Path) -> None:
    # GDAL stores whole tiles: a COG whose image ends inside its bottom tiles keeps the codec
    # chain that Zarr readers without virtualstac decode.
    path = write_gdal(tmp_path / "cog.tif", driver="COG", compress="DEFLATE", blocksize=64)
    url = str(path)
    array = TIFFParser()(url, ObjectStoreRegistry.for_url(url)).group["band_data"]
    assert [c["name"] for c in array.metadata.to_dict()["codecs"]] == ["bytes", "numcodecs.zlib"]
    uncompressed = write_gdal(tmp_path / "whole.tif", tiled=True, blockxsize=64, blockysize=64)
    url = str(uncompressed)
    array = TIFFParser()(url, ObjectStoreRegistry.for_url(url)).group["band_data"]
    assert [c["name"] for c in array.metadata.to_dict()["codecs"]] == ["bytes"]


def test_uncompressed_tiles_shorter_than_their_rows_are_refused(tmp_path: Path) -> None:
    path = write_short_bottom_tiles(tmp_path / "truncated.tif", compression=None)
    with tifffile.TiffFile(path, mode="r+b") as tif:
        counts = list(tif.pages[0].databytecounts)
        counts[1] -= 2  # a whole tile of the first row, cut short
        tif.pages[0].tags["TileByteCounts"].overwrite(counts)
    with pytest.raises(UnsupportedTIFFError, match=r"uncompressed tile 1 holds 6142 bytes"):
        open_decoded(path)


# -- refusals name the reason -------------------------------------------------------------


@pytest.mark.parametrize(
    "options", [{}, {"compress": "JPEG", "tiled": True}, {"interleave": "band"}], ids=str
)
def test_8_bit_cmyk_is_refused_as_gdal_converts_it_to_rgba(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    path = write_gdal(tmp_path / "cmyk.tif", count=4, dtype="uint8", photometric="CMYK", **options)
    with rasterio.open(path) as src:
        assert src.tags(ns="IMAGE_STRUCTURE")["SOURCE_COLOR_SPACE"] == "CMYK"
        assert src.colorinterp[0].name == "red"
    with pytest.raises(UnsupportedTIFFError, match=r"cmyk\.tif \(IFD 0, band_data\): 8-bit CMYK"):
        open_decoded(path)


def test_16_bit_cmyk_reads_as_stored_as_gdal_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "cmyk16.tif"
    tifffile.imwrite(path, pixels(4, 40, 50, "uint16"), photometric="separated")
    with rasterio.open(path) as src:
        assert src.colorinterp[0].name == "cyan"
    np.testing.assert_array_equal(open_decoded(path)["band_data"].values, rasterio_decoded(path))


@pytest.mark.parametrize("compression", [None, "zlib"])
def test_8_bit_ycbcr_without_jpeg_is_refused_as_gdal_converts_it_to_rgb(
    tmp_path: Path, compression: str | None
) -> None:
    path = tmp_path / "ycbcr.tif"
    rgb = np.moveaxis(pixels(3, 40, 50, "uint8"), 0, -1)
    tifffile.imwrite(path, rgb, photometric="ycbcr", subsampling=(1, 1), compression=compression)
    with rasterio.open(path) as src:
        assert src.tags(ns="IMAGE_STRUCTURE")["SOURCE_COLOR_SPACE"] == "YCbCr"
    with pytest.raises(UnsupportedTIFFError, match=r"ycbcr\.tif \(IFD 0, band_data\): 8-bit YCbCr"):
        open_decoded(path)


def test_16_bit_ycbcr_reads_as_stored_as_gdal_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "ycbcr16.tif"
    ycbcr = np.moveaxis(pixels(3, 40, 50, "uint16"), 0, -1)
    tifffile.imwrite(path, ycbcr, photometric="ycbcr", subsampling=(1, 1))
    with rasterio.open(path) as src:
        assert src.colorinterp[0].name == "Y"
    np.testing.assert_array_equal(open_decoded(path)["band_data"].values, rasterio_decoded(path))


def test_complex_samples_with_horizontal_differencing_read_as_gdal_reads_them(
    tmp_path: Path,
) -> None:
    data = (pixels(2, 40, 50, "float32") * (1 - 3j)).astype("complex64")
    path = write_gdal(
        tmp_path / "c64_pred2.tif",
        width=50,
        height=40,
        count=2,
        dtype="complex64",
        data=data,
        compress="DEFLATE",
        predictor=2,
    )
    with rasterio.open(path) as src:
        expected = src.read()
    np.testing.assert_array_equal(expected, data)
    np.testing.assert_array_equal(open_decoded(path)["band_data"].values, expected)


def test_big_endian_complex_samples_with_horizontal_differencing_are_refused(
    tmp_path: Path,
) -> None:
    path = write_gdal(
        tmp_path / "c64_pred2_be.tif",
        dtype="complex64",
        data=np.ones((1, 200, 300)),
        compress="DEFLATE",
        predictor=2,
        endianness="BIG",
    )
    with pytest.raises(
        UnsupportedTIFFError, match=r"c64_pred2_be\.tif .*predictor 2\) of big-endian complex"
    ):
        open_decoded(path)


def test_128_bit_complex_samples_with_horizontal_differencing_are_refused(tmp_path: Path) -> None:
    # Deflate: libtiff ignores a predictor on uncompressed samples.
    data = np.ones((8, 8), "complex128")
    path = write_retagged(tmp_path / "c128_pred2.tif", data, 317, 2, compression="zlib")
    with tifffile.TiffFile(path) as tif:
        assert tif.pages[0].predictor == 2
    with pytest.raises(UnsupportedTIFFError, match=r"predictor 2\) of complex128 samples"):
        open_decoded(path)
