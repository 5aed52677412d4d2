"""LERC tiles with validity masks read as GDAL reads them: NaN floats and 8-bit alpha bands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import imagecodecs
import numpy as np
import pytest
import rasterio
import tifffile
import zarr

from virtualstac import ObjectStoreRegistry
from virtualstac.errors import ChunkDecodeError
from virtualstac.parsers.tiff import TIFFParser

sys.path.insert(0, str(Path(__file__).parents[1] / "parsers"))
from tiff_files import pixels, write_gdal

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")


def read_virtual(path: Path) -> np.ndarray:
    url = str(path)
    store = TIFFParser()(url, ObjectStoreRegistry.for_url(url))
    return zarr.open_group(store, mode="r")["band_data"][...]


def read_rasterio(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        return src.read()


def with_nan_holes(count: int, dtype: str) -> np.ndarray:
    """Pixels with a NaN corner in every band, and a NaN square in the second band only."""
    data = pixels(count, 100, 120, dtype)
    data[:, :10, :20] = np.nan
    if count > 1:
        data[1, 40:50, 60:75] = np.nan
    return data


@pytest.mark.parametrize("compress", ["LERC", "LERC_DEFLATE", "LERC_ZSTD"])
@pytest.mark.parametrize("count", [1, 3])
def test_nan_pixels_of_a_float_cog_read_as_nan(tmp_path: Path, compress: str, count: int) -> None:
    data = with_nan_holes(count, "float32")
    path = write_gdal(
        tmp_path / "nan.tif",
        driver="COG",
        width=120,
        height=100,
        count=count,
        dtype="float32",
        data=data,
        compress=compress,
        blocksize=64,
    )
    expected = read_rasterio(path)
    np.testing.assert_array_equal(np.isnan(expected), np.isnan(data))
    np.testing.assert_array_equal(read_virtual(path), expected)


@pytest.mark.parametrize("interleave", ["pixel", "band"])
def test_nan_pixels_of_float64_bands_read_as_nan(tmp_path: Path, interleave: str) -> None:
    data = with_nan_holes(2, "float64")
    path = write_gdal(
        tmp_path / "nan64.tif",
        width=120,
        height=100,
        count=2,
        dtype="float64",
        data=data,
        compress="LERC",
        interleave=interleave,
        tiled=True,
        blockxsize=64,
        blockysize=64,
    )
    np.testing.assert_array_equal(read_virtual(path), read_rasterio(path))


@pytest.mark.parametrize("transparent", [True, False], ids=["transparent", "opaque"])
def test_alpha_band_of_8_bit_rgba_is_rebuilt_from_the_mask(
    tmp_path: Path, transparent: bool
) -> None:
    data = pixels(4, 100, 120, "uint8")
    data[3] = 255
    if transparent:
        data[3, 20:30, :50] = 0
    path = write_gdal(
        tmp_path / "rgba.tif",
        width=120,
        height=100,
        count=4,
        dtype="uint8",
        data=data,
        compress="LERC",
        photometric="RGB",
        alpha="YES",
        tiled=True,
        blockxsize=64,
        blockysize=64,
    )
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        with open(path, "rb") as file:
            file.seek(page.dataoffsets[0])
            tile = imagecodecs.lerc_decode(file.read(page.databytecounts[0]))
    assert tile.shape == (64, 64, 3)  # GDAL stores the alpha band as the LERC mask
    np.testing.assert_array_equal(read_virtual(path), read_rasterio(path))


def test_masked_integer_samples_are_refused_as_gdal_refuses_them(tmp_path: Path) -> None:
    data = pixels(1, 32, 32, "uint16")[0]
    valid = np.ones(data.shape, bool)
    valid[:4, :4] = False
    tile = imagecodecs.lerc_encode(data, masks=valid)
    path = tmp_path / "masked_u16.tif"
    tiles: Any = iter([tile])
    tifffile.imwrite(
        path, tiles, shape=data.shape, dtype=data.dtype, tile=(32, 32), compression="lerc"
    )
    with pytest.raises(rasterio.errors.RasterioIOError):
        read_rasterio(path)
    with pytest.raises(ChunkDecodeError, match=r"masked_u16\.tif.*masks pixels of uint16 samples"):
        read_virtual(path)
