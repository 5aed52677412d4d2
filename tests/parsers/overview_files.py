"""COGs and GeoTIFFs with overviews, written by GDAL (through rasterio), for the overview tests.

Each builder returns the path; the tests compare every level with
``rasterio.open(path, overview_level=n).read()``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.enums import Resampling
from tiff_files import UTM, UTM_TRANSFORM, pixels, write_gdal


def write_rgb_cog(path: Path, **options: object) -> Path:
    """A pixel-interleaved 3-band uint16 COG (GDAL's COG driver), deflate, 3 overviews."""
    return write_gdal(
        path,
        driver="COG",
        width=600,
        height=400,
        count=3,
        compress="DEFLATE",
        predictor=2,
        blocksize=128,
        overviews="AUTO",
        overview_resampling="AVERAGE",
        **options,
    )


def write_masked_cog(path: Path) -> Path:
    """A 3-band uint8 COG with an internal mask: a mask IFD for the image and each overview."""
    source = path.with_suffix(".src.tif")
    data = pixels(3, 400, 600, "uint8")
    mask = np.zeros((400, 600), dtype=np.uint8)
    mask[40:300, 60:500] = 255
    profile = {
        "driver": "GTiff",
        "width": 600,
        "height": 400,
        "count": 3,
        "dtype": "uint8",
        "crs": UTM,
        "transform": UTM_TRANSFORM,
    }
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        with rasterio.open(source, "w", **profile) as dst:
            dst.write(data)
            dst.write_mask(mask)
        rasterio.shutil.copy(
            source, path, driver="COG", blocksize=128, overview_count=2, compress="DEFLATE"
        )
    source.unlink()
    return path


def write_overviews_added_later(path: Path) -> Path:
    """A GTiff whose overview 3x was added after 2x and 4x: GDAL keeps the file's order."""
    write_gdal(
        path,
        width=300,
        height=200,
        dtype="int16",
        nodata=-9999,
        compress="LZW",
        tiled=True,
        blockxsize=64,
        blockysize=64,
        overviews=(2, 4),
    )
    with rasterio.open(path, "r+") as dst:
        dst.build_overviews([3], Resampling.nearest)
    return path


def write_band_interleaved_cog(path: Path) -> Path:
    """A band-interleaved (planar) float32 COG with NaN nodata and 2 overviews."""
    return write_gdal(
        path,
        driver="COG",
        width=500,
        height=300,
        count=2,
        dtype="float32",
        nodata=float("nan"),
        compress="ZSTD",
        interleave="BAND",
        blocksize=64,
        overview_count=2,
    )
