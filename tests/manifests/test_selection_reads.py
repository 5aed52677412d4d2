"""Basic selections of virtual arrays read past zarr's per-chunk walk: h5py's values for every
selection, zarr's own read for what the path does not cover, zarr's missing-chunk behaviour,
and damaged chunks named."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr
import zarr.core.array
from zarr.errors import ChunkNotFoundError

from virtualstac import ManifestArray, ManifestGroup, ManifestStore, ObjectStoreRegistry
from virtualstac.errors import ChunkDecodeError, ChunkReadError
from virtualstac.manifests import selection_reads
from virtualstac.manifests.selection_reads import (
    VirtualChunksArray,
    read_basic_selection,
    reads_virtual_chunks,
)

type WriteHDF5 = Callable[..., Path]
type HDF5Array = Callable[..., ManifestArray]


def virtual(array: ManifestArray, path: Path) -> VirtualChunksArray:
    store = ManifestStore(
        ManifestGroup(arrays={"data": array}), registry=ObjectStoreRegistry.for_url(str(path))
    )
    return VirtualChunksArray.of(zarr.open_array(store, path="data", mode="r"))


def h5py_read(path: Path, selection: Any) -> Any:
    with h5py.File(path) as f:
        return f["data"][selection]


@pytest.fixture
def sample(write_hdf5: WriteHDF5) -> Path:
    # 16 x 16 chunks of a 40 x 30 grid: the last row and column of chunks are partial.
    values = np.random.default_rng(5).normal(size=(5, 40, 30)).astype("<f4")
    return write_hdf5("v.h5", values, chunks=(2, 16, 16), compression=None, shuffle=False)


@pytest.mark.parametrize(
    "selection",
    [
        (...,),
        (slice(None),),
        (1,),
        (-1, slice(3, 35), slice(None, -2)),
        (slice(1, 4), 17, slice(None)),
        (slice(None), slice(None), 29),
        (Ellipsis, slice(15, 17)),
        (np.int64(3), slice(0, 16), slice(16, 30)),
    ],
)
def test_basic_selections_read_h5py_values_without_zarrs_walk(
    sample: Path, hdf5_array: HDF5Array, no_zarr_walk: None, selection: Any
) -> None:
    array = virtual(hdf5_array(sample, ["t", "y", "x"]), sample)

    read = array[selection]

    np.testing.assert_array_equal(read, h5py_read(sample, selection))


@pytest.mark.parametrize(
    "selection",
    [
        (slice(None, None, 2),),  # a step: zarr's
        (1, 2, 3),  # one value
        (slice(2, 2),),  # nothing
        ([0, 3],),  # orthogonal
        (slice(None), np.array([1, 20, 39])),  # orthogonal, along another axis
    ],
)
def test_other_selections_are_left_to_zarr(
    sample: Path, hdf5_array: HDF5Array, selection: Any
) -> None:
    array = virtual(hdf5_array(sample, ["t", "y", "x"]), sample)

    assert read_basic_selection(array, selection) is None
    np.testing.assert_array_equal(array[selection], h5py_read(sample, selection))


def test_compressed_chunks_with_missing_ones_read_the_fill_value(
    tmp_path: Path, hdf5_array: HDF5Array, no_zarr_walk: None
) -> None:
    path = tmp_path / "sparse.h5"
    with h5py.File(path, "w") as f:
        data = f.create_dataset(
            "data",
            shape=(4, 32, 32),
            dtype=">i4",
            chunks=(1, 16, 16),
            fillvalue=-7,
            compression="gzip",
            shuffle=True,
        )
        data[1, :16, 16:] = 3
        data[3] = 2

    read = virtual(hdf5_array(path, ["t", "y", "x"]), path)[:, 4:30]

    np.testing.assert_array_equal(read, h5py_read(path, (slice(None), slice(4, 30))))
    assert read.dtype == np.dtype("=i4")


def test_missing_chunks_raise_as_zarr_does_when_it_is_told_to(
    tmp_path: Path, hdf5_array: HDF5Array
) -> None:
    path = tmp_path / "sparse.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("data", shape=(2, 32), dtype="<f8", chunks=(1, 16), fillvalue=0.5)[0] = 1
    array = virtual(hdf5_array(path, ["t", "x"]), path)

    with zarr.config.set({"array.read_missing_chunks": False}):
        strict = VirtualChunksArray.of(zarr.open_array(array.store, path="data", mode="r"))
        with pytest.raises(ChunkNotFoundError) as ours:
            read_basic_selection(strict, (slice(None),))
        with pytest.raises(ChunkNotFoundError) as zarrs:
            zarr.open_array(array.store, path="data", mode="r")[:]

    assert str(ours.value) == str(zarrs.value)
    assert "chunk 'c/1/0'" in str(ours.value) and "chunk 'c/1/1'" in str(ours.value)


def damaged(write_hdf5: WriteHDF5) -> tuple[Path, np.ndarray[Any, Any]]:
    """A file of zlib chunks whose chunk (2, 1, 0) is overwritten in its middle."""
    values = np.arange(4 * 32 * 32, dtype="<f4").reshape(4, 32, 32)
    path = write_hdf5("damaged.h5", values, chunks=(1, 16, 16))
    with h5py.File(path) as f:
        info = f["data"].id.get_chunk_info_by_coord((2, 16, 0))
    with path.open("r+b") as f:
        f.seek(info.byte_offset + 2)
        f.write(b"\xff" * 64)
    return path, values


def test_a_damaged_chunk_is_named(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array, no_zarr_walk: None
) -> None:
    path, _ = damaged(write_hdf5)
    array = virtual(hdf5_array(path, ["t", "y", "x"]), path)

    with pytest.raises(ChunkDecodeError, match=r"c/2/1/0.*damaged\.h5"):
        array[:]


def test_a_truncated_file_is_named(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array, no_zarr_walk: None
) -> None:
    values = np.arange(4 * 32 * 32, dtype="<f4").reshape(4, 32, 32)
    path = write_hdf5("cut.h5", values, chunks=(1, 16, 16), compression=None, shuffle=False)
    array = virtual(hdf5_array(path, ["t", "y", "x"]), path)
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size - 2000)

    with pytest.raises(ChunkReadError, match=r"cut\.h5"):
        array[:]


def test_arrays_of_other_stores_are_zarrs(tmp_path: Path) -> None:
    array = zarr.create_array(zarr.storage.MemoryStore(), shape=(4, 4), chunks=(2, 2), dtype="i2")
    array[:] = np.arange(16).reshape(4, 4)

    assert not reads_virtual_chunks(array.store)
    assert read_basic_selection(array, (slice(None),)) is None
    np.testing.assert_array_equal(VirtualChunksArray.of(array)[1:3], array[1:3])


def test_a_read_of_many_chunks_hands_them_to_the_pool_a_batch_at_a_time(
    sample: Path, hdf5_array: HDF5Array, no_zarr_walk: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 3 x 3 x 2 = 18 chunks, in batches of at most 4: what a read holds per chunk is bounded.
    monkeypatch.setattr(selection_reads, "READ_BATCH", 4)
    handed: list[int] = []
    original = selection_reads.read_concurrently

    async def counting(batch: Any, *args: Any) -> Any:
        handed.append(len(batch))
        return await original(batch, *args)

    monkeypatch.setattr(selection_reads, "read_concurrently", counting)
    array = virtual(hdf5_array(sample, ["t", "y", "x"]), sample)

    np.testing.assert_array_equal(array[:], h5py_read(sample, ...))
    assert handed == [4, 4, 4, 4, 2]


def test_missing_chunks_of_every_batch_are_named(
    tmp_path: Path, hdf5_array: HDF5Array, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(selection_reads, "READ_BATCH", 3)
    path = tmp_path / "sparse.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("data", shape=(8,), dtype="<i2", chunks=(1,), fillvalue=-1)[2:6] = 5
    array = virtual(hdf5_array(path, ["x"]), path)

    with zarr.config.set({"array.read_missing_chunks": False}):
        strict = VirtualChunksArray.of(zarr.open_array(array.store, path="data", mode="r"))
        with pytest.raises(ChunkNotFoundError, match=r"^4 chunk\(s\) not found") as raised:
            strict[:]

    named = [f"chunk 'c/{i}' (grid position ({i},))" for i in (0, 1, 6, 7)]
    assert all(chunk in str(raised.value) for chunk in named)


@pytest.fixture
def no_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads through the decoding pool fail: a read passing with it ran in the calling thread."""

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the read went to the pool")

    monkeypatch.setattr(selection_reads, "read_concurrently", refuse)


def test_a_read_of_one_local_chunk_runs_in_the_calling_thread(
    sample: Path, hdf5_array: HDF5Array, no_zarr_walk: None, no_pool: None
) -> None:
    array = virtual(hdf5_array(sample, ["t", "y", "x"]), sample)

    # What a dask task of the file's own chunks asks for: one chunk, or the edge of one.
    for selection in [(slice(0, 2), slice(0, 16), slice(0, 16)), (4, slice(32, 40), 20)]:
        np.testing.assert_array_equal(array[selection], h5py_read(sample, selection))


def test_a_damaged_chunk_read_alone_is_named(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array, no_zarr_walk: None, no_pool: None
) -> None:
    path, values = damaged(write_hdf5)
    array = virtual(hdf5_array(path, ["t", "y", "x"]), path)

    np.testing.assert_array_equal(array[2, :16, :16], values[2, :16, :16])
    with pytest.raises(ChunkDecodeError, match=r"c/2/1/0.*damaged\.h5"):
        array[2, 16:, :16]
