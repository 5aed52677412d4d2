"""Strip byte counts as GDAL (libtiff) reads them.

libtiff reads an uncompressed strip as the bytes of its rows from its offset, whatever its
StripByteCounts says, and estimates the length of an image's only strip when its byte count
is 0 (old writers' "unknown"). Byte counts of 0 among several strips are strips never written.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import tifffile
import zarr

from virtualstac import ObjectStoreRegistry
from virtualstac.errors import CorruptFileError
from virtualstac.parsers.tiff import TIFFParser, UnsupportedTIFFError

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

sys.path.insert(0, str(Path(__file__).parent))
from tiff_files import pixels  # noqa: E402

GRAY = pixels(1, 100, 70, "uint16")[0]
RGB = np.moveaxis(pixels(3, 100, 70, "uint8"), 0, -1)


def read(path: Path, **options: Any) -> np.ndarray:
    url = str(path)
    group = zarr.open_group(TIFFParser(**options)(url, ObjectStoreRegistry.for_url(url)), mode="r")
    return np.asarray(group["band_data"][...])


def rasterio_values(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        return src.read()


def with_byte_counts(path: Path, counts: list[int]) -> Path:
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages.first.tags["StripByteCounts"].overwrite(counts)
    return path


def without_byte_counts(path: Path, tag: str = "StripByteCounts") -> Path:
    """Renumber the byte counts' entry as a private tag: the tag is gone."""
    with tifffile.TiffFile(path) as tif:
        assert tif.byteorder == "<" and not tif.is_bigtiff
        entry = tif.pages.first.tags[tag].offset
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, entry, 65001)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("image", [GRAY, RGB], ids=["gray", "rgb"])
def test_an_only_strip_of_byte_count_0_reads_as_libtiff_estimates_it(
    tmp_path: Path, image: np.ndarray
) -> None:
    path = tmp_path / "unknown_count.tif"
    tifffile.imwrite(path, image, photometric="rgb" if image.ndim == 3 else None)
    with_byte_counts(path, [0])

    band_first = image[np.newaxis] if image.ndim == 2 else np.moveaxis(image, -1, 0)

    np.testing.assert_array_equal(rasterio_values(path), band_first)
    np.testing.assert_array_equal(read(path), band_first)
    np.testing.assert_array_equal(read(path, max_chunk_bytes=2_000), band_first)


@pytest.mark.parametrize("counts", [[1_000], [10**6], [14_010]], ids=["short", "past_end", "long"])
def test_uncompressed_strips_read_their_rows_whatever_their_byte_count(
    tmp_path: Path, counts: list[int]
) -> None:
    path = tmp_path / "wrong_count.tif"
    tifffile.imwrite(path, GRAY, extratags=[(65000, "B", 100, bytes(100), True)])
    with_byte_counts(path, counts)

    np.testing.assert_array_equal(rasterio_values(path)[0], GRAY)
    np.testing.assert_array_equal(read(path)[0], GRAY)


def test_wrong_byte_counts_of_several_strips_are_ignored_as_libtiff_ignores_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wrong_counts.tif"
    tifffile.imwrite(path, GRAY, rowsperstrip=10)
    with_byte_counts(path, [1400, 1000, 1400, 1400, 2000, 1400, 1400, 1400, 1400, 1])

    np.testing.assert_array_equal(rasterio_values(path)[0], GRAY)
    np.testing.assert_array_equal(read(path)[0], GRAY)
    np.testing.assert_array_equal(read(path, max_chunk_bytes=700)[0], GRAY)


def test_strips_of_byte_count_0_among_others_are_unwritten(tmp_path: Path) -> None:
    path = tmp_path / "unwritten.tif"
    tifffile.imwrite(path, GRAY, rowsperstrip=10)
    with_byte_counts(path, [1400] * 3 + [0] + [1400] * 6)

    expected = rasterio_values(path)

    assert (expected[0, 30:40] == 0).all() and (expected[0, 40:] == GRAY[40:]).all()
    np.testing.assert_array_equal(read(path), expected)


def test_an_uncompressed_strip_past_the_end_of_the_file_is_still_damage(tmp_path: Path) -> None:
    path = tmp_path / "cut.tif"
    tifffile.imwrite(path, GRAY)
    path.write_bytes(path.read_bytes()[:-10])

    with pytest.raises(CorruptFileError, match="past the end of the file"):
        read(path)


@pytest.mark.parametrize("compression", ["zlib", "lzw", "packbits"])
def test_an_only_compressed_strip_of_byte_count_0_is_refused(
    tmp_path: Path, compression: str
) -> None:
    # GDAL estimates the strip to run to the end of the file; a compressed stream's end
    # cannot be known without decoding it.
    path = tmp_path / "unknown_count.tif"
    tifffile.imwrite(path, GRAY, compression=compression, rowsperstrip=100)
    with_byte_counts(path, [0])
    np.testing.assert_array_equal(rasterio_values(path)[0], GRAY)

    with pytest.raises(UnsupportedTIFFError, match="only strip has a byte count of 0"):
        read(path)


def test_compressed_strips_without_byte_counts_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "no_counts.tif"
    tifffile.imwrite(path, GRAY, compression="zlib", rowsperstrip=100)
    without_byte_counts(path)

    with pytest.raises(UnsupportedTIFFError, match="no StripByteCounts or TileByteCounts tag"):
        read(path)


def test_an_only_uncompressed_strip_without_byte_counts_reads_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "no_counts.tif"
    tifffile.imwrite(path, GRAY)
    without_byte_counts(path)

    np.testing.assert_array_equal(rasterio_values(path)[0], GRAY)
    np.testing.assert_array_equal(read(path)[0], GRAY)


def test_several_strips_without_byte_counts_are_refused(tmp_path: Path) -> None:
    # GDAL refuses them too (a required tag missing), and tifffile reads only the first.
    path = tmp_path / "no_counts.tif"
    tifffile.imwrite(path, GRAY, rowsperstrip=30)
    without_byte_counts(path)

    with pytest.raises(UnsupportedTIFFError, match="no StripByteCounts"):
        read(path)


def test_band_interleaved_strips_without_byte_counts_read_their_rows(tmp_path: Path) -> None:
    # One strip per band: libtiff estimates their byte counts.
    path = tmp_path / "no_counts_planar.tif"
    planes = np.moveaxis(RGB, -1, 0)
    tifffile.imwrite(path, planes, photometric="rgb", planarconfig="separate")
    without_byte_counts(path)

    np.testing.assert_array_equal(rasterio_values(path), planes)
    np.testing.assert_array_equal(read(path), planes)


@pytest.mark.parametrize("planar", [False, True], ids=["one_tile", "one_tile_per_band"])
def test_uncompressed_tiles_without_byte_counts_read_as_libtiff_estimates_them(
    tmp_path: Path, planar: bool
) -> None:
    path = tmp_path / "no_tile_counts.tif"
    image = np.moveaxis(RGB[:60, :50], -1, 0) if planar else GRAY[:60, :50]
    options = dict(photometric="rgb", planarconfig="separate") if planar else {}
    tifffile.imwrite(path, image, tile=(64, 64), **options)
    without_byte_counts(path, "TileByteCounts")
    band_first = image if planar else image[np.newaxis]

    np.testing.assert_array_equal(rasterio_values(path), band_first)
    np.testing.assert_array_equal(read(path), band_first)
