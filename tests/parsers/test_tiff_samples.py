"""Samples stored otherwise than as the type GDAL reads them as, read as GDAL reads them.

Samples of fewer bits than their type (GDAL's NBITS, bilevel images): libtiff hands GDAL an
MSB-first bit stream, each row starting on a byte, in either byte order; GDAL reads them
unscaled as the smallest unsigned type that holds them. Complex integers (CInt16, as in
Sentinel-1 SLC measurements): rasterio reads them as complex64.
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

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.parsers.tiff import TIFFParser, UnsupportedTIFFError

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

sys.path.insert(0, str(Path(__file__).parent))
from tiff_files import pixels, write_gdal, write_retagged  # noqa: E402


def read_virtual(path: Path, **options: Any) -> np.ndarray:
    """The pixels as zarr reads them from the file's references."""
    url = str(path)
    registry = ObjectStoreRegistry.for_url(url)
    virtual = open_virtual_dataset(url, registry=registry, **options)
    return zarr.open_array(virtual.virtual.to_store(registry), path="band_data", mode="r")[...]


def write_nbits(path: Path, bits: int, dtype: str, **options: Any) -> Path:
    """A GDAL raster of ``bits``-bit samples (NBITS), 301 pixels wide: rows end inside a byte."""
    data = pixels(options.get("count", 1), 200, 301, dtype) % (1 << bits)
    return write_gdal(path, dtype=dtype, nbits=bits, width=301, data=data.astype(dtype), **options)


NBITS_CASES: dict[str, tuple[int, str, dict[str, Any]]] = {
    "1_bit_strips_of_7_rows": (1, "uint8", dict(blockysize=7)),
    "1_bit_miniswhite": (1, "uint8", dict(photometric="MINISWHITE")),
    "2_bit_lzw": (2, "uint8", dict(compress="LZW")),
    "4_bit_rgb_zstd": (4, "uint8", dict(count=3, compress="ZSTD")),
    "4_bit_band_interleaved_packbits": (
        4,
        "uint8",
        dict(count=3, interleave="band", compress="PACKBITS"),
    ),
    "12_bit_big_endian_tiles": (
        12,
        "uint16",
        dict(endianness="BIG", tiled=True, blockxsize=48, blockysize=32, compress="DEFLATE"),
    ),
    "12_bit_strips": (12, "uint16", dict(blockysize=9)),
    "20_bit_lzma": (20, "uint32", dict(count=2, compress="LZMA")),
    "7_bit_sparse_nodata": (
        7,
        "uint8",
        dict(nodata=100, sparse_ok=True, tiled=True, window=(0, 0, 32, 32)),
    ),
}


@pytest.mark.parametrize("name", sorted(NBITS_CASES))
def test_gdal_nbits_samples_read_as_rasterio_reads_them(tmp_path: Path, name: str) -> None:
    bits, dtype, options = NBITS_CASES[name]
    path = write_nbits(tmp_path / f"{name}.tif", bits, dtype, **options)
    with rasterio.open(path) as src:
        expected = src.read()
    values = read_virtual(path)
    assert values.dtype == expected.dtype
    np.testing.assert_array_equal(values, expected)


def test_overviews_of_1_bit_samples_read_as_rasterio_reads_them(tmp_path: Path) -> None:
    path = write_nbits(
        tmp_path / "mask.tif", 1, "uint8", tiled=True, compress="DEFLATE", overviews=(2, 4)
    )
    for level in (0, 1):
        with rasterio.open(path, overview_level=level) as src:
            expected = src.read()
        np.testing.assert_array_equal(read_virtual(path, overview_level=level), expected)


def test_bilevel_images_read_as_their_zeros_and_ones(tmp_path: Path) -> None:
    path = tmp_path / "bilevel.tif"
    mask = pixels(1, 50, 71, "uint8")[0] > 128
    tifffile.imwrite(path, mask, tile=(32, 32), compression="zlib")
    with xr.open_dataset(path, engine="virtualstac") as ds:
        np.testing.assert_array_equal(ds["band_data"].values, mask[None].astype("uint8"))


def test_a_single_1_bit_strip_is_cut_into_blocks_of_whole_rows(tmp_path: Path) -> None:
    # 9001 pixels a row: each row ends on a partly used byte, and starts a new one.
    path = tmp_path / "strip.tif"
    data = pixels(1, 4000, 9001, "uint8") > 128
    tifffile.imwrite(path, data[0])
    store = TIFFParser(max_chunk_bytes=1_000_000)(str(path), ObjectStoreRegistry.for_url(str(path)))
    array = zarr.open_array(store, path="band_data", mode="r")
    assert array.chunks == (1, 100, 9001)  # decoded bytes within the target, as for bytes
    np.testing.assert_array_equal(array[...], data.astype("uint8"))


@pytest.mark.parametrize("writer", ["gdal", "tifffile"])
def test_24_bit_samples_of_little_endian_files_read_as_uint32(tmp_path: Path, writer: str) -> None:
    # GDAL reads them as UInt32: an MSB-first bit stream, like other packed samples.
    path = tmp_path / "u24.tif"
    if writer == "gdal":
        write_nbits(path, 24, "uint32", count=2, compress="DEFLATE")
    else:
        data = pixels(1, 64, 80, "uint32")[0] % (1 << 24)
        tifffile.imwrite(path, data, bitspersample=24)
    with rasterio.open(path) as src:
        assert src.dtypes[0] == "uint32"
        expected = src.read()
    np.testing.assert_array_equal(read_virtual(path), expected)


def test_24_bit_samples_of_big_endian_files_are_refused(tmp_path: Path) -> None:
    # libtiff reverses each sample's three bytes before GDAL unpacks them.
    path = write_nbits(tmp_path / "u24be.tif", 24, "uint32", endianness="BIG")
    with pytest.raises(UnsupportedTIFFError, match=r"u24be\.tif .*24-bit samples of a big-endian"):
        read_virtual(path)


def test_signed_packed_samples_are_refused(tmp_path: Path) -> None:
    data = np.zeros((8, 8), "uint16")
    options = dict(bitspersample=12)
    path = write_retagged(tmp_path / "i12.tif", data, 339, 2, **options)  # SampleFormat INT
    with pytest.raises(UnsupportedTIFFError, match=r"i12\.tif .*12-bit samples of SampleFormat 2"):
        read_virtual(path)


def test_packed_samples_of_lerc_are_refused(tmp_path: Path) -> None:
    # GDAL writes it, and reads it back as zeros.
    path = write_nbits(tmp_path / "lerc12.tif", 12, "uint16", compress="LERC")
    with pytest.raises(UnsupportedTIFFError, match="12-bit samples of compression 34887"):
        read_virtual(path)


# -- complex integers ---------------------------------------------------------------------


def complex_ints(count: int, bits: int = 16) -> np.ndarray:
    """Random complex integers spanning most of the int16 (or a 2**30) range."""
    rng = np.random.default_rng(0)
    span = 30000 if bits == 16 else 2**30
    parts = rng.integers(-span, span, (2, count, 200, 300))
    return parts[0] + 1j * parts[1]


CINT16_CASES: dict[str, dict[str, Any]] = {
    "strips": dict(blockysize=7),
    "big_endian_tiles_deflate": dict(endianness="BIG", tiled=True, compress="DEFLATE"),
    "band_interleaved_zstd": dict(interleave="band", compress="ZSTD", blockysize=16),
    "sparse_nodata": dict(nodata=0, sparse_ok=True, tiled=True, window=(0, 0, 64, 64)),
}


@pytest.mark.parametrize("name", sorted(CINT16_CASES))
def test_cint16_reads_as_rasterio_reads_it(tmp_path: Path, name: str) -> None:
    data = complex_ints(2).astype("complex64")
    path = write_gdal(
        tmp_path / f"{name}.tif", count=2, dtype="complex_int16", data=data, **CINT16_CASES[name]
    )
    with rasterio.open(path) as src:
        assert src.dtypes == ("complex_int16",) * 2
        expected = src.read()
    values = read_virtual(path)
    assert values.dtype == expected.dtype == np.complex64
    np.testing.assert_array_equal(values, expected)


def test_cint32_reads_exactly_as_complex128(tmp_path: Path) -> None:
    # GDAL writes CInt32 from its own API only: int64 samples retagged SampleFormat 5.
    data = complex_ints(1, bits=32)[0]
    pairs = np.stack([data.real, data.imag], axis=-1).astype("<i4")
    path = tmp_path / "cint32.tif"
    tifffile.imwrite(path, pairs.view("<i8")[..., 0], compression="zlib", rowsperstrip=16)
    sample_format = b"\x53\x01\x03\x00\x01\x00\x00\x00"
    path.write_bytes(path.read_bytes().replace(sample_format + b"\x02", sample_format + b"\x05"))
    with rasterio.open(path) as src:
        assert src.dtypes == ("complex64",)  # rasterio's name for CInt32: rounds beyond 2**24
        np.testing.assert_allclose(src.read(1), data, rtol=1e-7)
    values = read_virtual(path)
    assert values.dtype == np.complex128
    np.testing.assert_array_equal(values[0], data)


def test_cint16_reads_through_the_xarray_engine(tmp_path: Path) -> None:
    data = complex_ints(1).astype("complex64")
    path = write_gdal(tmp_path / "slc.tif", dtype="complex_int16", data=data, compress="LZW")
    with xr.open_dataset(path, engine="virtualstac") as ds:
        np.testing.assert_array_equal(ds["band_data"].values, data)


def test_differenced_complex_integers_are_refused(tmp_path: Path) -> None:
    # libtiff differences a CInt16 sample as one 32-bit word, not as two integers.
    data = complex_ints(1).astype("complex64")
    path = write_gdal(
        tmp_path / "cint16_pred.tif",
        dtype="complex_int16",
        data=data,
        compress="DEFLATE",
        predictor=2,
    )
    with pytest.raises(
        UnsupportedTIFFError,
        match=r"cint16_pred\.tif .*predictor 2\) of complex integer samples \(32-bit\)",
    ):
        read_virtual(path)
