"""Uncompressed strips and tiles above ``max_chunk_bytes`` are chunks of whole rows.

Files keep a whole image in one strip (tifffile's default, old tools, scanners) or in strips
of many rows (GDAL's ``BLOCKYSIZE``). Uncompressed, their rows are byte ranges of their own,
so a window reads only the rows it needs, and a strip above ``chunk_bytes`` still opens.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import tifffile
import xarray as xr
import zarr

import virtualstac.limits
from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import LimitExceededError
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.tiff import TIFFParser
from virtualstac.storage.stats import counting_reads

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

sys.path.insert(0, str(Path(__file__).parent))
from tiff_files import pixels, write_gdal  # noqa: E402


def parse(path: Path, **options: Any) -> ManifestStore:
    return TIFFParser(**options)(str(path), ObjectStoreRegistry.for_url(str(path)))


def band_data(path: Path, **options: Any) -> zarr.Array:
    array = zarr.open_group(parse(path, **options), mode="r")["band_data"]
    assert isinstance(array, zarr.Array)
    return array


def rasterio_values(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        return src.read()


def codec_names(array: zarr.Array) -> list[str]:
    return [codec["name"] for codec in array.metadata.to_dict()["codecs"]]


def test_a_single_strip_is_read_in_blocks_of_rows(tmp_path: Path) -> None:
    # tifffile writes the image as one strip: 1,000 rows of 600 bytes.
    path = tmp_path / "one_strip.tif"
    tifffile.imwrite(path, pixels(1, 1000, 300, "uint16")[0])
    with tifffile.TiffFile(path) as tif:
        assert len(tif.pages.first.dataoffsets) == 1

    array = band_data(path, max_chunk_bytes=30_000)

    assert array.chunks == (1, 50, 300)  # 50 rows (30,000 bytes), which divides 1,000
    assert codec_names(array) == ["bytes"]  # every block whole: no padding
    np.testing.assert_array_equal(array[...], rasterio_values(path))


def test_a_window_reads_only_the_blocks_it_needs(tmp_path: Path) -> None:
    path = tmp_path / "one_strip.tif"
    tifffile.imwrite(path, pixels(1, 1000, 300, "uint16")[0])
    array = band_data(path, max_chunk_bytes=30_000)

    with counting_reads() as reads:
        window = array[0, 120:140, 10:20]

    assert reads.bytes == 30_000  # rows 100-149, of the 600,000 bytes of the strip
    np.testing.assert_array_equal(window, rasterio_values(path)[0, 120:140, 10:20])


def test_an_odd_height_without_a_close_divisor_pads_the_last_block(tmp_path: Path) -> None:
    # 1,009 is prime: no divisor near the 100 rows that fit, so blocks of 100, the last of
    # them 9 rows, padded to a whole chunk.
    path = tmp_path / "odd.tif"
    tifffile.imwrite(path, pixels(1, 1009, 150, "int16")[0])

    array = band_data(path, max_chunk_bytes=30_000)

    assert array.chunks == (1, 100, 150)
    assert codec_names(array) == ["bytes", "virtualstac.pad"]
    np.testing.assert_array_equal(array[...], rasterio_values(path))


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32"])
@pytest.mark.parametrize("interleave", ["pixel", "band"])
def test_gdal_strips_of_many_rows_read_as_rasterio_reads_them(
    tmp_path: Path, dtype: str, interleave: str
) -> None:
    # Strips of 64 rows, the last of 23 (an odd height): blocks of a divisor of 64.
    path = write_gdal(
        tmp_path / "strips.tif",
        count=3,
        dtype=dtype,
        width=301,
        height=215,
        blockysize=64,
        interleave=interleave,
    )
    with tifffile.TiffFile(path) as tif:
        page = tif.pages.first
        assert page.compression == 1 and page.rowsperstrip == 64

    array = band_data(path, max_chunk_bytes=20_000)

    row_bytes = 301 * np.dtype(dtype).itemsize * (3 if interleave == "pixel" else 1)
    rows = array.chunks[1]
    assert 64 % rows == 0 and rows * row_bytes <= 20_000 < 2 * rows * row_bytes
    np.testing.assert_array_equal(array[...], rasterio_values(path))


def test_pixel_interleaved_blocks_keep_their_stored_order_natively(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "rgb.tif", count=3, dtype="uint8", height=99, blockysize=99)

    array = band_data(path, max_chunk_bytes=10_000, band_layout="native")

    assert array.chunks == (11, 300, 3)  # 11 rows of 900 bytes; 11 divides 99
    np.testing.assert_array_equal(array[...], np.moveaxis(rasterio_values(path), 0, -1))


def test_uncompressed_tiles_split_into_rows_of_tiles(tmp_path: Path) -> None:
    path = tmp_path / "tiles.tif"
    data = pixels(2, 300, 200, "float32")
    tifffile.imwrite(path, data, tile=(128, 128), planarconfig="separate", photometric="minisblack")

    array = band_data(path, max_chunk_bytes=20_000)

    assert array.chunks == (1, 32, 128)  # 32 rows of 512 bytes of a tile
    np.testing.assert_array_equal(array[...], data)
    np.testing.assert_array_equal(array[...], rasterio_values(path))


def test_unwritten_strips_are_missing_blocks_read_as_nodata(tmp_path: Path) -> None:
    path = write_gdal(
        tmp_path / "sparse.tif",
        dtype="uint16",
        nodata=7,
        sparse_ok="TRUE",
        blockysize=50,
        window=(100, 0, 50, 300),
    )

    array = band_data(path, max_chunk_bytes=10_000)
    store = parse(path, max_chunk_bytes=10_000)

    assert array.chunks == (1, 10, 300)
    manifest = store.group.arrays["band_data"].manifest
    assert manifest.lengths.reshape(-1).tolist().count(0) == 15  # 3 unwritten strips of 5
    np.testing.assert_array_equal(array[...], rasterio_values(path))


def test_overviews_of_a_stripped_image_are_split_too(tmp_path: Path) -> None:
    path = write_gdal(
        tmp_path / "overviews.tif", dtype="int16", height=400, blockysize=400, overviews=(2, 4)
    )
    group = zarr.open_group(parse(path, max_chunk_bytes=12_000), mode="r")

    for level in range(2):
        overview = group[f"overview_{level + 1}"]["band_data"]
        with rasterio.open(path, overview_level=level) as src:
            np.testing.assert_array_equal(overview[...], src.read())
    assert group["band_data"].chunks == (1, 20, 300)


def test_virtual_dataset_and_its_store_read_as_rasterio(tmp_path: Path) -> None:
    path = write_gdal(
        tmp_path / "scene.tif", count=2, dtype="float32", width=500, height=2999, blockysize=2999
    )
    registry = ObjectStoreRegistry.for_url(str(path))

    vds = open_virtual_dataset(str(path), registry=registry)
    ds = xr.open_zarr(vds.virtual.to_store(registry), consolidated=False)

    # 4,000 bytes a row: 1,048 rows fit 4 MiB; 2,999 = 2,999 * 1 has no divisor near, so
    # blocks of 1,048 rows and a padded last block.
    assert vds["band_data"].data.chunks == (2, 1048, 500)
    np.testing.assert_array_equal(ds["band_data"].values, rasterio_values(path))
    np.testing.assert_array_equal(
        ds["band_data"][:, 2990:, 100:110].values, rasterio_values(path)[:, 2990:, 100:110]
    )


def test_a_strip_above_the_chunk_limit_opens_in_blocks(tmp_path: Path) -> None:
    path = tmp_path / "big_strip.tif"
    tifffile.imwrite(path, pixels(1, 1200, 1000, "uint16")[0])  # one strip of 2.4 MB

    with virtualstac.limits.limits(chunk_bytes=1_000_000):
        array = band_data(path)
        values = array[...]

    assert array.chunks == (1, 400, 1000)  # 800,000 bytes, within the limit
    np.testing.assert_array_equal(values, rasterio_values(path))


def test_a_compressed_strip_above_the_chunk_limit_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "big_deflate_strip.tif"
    tifffile.imwrite(
        path, pixels(1, 1200, 1000, "uint16")[0], compression="zlib", rowsperstrip=1200
    )

    with virtualstac.limits.limits(chunk_bytes=1_000_000):
        with pytest.raises(LimitExceededError, match="each chunk decodes to 2,400,000 bytes"):
            parse(path)


def test_max_chunk_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_chunk_bytes must be positive"):
        TIFFParser(max_chunk_bytes=0)


def test_strips_of_a_prime_number_of_rows_stay_whole_rather_than_rows_of_one(
    tmp_path: Path,
) -> None:
    # 61 rows per strip have no divisor but 1: one chunk per strip, not 61 chunks of a row.
    path = write_gdal(tmp_path / "prime.tif", width=400, height=200, blockysize=61)

    array = band_data(path, max_chunk_bytes=20_000)

    assert array.chunks[1] == 61
    np.testing.assert_array_equal(array[...], rasterio_values(path))


def test_strips_of_a_prime_number_of_rows_above_the_chunk_limit_are_still_cut(
    tmp_path: Path,
) -> None:
    path = write_gdal(tmp_path / "prime.tif", width=400, height=200, blockysize=61)

    with virtualstac.limits.limits(chunk_bytes=20_000):
        array = band_data(path, max_chunk_bytes=20_000)
        values = array[...]

    assert array.chunks[1] == 1
    np.testing.assert_array_equal(values, rasterio_values(path))
