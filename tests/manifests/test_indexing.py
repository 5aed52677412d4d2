"""Indexing ManifestArrays without reading: whole chunks or shards, and rows of raw chunks.

Every selection is read back through a ManifestStore and compared with what numpy selects from
the values the file's own library (h5py, zarr, netCDF4) reads.
"""

from collections.abc import Callable, Mapping
from pathlib import Path

import h5py
import netCDF4
import numpy as np
import pytest
import scipy.io
import xarray as xr
import zarr
from zarr.codecs import TransposeCodec

from virtualstac import ManifestArray, ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import UnsupportedIndexingError

ReadVirtual = Callable[[Mapping[str, ManifestArray]], xr.Dataset]


def zarr_array(path: Path) -> ManifestArray:
    """A ManifestArray over a zarr v3 array on disk: one whole-object reference per chunk file."""
    array = zarr.open_array(path, mode="r")
    metadata = array.metadata.to_dict()
    entries = {}
    for chunk_file in (path / "c").rglob("*"):
        if chunk_file.is_file():
            key = ".".join(chunk_file.relative_to(path / "c").parts)
            entries[key] = {
                "path": chunk_file.as_uri(),
                "offset": 0,
                "length": chunk_file.stat().st_size,
            }
    return ManifestArray(metadata, entries)


# -- rows of uncompressed chunks ---------------------------------------------------------------


@pytest.fixture
def raw_rows(write_hdf5: Callable[..., Path]) -> Path:
    """An uncompressed (12, 10) float64 HDF5 dataset in (4, 5) chunks."""
    values = np.arange(120, dtype="<f8").reshape(12, 10)
    return write_hdf5("raw.h5", values, chunks=(4, 5), compression=None, shuffle=False)


@pytest.mark.parametrize(
    "key",
    [
        (slice(1, 3), slice(None)),  # inside the first chunk
        (slice(5, 8), slice(None)),  # inside the second
        (slice(9, 10), slice(5, 10)),  # with a chunk-aligned slice on the other axis
        (slice(10, 12), ...),  # up to the array end
    ],
)
def test_rows_inside_a_raw_chunk_become_narrower_references(
    raw_rows: Path,
    hdf5_array: Callable[..., ManifestArray],
    read_virtual: ReadVirtual,
    key: tuple[object, ...],
) -> None:
    marr = hdf5_array(raw_rows, dims=["y", "x"])

    part = marr[key]

    rows = key[0]
    assert isinstance(rows, slice)
    assert part.chunks[0] == rows.stop - rows.start
    assert part.manifest.shape_chunk_grid[0] == 1
    row_bytes = 5 * 8
    columns = key[1].start or 0 if isinstance(key[1], slice) else 0
    first = marr.manifest.get_entry((rows.start // 4, columns // 5))
    assert first is not None
    assert part.manifest.offsets.flat[0] == first["offset"] + (rows.start % 4) * row_bytes
    assert part.manifest.lengths.flat[0] == (rows.stop - rows.start) * row_bytes
    with h5py.File(raw_rows) as f:
        np.testing.assert_array_equal(read_virtual({"v": part})["v"].values, f["data"][key])


def test_rows_of_a_contiguous_dataset_are_a_byte_range_of_it(
    write_hdf5: Callable[..., Path],
    hdf5_array: Callable[..., ManifestArray],
    read_virtual: ReadVirtual,
) -> None:
    values = np.arange(60, dtype=">i4").reshape(6, 10)
    path = write_hdf5("big_endian.h5", values, chunks=(6, 10), compression=None, shuffle=False)
    marr = hdf5_array(path, dims=["y", "x"])

    middle = marr[2:5, :]

    np.testing.assert_array_equal(read_virtual({"v": middle})["v"].values, values[2:5])


def test_a_netcdf3_variable_can_be_selected_by_rows_through_xarray(tmp_path: Path) -> None:
    path = tmp_path / "classic.nc"
    with scipy.io.netcdf_file(path, "w", version=2) as f:
        f.createDimension("y", 20)
        f.createDimension("x", 7)
        f.createVariable("v", "f4", ("y", "x"))[:] = np.arange(140, dtype="f4").reshape(20, 7)
    vds = open_virtual_dataset(str(path), loadable_variables=[])

    selected = vds.isel(y=slice(4, 11))

    registry = ObjectStoreRegistry.for_url(str(path))
    read = xr.open_zarr(selected.virtual.to_store(registry), consolidated=False)["v"].values
    with netCDF4.Dataset(path) as reference:
        np.testing.assert_array_equal(read, reference["v"][4:11, :])


def test_columns_of_a_transposed_raw_chunk_are_its_rows(
    tmp_path: Path, read_virtual: ReadVirtual
) -> None:
    """With a transpose codec (F order) the stored rows are the array's last axis."""
    values = np.arange(48, dtype="<u2").reshape(6, 8)
    path = tmp_path / "f_order.zarr"
    array = zarr.create_array(
        path,
        shape=(6, 8),
        chunks=(3, 4),
        dtype="<u2",
        filters=[TransposeCodec(order=(1, 0))],
        compressors=None,
        dimension_names=("y", "x"),
    )
    array[:] = values
    marr = zarr_array(path)

    part = marr[:, 5:7]

    assert part.shape == (6, 2)
    np.testing.assert_array_equal(read_virtual({"v": part})["v"].values, values[:, 5:7])
    with pytest.raises(UnsupportedIndexingError, match="only rows along axis 1"):
        marr[1:2, :]


def test_inlined_raw_chunks_are_cut_in_memory(
    tmp_path: Path, hdf5_array: Callable[..., ManifestArray], read_virtual: ReadVirtual
) -> None:
    values = np.arange(8, dtype="<i2").reshape(4, 2)
    with h5py.File(tmp_path / "small.h5", "w") as f:
        f.create_dataset("data", data=values, chunks=(4, 2))
    marr = hdf5_array(tmp_path / "small.h5", dims=["y", "x"])
    entry = marr.manifest.get_entry((0, 0))
    assert entry is not None
    with open(tmp_path / "small.h5", "rb") as f:
        f.seek(entry["offset"])
        data = f.read(entry["length"])
    inlined = ManifestArray(
        marr.metadata, {"0.0": {"path": "", "offset": 0, "length": 16, "data": data}}
    )

    part = inlined[1:3, :]

    assert part.manifest.get_entry((0, 0)) == {
        "path": "__inlined__",
        "offset": 0,
        "length": 8,
        "data": data[4:12],
    }
    np.testing.assert_array_equal(read_virtual({"v": part})["v"].values, values[1:3])


def test_an_empty_slice_anywhere_selects_nothing(
    raw_rows: Path, hdf5_array: Callable[..., ManifestArray], read_virtual: ReadVirtual
) -> None:
    marr = hdf5_array(raw_rows, dims=["y", "x"])

    empty = marr[3:3, 1:1]

    assert empty.shape == (0, 0)
    assert read_virtual({"v": empty})["v"].shape == (0, 0)


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ((slice(3, 6), slice(None)), "the slice crosses a chunk boundary"),
        ((slice(None), slice(1, 3)), "only rows along axis 0, the slowest-varying axis"),
        ((1, slice(None)), "an integer picks one element of a chunk of 4"),
        ((slice(0, 3, 2), slice(None)), "a step of 2 picks elements of chunks"),
    ],
)
def test_other_cuts_through_raw_chunks_are_refused(
    raw_rows: Path, hdf5_array: Callable[..., ManifestArray], key: object, reason: str
) -> None:
    marr = hdf5_array(raw_rows, dims=["y", "x"])

    with pytest.raises(UnsupportedIndexingError, match=f"split individual chunks.*{reason}"):
        marr[key]


def test_rows_of_compressed_chunks_are_refused(
    write_hdf5: Callable[..., Path], hdf5_array: Callable[..., ManifestArray]
) -> None:
    path = write_hdf5("zipped.h5", np.zeros((8, 4), dtype="<f4"), chunks=(4, 4))
    marr = hdf5_array(path, dims=["y", "x"])

    with pytest.raises(UnsupportedIndexingError, match=r"chunks are encoded .* only be whole"):
        marr[1:3, :]


def test_rows_of_chunks_of_unexpected_length_are_refused(
    raw_rows: Path, hdf5_array: Callable[..., ManifestArray]
) -> None:
    marr = hdf5_array(raw_rows, dims=["y", "x"])
    short = ManifestArray(
        marr.metadata,
        {"0.0": {"path": raw_rows.as_uri(), "offset": 0, "length": 100}},
    )

    with pytest.raises(UnsupportedIndexingError, match="not the 160 bytes of a raw chunk"):
        short[1:3, :]


# -- shards ------------------------------------------------------------------------------------


@pytest.fixture
def sharded(tmp_path: Path) -> tuple[ManifestArray, np.ndarray]:
    """A zarr array of (2, 8, 12) int32 in shards of (1, 4, 6) holding chunks of (1, 2, 3)."""
    values = np.arange(192, dtype="<i4").reshape(2, 8, 12)
    array = zarr.create_array(
        tmp_path / "sharded.zarr",
        shape=values.shape,
        chunks=(1, 2, 3),
        shards=(1, 4, 6),
        dtype="<i4",
        dimension_names=("t", "y", "x"),
    )
    array[:] = values
    return zarr_array(tmp_path / "sharded.zarr"), values


def test_an_integer_drops_the_axis_from_shards_and_their_chunks(
    sharded: tuple[ManifestArray, np.ndarray], read_virtual: ReadVirtual
) -> None:
    marr, values = sharded

    day = marr[1, :, :]

    assert day.metadata.shards == (4, 6)
    assert day.metadata.chunks == (2, 3)
    np.testing.assert_array_equal(read_virtual({"v": day})["v"].values, values[1])


def test_shard_aligned_slices_keep_the_shard_layout(
    sharded: tuple[ManifestArray, np.ndarray], read_virtual: ReadVirtual
) -> None:
    marr, values = sharded

    part = marr[:, 4:8, 6:]

    assert part.metadata.shards == (1, 4, 6)
    assert part.metadata.chunks == (1, 2, 3)
    assert marr[:, :, :] is marr
    np.testing.assert_array_equal(read_virtual({"v": part})["v"].values, values[:, 4:8, 6:])


def test_slices_inside_a_shard_are_refused(sharded: tuple[ManifestArray, np.ndarray]) -> None:
    marr, _ = sharded

    with pytest.raises(UnsupportedIndexingError, match="split individual chunks"):
        marr[:, 0:2, :]
