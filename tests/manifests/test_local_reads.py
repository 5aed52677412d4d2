"""Chunks of local files read with pread on the decoding threads (no obstore), a few nearby
chunks per read: the same values as h5py for every byte order, filter, edge chunk and missing
chunk, through ``xr.open_zarr`` with and without dask, and damaged files named."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr

from virtualstac import ManifestArray, ManifestGroup, ManifestStore, ObjectStoreRegistry
from virtualstac.errors import ChunkReadError
from virtualstac.manifests import decoding
from virtualstac.storage import local_ranges, objects
from virtualstac.storage.stats import counting_reads

type WriteHDF5 = Callable[..., Path]
type HDF5Array = Callable[..., ManifestArray]


@pytest.fixture
def no_obstore(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunk reads through obstore fail: a test passing with it read every chunk itself."""

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a local chunk went through the store")

    monkeypatch.setattr(objects, "get_ranges_async", refuse)


def dataset_of(array: ManifestArray, path: Path, **options: Any) -> xr.Dataset:
    store = ManifestStore(
        ManifestGroup(arrays={"data": array}), registry=ObjectStoreRegistry.for_url(str(path))
    )
    return xr.open_zarr(store, consolidated=False, mask_and_scale=False, **options)


def h5py_values(path: Path) -> np.ndarray[Any, Any]:
    with h5py.File(path) as f:
        values: np.ndarray[Any, Any] = f["data"][...]
    return values


@pytest.mark.parametrize(
    ("dtype", "compression", "shuffle"),
    [(">f8", None, False), ("<f4", None, False), (">i4", "gzip", True), ("<u2", "gzip", False)],
)
@pytest.mark.parametrize("chunks", [None, {}, {"t": 2, "y": 32, "x": -1}])
def test_values_equal_h5py_with_edge_chunks_and_every_byte_order(
    write_hdf5: WriteHDF5,
    hdf5_array: HDF5Array,
    no_obstore: None,
    dtype: str,
    compression: str | None,
    shuffle: bool,
    chunks: dict[str, int] | None,
) -> None:
    values = np.arange(3 * 40 * 30).reshape(3, 40, 30).astype(dtype)
    # 16 x 16 chunks of a 40 x 30 grid: the last row and column of chunks are partial.
    path = write_hdf5("v.h5", values, chunks=(2, 16, 16), compression=compression, shuffle=shuffle)

    read = dataset_of(hdf5_array(path, ["t", "y", "x"]), path, chunks=chunks)["data"].values

    expected = h5py_values(path)
    assert read.dtype == expected.dtype.newbyteorder("=")
    np.testing.assert_array_equal(read, expected)


def test_chunks_never_written_read_as_the_fill_value(
    tmp_path: Path, hdf5_array: HDF5Array, no_obstore: None
) -> None:
    path = tmp_path / "sparse.h5"
    with h5py.File(path, "w") as f:
        data = f.create_dataset(
            "data", shape=(4, 32, 32), dtype="<f4", chunks=(1, 16, 16), fillvalue=-9.5
        )
        data[1, :16, 16:] = 7.0  # one chunk of 16 written
        data[3] = 2.0  # four more

    read = dataset_of(hdf5_array(path, ["t", "y", "x"]), path, chunks=None)["data"].values

    np.testing.assert_array_equal(read, h5py_values(path))
    assert (read == -9.5).sum() == 11 * 16 * 16


def test_nearby_chunks_share_a_read(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array, no_obstore: None
) -> None:
    values = np.random.default_rng(1).normal(size=(4, 64, 64)).astype("<f4")
    path = write_hdf5("v.h5", values, chunks=(1, 16, 16), compression=None, shuffle=False)
    ds = dataset_of(hdf5_array(path, ["t", "y", "x"]), path, chunks=None)

    with counting_reads() as stats:
        read = ds["data"].values

    np.testing.assert_array_equal(read, values)
    # 64 chunks of 1 KiB written one after the other: a few reads, not one per chunk.
    assert 1 <= stats.requests <= 8
    assert stats.bytes >= values.nbytes


def test_a_file_truncated_inside_a_chunk_is_named(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array
) -> None:
    values = np.arange(2 * 32 * 32, dtype="<f4").reshape(2, 32, 32)
    path = write_hdf5("cut.h5", values, chunks=(1, 16, 16), compression=None, shuffle=False)
    ds = dataset_of(hdf5_array(path, ["t", "y", "x"]), path, chunks=None)
    with h5py.File(path) as f:
        last = f["data"].id.get_chunk_info_by_coord((1, 16, 16))
    with open(path, "r+b") as f:
        f.truncate(last.byte_offset + 100)

    message = r"chunk 'data/c/1/1/1' from 'file://.*cut\.h5' failed: .* only 100 of 1024 bytes"
    with pytest.raises(ChunkReadError, match=message):
        ds["data"].load()


@pytest.mark.parametrize(
    ("dtype", "into_place"),
    [("<f4", 2), (">f4", 0), ("<i2", 2)],  # big-endian bytes are swapped on the way: copied
)
def test_whole_uncompressed_chunks_of_contiguous_blocks_are_read_into_place(
    write_hdf5: WriteHDF5,
    hdf5_array: HDF5Array,
    no_obstore: None,
    monkeypatch: pytest.MonkeyPatch,
    dtype: str,
    into_place: int,
) -> None:
    read_into = local_ranges.read_local_range_into
    placed: list[str] = []

    def counting(
        item: local_ranges.LocalRange, destination: memoryview, files: dict[str, int] | None
    ) -> None:
        placed.append(item.key)
        read_into(item, destination, files)

    monkeypatch.setattr(decoding, "read_local_range_into", counting)
    values = np.arange(5 * 40 * 30).reshape(5, 40, 30).astype(dtype)
    # Chunks of two whole time steps: the last, partial chunk is copied, not read in place.
    path = write_hdf5("v.h5", values, chunks=(2, 40, 30), compression=None, shuffle=False)

    read = dataset_of(hdf5_array(path, ["t", "y", "x"]), path, chunks=None)["data"].values

    np.testing.assert_array_equal(read, h5py_values(path))
    assert len(placed) == into_place


def test_chunks_read_into_place_share_their_file_within_a_task(
    write_hdf5: WriteHDF5,
    hdf5_array: HDF5Array,
    no_obstore: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = np.arange(64 * 30, dtype="<f4").reshape(64, 30)
    # 64 chunks of one whole row each, each read straight into its place in the output.
    path = write_hdf5("rows.h5", values, chunks=(1, 30), compression=None, shuffle=False)
    opened: list[str] = []
    open_file = os.open

    def counting(name: str, *args: Any, **kwargs: Any) -> int:
        opened.append(name)
        return open_file(name, *args, **kwargs)

    ds = dataset_of(hdf5_array(path, ["t", "x"]), path, chunks=None)
    monkeypatch.setattr(os, "open", counting)
    read = ds["data"].values

    np.testing.assert_array_equal(read, values)
    # Once per task of the decoding pool (a few), not once per chunk.
    assert 1 <= opened.count(str(path)) <= 8


def test_a_truncated_chunk_read_into_place_is_named(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array
) -> None:
    values = np.arange(2 * 32 * 32, dtype="<f4").reshape(2, 32, 32)
    path = write_hdf5("cut.h5", values, chunks=(1, 32, 32), compression=None, shuffle=False)
    ds = dataset_of(hdf5_array(path, ["t", "y", "x"]), path, chunks=None)
    with h5py.File(path) as f:
        last = f["data"].id.get_chunk_info_by_coord((1, 0, 0))
    with open(path, "r+b") as f:
        f.truncate(last.byte_offset + 100)

    message = r"chunk 'data/c/1/0/0' from 'file://.*cut\.h5' failed: .* only 100 of 4096 bytes"
    with pytest.raises(ChunkReadError, match=message):
        ds["data"].load()


@pytest.mark.parametrize("dtype", ["M8[ns]", "m8[s]", ">M8[ms]"])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_dates_and_durations_are_read_into_place(
    tmp_path: Path, no_obstore: None, dtype: str, zarr_format: int
) -> None:
    # Uncompressed whole chunks are read straight into the output: numpy makes no buffer of
    # dates or durations, so their bytes go through a uint8 view.
    import zarr

    from virtualstac.parsers.zarr import ZarrParser

    path = tmp_path / "times.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    array = group.create_array("t", shape=(6, 4), chunks=(2, 4), dtype=dtype, compressors=None)
    array[:4] = np.arange(16).reshape(4, 4).astype(dtype)
    read = zarr.open_group(ZarrParser()(str(path)), mode="r")["t"][:]
    assert read.dtype == np.dtype(dtype).newbyteorder("=")  # Zarr v3 keeps byte order apart
    np.testing.assert_array_equal(read, array[:])
