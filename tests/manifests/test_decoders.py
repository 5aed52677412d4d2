"""numcodecs' decompressors read chunks as numcodecs does, and stop at the chunk's bound.

A chunk of a few hundred bytes can hold a stream that decompresses to gigabytes, or a frame
header that asks for them. Read through a virtual store, such a chunk is refused with a
ChunkDecodeError naming it once a chunk's bound is out, having allocated about one chunk. The
sources are Zarr v2 stores written by zarr-python (whose chunks are the compressor's frames) and
HDF5 files whose chunks h5py writes as they are.
"""

from __future__ import annotations

import bz2
import lzma
import tracemalloc
from pathlib import Path
from typing import Any

import h5py
import imagecodecs
import numcodecs
import numpy as np
import pytest
import zarr

from virtualstac import ObjectStoreRegistry
from virtualstac.errors import ChunkDecodeError
from virtualstac.parsers.hdf import HDFParser
from virtualstac.parsers.zarr import ZarrParser

BOMB = 256 * 2**20
VALUES = (np.arange(128 * 128, dtype="u2") % 1000).reshape(128, 128)

COMPRESSORS: dict[str, Any] = {
    "bz2": numcodecs.BZ2(level=9),
    "gzip": numcodecs.GZip(level=9),
    "lzma": numcodecs.LZMA(),
    "zstd": numcodecs.Zstd(level=19),
    "blosc": numcodecs.Blosc(cname="zstd", clevel=9),
    "lz4": numcodecs.LZ4(),
}


def bomb(name: str) -> bytes:
    """A frame of the compressor ``name`` that decodes to 256 MiB of zeros, made without
    holding 256 MiB where the format allows it."""
    if name == "bz2":
        return bz2.compress(bytes(BOMB), 9)
    if name == "lzma":
        return lzma.compress(bytes(BOMB))
    if name == "zstd":  # concatenated frames decode as one stream
        return bytes(imagecodecs.zstd_encode(bytes(16 * 2**20), level=19)) * (BOMB // 2**24)
    return bytes(COMPRESSORS[name].encode(bytes(BOMB)))


def write_v2(path: Path, name: str) -> Path:
    array = zarr.create_array(
        str(path),
        shape=VALUES.shape,
        chunks=(64, 64),
        dtype="u2",
        compressors=COMPRESSORS[name],
        zarr_format=2,
    )
    array[...] = VALUES
    return path


def read_through_store(store: Any, name: str) -> np.ndarray[Any, Any]:
    return np.asarray(zarr.open_array(store, path=name, mode="r")[...])


def assert_refused_within_a_chunk(store: Any, name: str, chunk: str) -> None:
    array = zarr.open_array(store, path=name, mode="r")
    np.testing.assert_array_equal(array[64:, 64:], VALUES[64:, 64:])  # the honest chunks
    tracemalloc.start()
    try:
        with pytest.raises(ChunkDecodeError, match=chunk):
            array[:64, :64]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_chunks_of_each_compressor_read_as_zarr_python_reads_them(
    tmp_path: Path, name: str
) -> None:
    path = write_v2(tmp_path / f"{name}.zarr", name)

    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))

    # A store holding one array gives it the store's name.
    np.testing.assert_array_equal(read_through_store(store, name), VALUES)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_a_chunk_decompressing_far_beyond_its_size_is_refused_in_bounded_memory(
    tmp_path: Path, name: str
) -> None:
    path = write_v2(tmp_path / f"{name}.zarr", name)
    (path / "0.0").write_bytes(bomb(name))

    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))

    assert_refused_within_a_chunk(store, name, rf"chunk '{name}/c/0/0'.*{name}\.zarr/0\.0")


@pytest.mark.parametrize(
    ("name", "hdf5_filter", "options"),
    # Not blosc: once netCDF4 is imported, h5py loads its blosc plugin, which cannot write
    # here (blosc frames are refused by the Zarr v2 tests above, through the same codec).
    [("bz2", 307, (9,)), ("zstd", 32015, (19,))],
)
def test_hdf5_chunks_decompressing_far_beyond_their_size_are_refused(
    tmp_path: Path, name: str, hdf5_filter: int, options: tuple[int, ...]
) -> None:
    path = tmp_path / f"{name}.h5"
    with h5py.File(path, "w") as f:
        # The filters' plugins need not be here: h5py writes the compressed chunks as they are.
        dataset = f.create_dataset(
            "v",
            shape=VALUES.shape,
            chunks=(64, 64),
            dtype="u2",
            compression=hdf5_filter,
            compression_opts=options,
            allow_unknown_filter=True,
        )
        for row in (0, 64):
            for column in (0, 64):
                tile = np.ascontiguousarray(VALUES[row : row + 64, column : column + 64])
                frame = bomb(name) if row == column == 0 else COMPRESSORS[name].encode(tile)
                dataset.id.write_direct_chunk((row, column), bytes(frame))

    store = HDFParser(inline_threshold=0)(str(path), ObjectStoreRegistry.for_url(str(path)))

    assert_refused_within_a_chunk(store, "v", rf"chunk 'v/c/0/0'.*{name}\.h5")


def test_a_read_of_one_chunk_of_any_store_is_bounded_as_well(tmp_path: Path) -> None:
    # One chunk of a store that is not a ManifestStore (a published Icechunk store, a copy)
    # takes zarr's own path through the pipeline, with the same bounded decoders.
    path = tmp_path / "plain.zarr"
    array = zarr.create_array(
        str(path),
        shape=VALUES.shape,
        chunks=(64, 64),
        dtype="u2",
        compressors=zarr.codecs.numcodecs.BZ2(level=9),
        zarr_format=3,
    )
    array[...] = VALUES
    (path / "c" / "0" / "0").write_bytes(bomb("bz2"))

    reopened = zarr.open_array(str(path), mode="r")
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="bz2 stream decompresses to more than"):
            reopened[:64, :64]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20
    np.testing.assert_array_equal(reopened[64:, 64:], VALUES[64:, 64:])
