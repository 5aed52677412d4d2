"""float16 GeoTIFFs (GDAL's NBITS=16 on float32 data), read as GDAL reads them.

GDAL rounds a float32 band's nodata to float32 before masking, but compares a float16 band's
pixels with the nodata unrounded: a nodata float16 cannot hold (-9999, stored as -10000) masks
nothing, although GDAL fills unwritten pixels with it rounded.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import rasterio
import xarray as xr

sys.path.insert(0, str(Path(__file__).parent))
from tiff_files import write_gdal


def masked_as_rasterio(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        values = src.read(masked=src.nodata is not None)
    return np.ma.filled(values.astype(np.float32), np.nan)


@pytest.mark.filterwarnings("ignore:.*does not fit float16:RuntimeWarning")
@pytest.mark.parametrize("nodata", [-9999.0, 0.1, -2048.0, 1.0000000001, float("nan")])
@pytest.mark.parametrize("sparse", [False, True], ids=["written", "sparse"])
def test_float16_nodata_masks_what_gdal_masks(tmp_path: Path, nodata: float, sparse: bool) -> None:
    # Only the top-left 32 x 32 pixels are written: the rest is nodata, written or unwritten.
    # (Tiles: GDAL fills a short last strip with whole rows that libtiff then misreads.)
    path = write_gdal(
        tmp_path / "half.tif",
        dtype="float32",
        nbits=16,
        nodata=nodata,
        window=(0, 0, 32, 32),
        compress="DEFLATE",
        tiled=True,
        sparse_ok=sparse,
    )
    with xr.open_dataset(path, engine="virtualstac") as ds:
        values = ds["band_data"].values
    assert values.dtype == np.float16
    np.testing.assert_array_equal(values.astype(np.float32), masked_as_rasterio(path))


def test_a_float16_nodata_that_masks_nothing_is_said(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "half.tif", dtype="float32", nbits=16, nodata=-9999)
    said = "nodata -9999 does not fit float16; it masks nothing, and unwritten .* -10000.0"
    with pytest.warns(RuntimeWarning, match=said):
        xr.open_dataset(path, engine="virtualstac").close()
