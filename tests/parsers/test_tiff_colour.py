"""Colour spaces GDAL converts are refused; those it reads as stored read as it reads them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import tifffile
import zarr

from virtualstac import ObjectStoreRegistry
from virtualstac.parsers.tiff import TIFFParser, UnsupportedTIFFError

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

sys.path.insert(0, str(Path(__file__).parent))
from tiff_files import pixels  # noqa: E402

_CIELAB = 8


def write_cielab(path: Path, samples: int, dtype: str, **options: Any) -> np.ndarray:
    """A CIELab TIFF of ``samples`` bands (band first) written by tifffile."""
    bands = pixels(samples, 50, 70, dtype)
    planar = options.get("planarconfig") == "separate"
    tifffile.imwrite(
        path,
        bands if planar else np.moveaxis(bands, 0, -1),
        photometric="cielab",
        extrasamples=[0] * (samples - 3),
        **options,
    )
    with tifffile.TiffFile(path) as tif:
        assert tif.pages.first.photometric == _CIELAB
    return bands


def read(path: Path) -> np.ndarray:
    url = str(path)
    group = zarr.open_group(TIFFParser()(url, ObjectStoreRegistry.for_url(url)), mode="r")
    return np.asarray(group["band_data"][...])


@pytest.mark.parametrize(
    "options",
    [{}, {"compression": "zlib"}, {"planarconfig": "separate"}],
    ids=["uncompressed", "deflate", "band_interleaved"],
)
def test_8_bit_cielab_is_refused_as_gdal_converts_it_to_rgba(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    path = tmp_path / "lab.tif"
    write_cielab(path, 3, "uint8", **options)
    with rasterio.open(path) as src:
        assert src.count == 4  # GDAL's RGBA

    with pytest.raises(UnsupportedTIFFError, match=r"8-bit CIELab .* converted to RGBA"):
        read(path)


@pytest.mark.parametrize(
    ("samples", "dtype", "options"),
    [(3, "uint16", {}), (4, "uint8", {}), (4, "uint8", {"planarconfig": "separate"})],
    ids=["16_bit", "extra_sample", "extra_sample_band_interleaved"],
)
def test_other_cielab_reads_as_stored_as_gdal_reads_it(
    tmp_path: Path, samples: int, dtype: str, options: dict[str, Any]
) -> None:
    path = tmp_path / "lab.tif"
    bands = write_cielab(path, samples, dtype, **options)
    with rasterio.open(path) as src:
        expected = src.read()

    np.testing.assert_array_equal(expected, bands)
    np.testing.assert_array_equal(read(path), expected)
