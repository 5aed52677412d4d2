"""A tile that inflates far beyond its size is refused once its chunk's bound is out.

The TIFFs are written by tifffile from tiles compressed here: the first inflates to 256 MiB
where a 64 x 64 uint16 tile holds 8 KiB. Reading it must fail with a ChunkDecodeError naming
the chunk and the file, having allocated about one chunk, not the whole stream.
"""

from __future__ import annotations

import lzma
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import imagecodecs
import numpy as np
import pytest
import rasterio
import tifffile
import zarr

from virtualstac import ObjectStoreRegistry
from virtualstac.errors import ChunkDecodeError
from virtualstac.parsers.tiff import TIFFParser

BOMB = 256 * 2**20
MEBIBYTE = bytes(2**20)


def zstd_bomb() -> bytes:
    # Concatenated frames decode as one stream: 16 frames of 16 MiB of zeros.
    return imagecodecs.zstd_encode(bytes(16 * 2**20), level=19) * (BOMB // (16 * 2**20))


def zlib_bomb() -> bytes:
    deflater = zlib.compressobj(9)
    return b"".join(deflater.compress(MEBIBYTE) for _ in range(BOMB // 2**20)) + deflater.flush()


def lzma_bomb() -> bytes:
    compressor = lzma.LZMACompressor()
    return b"".join(compressor.compress(MEBIBYTE) for _ in range(BOMB // 2**20)) + (
        compressor.flush()
    )


def lzw_bomb() -> bytes:
    return bytes(imagecodecs.lzw_encode(bytes(BOMB // 4)))


BOMBS: dict[str, tuple[Callable[[], bytes], Callable[[bytes], bytes]]] = {
    "zstd": (zstd_bomb, lambda tile: bytes(imagecodecs.zstd_encode(tile))),
    "zlib": (zlib_bomb, zlib.compress),
    "lzw": (lzw_bomb, lambda tile: bytes(imagecodecs.lzw_encode(tile))),
    "lzma": (lzma_bomb, lzma.compress),
}


def write_bomb(path: Path, compression: str) -> Path:
    bomb, encode = BOMBS[compression]
    tiles = [bomb()] + [encode(bytes(64 * 64 * 2))] * 3
    tifffile.imwrite(
        path, iter(tiles), shape=(128, 128), dtype="uint16", tile=(64, 64), compression=compression
    )
    return path


@pytest.mark.parametrize("compression", sorted(BOMBS))
def test_a_tile_inflating_far_beyond_its_size_is_refused_in_bounded_memory(
    tmp_path: Path, compression: str
) -> None:
    path = write_bomb(tmp_path / f"{compression}_bomb.tif", compression)
    url = str(path)
    array = zarr.open_group(TIFFParser()(url, ObjectStoreRegistry.for_url(url)), mode="r")
    np.testing.assert_array_equal(array["band_data"][0, 64:, 64:], 0)  # the honest tiles read

    tracemalloc.start()
    try:
        with pytest.raises(ChunkDecodeError, match=rf"band_data/c/0/0/0.*{compression}_bomb\.tif"):
            array["band_data"][0, :64, :64]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


def test_a_jpeg_tile_claiming_a_huge_frame_is_refused_before_decoding(tmp_path: Path) -> None:
    # A GDAL JPEG tile whose frame header is rewritten to claim 16,384 x 16,384 pixels: libjpeg
    # would allocate those 256 MiB, where the 64 x 64 tile holds 4 KiB.
    path = tmp_path / "jpeg_bomb.tif"
    pixels = np.random.default_rng(0).integers(0, 255, (1, 128, 128), dtype=np.uint8)
    profile = dict(driver="GTiff", width=128, height=128, count=1, dtype="uint8")
    with rasterio.open(
        path, "w", **profile, compress="JPEG", tiled=True, blockxsize=64, blockysize=64
    ) as dst:
        dst.write(pixels)
    with tifffile.TiffFile(path) as tif:
        start = tif.pages.first.dataoffsets[0]
    data = bytearray(path.read_bytes())
    frame = data.index(b"\xff\xc0", start)
    data[frame + 5 : frame + 9] = (16384).to_bytes(2, "big") * 2
    path.write_bytes(bytes(data))
    url = str(path)
    array = zarr.open_group(TIFFParser()(url, ObjectStoreRegistry.for_url(url)), mode="r")
    with rasterio.open(url) as src:  # GDAL refuses the tile too, and reads the others
        honest = src.read(1, window=rasterio.windows.Window(64, 64, 64, 64))
    np.testing.assert_array_equal(array["band_data"][0, 64:, 64:], honest)

    tracemalloc.start()
    try:
        with pytest.raises(ChunkDecodeError, match=r"jpeg_bomb\.tif.*claims 268,435,456 samples"):
            array["band_data"][0, :64, :64]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


def fletcher32(data: bytes) -> int:
    """The checksum of a Lerc2 blob (over the bytes after the checksum field), as LERC's."""
    low = high = 0xFFFF
    words = [data[i] << 8 | data[i + 1] for i in range(0, len(data) - 1, 2)]
    if len(data) % 2:
        words.append(data[-1] << 8)
    for start in range(0, len(words), 359):
        for word in words[start : start + 359]:
            low += word
            high += low
        low, high = (low & 0xFFFF) + (low >> 16), (high & 0xFFFF) + (high >> 16)
    low, high = (low & 0xFFFF) + (low >> 16), (high & 0xFFFF) + (high >> 16)
    return high << 16 | low


def test_a_lerc_tile_claiming_a_huge_image_is_refused_before_decoding(tmp_path: Path) -> None:
    # A GDAL LERC tile whose header is rewritten (checksum too) to claim 8,192 x 8,192 float32
    # pixels: LERC would allocate those 256 MiB, where the 64 x 64 tile holds 16 KiB.
    path = tmp_path / "lerc_bomb.tif"
    values = np.random.default_rng(0).standard_normal((1, 128, 128)).astype("float32")
    profile = dict(driver="GTiff", width=128, height=128, count=1, dtype="float32")
    with rasterio.open(
        path, "w", **profile, compress="LERC", tiled=True, blockxsize=64, blockysize=64
    ) as dst:
        dst.write(values)
    with tifffile.TiffFile(path) as tif:
        start, length = tif.pages.first.dataoffsets[0], tif.pages.first.databytecounts[0]
    data = bytearray(path.read_bytes())
    blob = data[start : start + length]
    assert blob.startswith(b"Lerc2 ") and int.from_bytes(blob[6:10], "little") >= 3
    blob[14:22] = (8192).to_bytes(4, "little") * 2
    blob[10:14] = fletcher32(bytes(blob[14:])).to_bytes(4, "little")
    data[start : start + length] = blob
    path.write_bytes(bytes(data))
    url = str(path)
    array = zarr.open_group(TIFFParser()(url, ObjectStoreRegistry.for_url(url)), mode="r")
    np.testing.assert_array_equal(array["band_data"][0, 64:, 64:], values[0, 64:, 64:])

    tracemalloc.start()
    try:
        with pytest.raises(ChunkDecodeError, match=r"lerc_bomb\.tif.*claim 268,435,456 bytes"):
            array["band_data"][0, :64, :64]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20
