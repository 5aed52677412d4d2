"""COGs written by GDAL, published to Icechunk and Kerchunk, read back as rasterio reads them."""

import sys
from pathlib import Path

import fsspec
import icechunk
import imagecodecs.numcodecs
import numpy as np
import pytest
import rasterio
import xarray as xr

from virtualstac import open_virtual_dataset
from virtualstac.parsers.tiff import TIFFParser
from virtualstac.writers import authorize_containers, ensure_containers, required_containers

sys.path.insert(0, str(Path(__file__).parents[1] / "parsers"))
from tiff_files import pixels, write_gdal

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

COGS = {
    "deflate-predictor": {"compress": "DEFLATE", "predictor": 2, "count": 3},
    "lzw-band-interleave": {"compress": "LZW", "count": 2, "interleave": "BAND"},
    "zstd-float": {"compress": "ZSTD", "dtype": "float32", "predictor": 3},
    "complex-nodata": {
        "compress": "DEFLATE",
        "dtype": "complex64",
        "nodata": -1,
        "data": (pixels(1, 200, 300, "float32") * (1 + 2j)).astype("complex64"),
    },
    # Sentinel-1 SLC's type: the virtualstac.complex_int codec widens it to complex64.
    "complex-int16": {
        "compress": "ZSTD",
        "dtype": "complex_int16",
        "count": 2,
        "data": (pixels(2, 200, 300, "int16") * (1 - 1j)).astype("complex64"),
    },
    # GDAL's NBITS: imagecodecs_packints unpacks the bit stream.
    "nbits-12": {
        "compress": "DEFLATE",
        "nbits": 12,
        "data": pixels(1, 200, 300, "uint16") % 4096,
    },
}


@pytest.fixture(params=sorted(COGS))
def cog(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    options = COGS[request.param]
    return write_gdal(
        tmp_path / f"{request.param}.tif",
        driver="COG",
        width=300,
        height=200,
        blocksize=64,
        overviews=(),
        **options,
    )


def test_icechunk_round_trip(tmp_path: Path, cog: Path) -> None:
    virtual = open_virtual_dataset(str(cog))
    containers = required_containers(virtual.virtual.to_group())
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config=ensure_containers(icechunk.RepositoryConfig.default(), containers),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="cog")
    published = xr.open_zarr(repository.readonly_session("main").store, consolidated=False)
    with rasterio.open(cog) as src:
        np.testing.assert_array_equal(published["band_data"].values, src.read())
        np.testing.assert_allclose(
            published["x"].values[[0, -1]], [src.xy(0, 0)[0], src.xy(0, src.width - 1)[0]]
        )


def test_kerchunk_round_trip_read_by_fsspec(tmp_path: Path, cog: Path) -> None:
    imagecodecs.numcodecs.register_codecs()  # how any Kerchunk reader of TIFF references decodes
    virtual = open_virtual_dataset(str(cog), parser=TIFFParser(band_layout="native"))
    references = virtual.virtual.to_kerchunk()
    fs = fsspec.filesystem("reference", fo=references, remote_protocol="file")
    opened = xr.open_dataset(fs.get_mapper(), engine="zarr", consolidated=False)
    with rasterio.open(cog) as src:
        np.testing.assert_array_equal(
            opened["band_data"].transpose("band", "y", "x").values, src.read()
        )
