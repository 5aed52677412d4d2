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
