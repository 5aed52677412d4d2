"""ManifestArray: metadata, equality, renaming, chunk-aligned indexing, and refusing to load."""

from collections.abc import Callable, Mapping
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

from virtualstac import ChunkManifest, ManifestArray
from virtualstac.errors import (
    IncompatibleArraysError,
    InvalidManifestError,
    UnsupportedIndexingError,
    UnsupportedOperationError,
)
from virtualstac.manifests.metadata import create_v3_array_metadata

ReadVirtual = Callable[[Mapping[str, ManifestArray]], xr.Dataset]


@pytest.fixture
def temperature(write_hdf5: Callable[..., Path]) -> Path:
    """A (6, 8, 10) float32 HDF5 dataset in (2, 4, 5) chunks, gzip and shuffle."""
    values = np.random.default_rng(0).random((6, 8, 10)).astype("<f4")
    return write_hdf5("temperature.h5", values, chunks=(2, 4, 5))


@pytest.fixture
def marr(temperature: Path, hdf5_array: Callable[..., ManifestArray]) -> ManifestArray:
    return hdf5_array(temperature, dims=["time", "y", "x"], attributes={"units": "K"})


def h5_values(path: Path) -> np.ndarray:
    with h5py.File(path, "r") as f:
        return f["data"][()]


# -- description -------------------------------------------------------------------------------


def test_shape_dtype_and_chunks_come_from_the_metadata(marr: ManifestArray) -> None:
    assert marr.shape == (6, 8, 10)
    assert marr.ndim == 3
    assert marr.size == 480
    assert marr.dtype == np.dtype("float32")
    assert marr.chunks == (2, 4, 5)
    assert marr.nbytes == 480 * 4
    assert marr.manifest.shape_chunk_grid == (3, 2, 2)
    assert len(marr) == 6
    assert repr(marr) == "ManifestArray<shape=(6, 8, 10), dtype=float32, chunks=(2, 4, 5)>"


def test_nbytes_virtual_is_the_size_of_the_references(marr: ManifestArray) -> None:
    assert marr.nbytes_virtual == marr.manifest.nbytes
    assert marr.nbytes_virtual < marr.nbytes


def test_metadata_and_manifest_can_be_given_as_dicts() -> None:
    metadata = create_v3_array_metadata(
        shape=(4,), data_type="<i2", chunk_shape=(2,), dimension_names=["x"]
    )
    entries = {
        "0": {"path": "s3://bucket/a.nc", "offset": 0, "length": 4},
        "1": {"path": "s3://bucket/a.nc", "offset": 4, "length": 4},
    }

    marr = ManifestArray(metadata.to_dict(), entries)

    assert marr.metadata == metadata
    assert marr.manifest == ChunkManifest(entries)


def test_a_manifest_that_does_not_fit_the_array_is_refused() -> None:
    metadata = create_v3_array_metadata(shape=(10,), data_type="<f4", chunk_shape=(5,))
    manifest = ChunkManifest({"0": {"path": "s3://bucket/a.nc", "offset": 0, "length": 20}})

    with pytest.raises(InvalidManifestError, match=r"grid \(1,\) does not match .* expected grid"):
        ManifestArray(metadata, manifest)


def test_a_scalar_accepts_the_single_chunk_key_0() -> None:
    metadata = create_v3_array_metadata(shape=(), data_type="<f8", chunk_shape=())

    scalar = ManifestArray(metadata, {"0": {"path": "s3://bucket/a.nc", "offset": 8, "length": 8}})

    assert scalar.shape == ()
    assert scalar.manifest.get_entry(()) == {"path": "s3://bucket/a.nc", "offset": 8, "length": 8}
    with pytest.raises(TypeError, match=r"len\(\) of a 0-d ManifestArray"):
        len(scalar)


# -- comparison, dtype, renaming ---------------------------------------------------------------


def test_equality_compares_references_element_by_element(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    a = virtual_array((4, 6), (2, 3))
    moved = np.concatenate([a[:2], a[:2].rename_paths("s3://bucket/other.nc")], axis=0)

    assert (a == virtual_array((4, 6), (2, 3))).all()
    assert (moved == a)[:2].all()
    assert not (moved == a)[2:].any()
    assert not (a == virtual_array((4, 6), (2, 3), data_type="<f8")).any()
    assert not (a == np.zeros((4, 6))).any()


def test_missing_chunks_are_equal_only_with_equal_fill_values() -> None:
    def sparse(fill_value: float) -> ManifestArray:
        metadata = create_v3_array_metadata(
            shape=(4,), data_type="<f4", chunk_shape=(2,), fill_value=fill_value
        )
        entries = {"0": {"path": "s3://bucket/a.nc", "offset": 0, "length": 8}}
        return ManifestArray(metadata, ChunkManifest(entries, shape=(2,)))

    assert (sparse(np.nan) == sparse(np.nan)).all()
    assert (sparse(0.0) == sparse(-9.0)).tolist() == [True, True, False, False]


def test_astype_is_a_no_op_only(marr: ManifestArray) -> None:
    assert marr.astype("float32") is marr

    with pytest.raises(UnsupportedOperationError, match="from float32 to float64"):
        marr.astype(np.float64)


def test_rename_paths_moves_every_chunk_and_keeps_the_metadata(marr: ManifestArray) -> None:
    def local_to_s3(old: str) -> str:
        return "s3://my-bucket/" + old.rsplit("/", 1)[-1]

    renamed = marr.rename_paths(local_to_s3)

    assert renamed.metadata == marr.metadata
    assert set(renamed.manifest.iter_nonempty_paths()) == {"s3://my-bucket/temperature.h5"}
    assert (renamed.manifest.offsets == marr.manifest.offsets).all()


def test_to_virtual_variable_carries_dimension_names_and_attributes(marr: ManifestArray) -> None:
    variable = marr.to_virtual_variable()

    assert variable.dims == ("time", "y", "x")
    assert variable.attrs == {"units": "K"}
    assert variable.data is marr
    assert variable.chunks == marr.chunks


def test_to_virtual_variable_needs_dimension_names() -> None:
    metadata = create_v3_array_metadata(shape=(4,), data_type="<f4", chunk_shape=(4,))
    marr = ManifestArray(metadata, ChunkManifest({}, shape=(1,)))

    with pytest.raises(InvalidManifestError, match="needs a name for each of its 1 dimensions"):
        marr.to_virtual_variable()


# -- indexing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [..., slice(None), (slice(None), ...), np.arange(6)])
def test_no_op_indexing_returns_an_equal_array(marr: ManifestArray, key: object) -> None:
    indexed = marr[key]

    assert indexed.shape == marr.shape
    assert indexed.manifest == marr.manifest


def test_none_inserts_an_axis_of_one_chunk(marr: ManifestArray) -> None:
    expanded = marr[None]

    assert expanded.shape == (1, 6, 8, 10)
    assert expanded.chunks == (1, 2, 4, 5)
    assert expanded.metadata.dimension_names == (None, "time", "y", "x")


def test_chunk_aligned_slices_select_a_sub_grid(marr: ManifestArray) -> None:
    part = marr[2:6, :, 5:]

    assert part.shape == (4, 8, 5)
    assert part.chunks == marr.chunks
    assert part.manifest.shape_chunk_grid == (2, 2, 1)
    assert part.manifest.get_entry((0, 0, 0)) == marr.manifest.get_entry((1, 0, 1))
    assert part.metadata.dimension_names == ("time", "y", "x")


@pytest.mark.parametrize(
    "key",
    [
        (slice(2, 6), slice(None), slice(5, None)),
        (slice(0, 2), slice(4, 8)),
        (slice(4, None),),
        (slice(0, 0),),
    ],
)
def test_reading_a_sliced_array_gives_the_hdf5_slice(
    temperature: Path, marr: ManifestArray, read_virtual: ReadVirtual, key: tuple[slice, ...]
) -> None:
    ds = read_virtual({"t": marr[key]})

    np.testing.assert_array_equal(ds["t"].values, h5_values(temperature)[key])


def test_a_partial_last_chunk_can_be_sliced_off_at_the_array_end(
    write_hdf5: Callable[..., Path],
    hdf5_array: Callable[..., ManifestArray],
    read_virtual: ReadVirtual,
) -> None:
    path = write_hdf5("odd.h5", np.arange(10, dtype="<i4"), chunks=(4,))
    marr = hdf5_array(path, dims=["x"])

    tail = marr[8:]

    assert tail.shape == (2,)
    np.testing.assert_array_equal(read_virtual({"x": tail})["x"].values, [8, 9])


def test_an_integer_drops_an_axis_whose_chunks_hold_one_element(
    write_hdf5: Callable[..., Path],
    hdf5_array: Callable[..., ManifestArray],
    read_virtual: ReadVirtual,
) -> None:
    values = np.arange(24, dtype="<f8").reshape(3, 8)
    path = write_hdf5("rows.h5", values, chunks=(1, 4), compression=None, shuffle=False)
    marr = hdf5_array(path, dims=["time", "x"])

    row = marr[np.int64(-1)]

    assert row.shape == (8,)
    assert row.metadata.dimension_names == ("x",)
    np.testing.assert_array_equal(read_virtual({"row": row})["row"].values, values[-1])


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (slice(1, 4), "slice 1:4 on axis 0 does not fall on chunk boundaries"),
        ((slice(None), slice(0, 3)), "slice 0:3 on axis 1 does not fall on chunk boundaries"),
        (slice(None, None, 2), "step 2 on axis 0"),
        (slice(None, None, -1), "step -1 on axis 0"),
        (0, "cannot select index 0 on axis 0: its chunks hold 2 elements"),
        (7, "index 7 is out of bounds for axis 0 with size 6"),
        (np.array([0, 2]), "arbitrary integer array"),
        (np.array([True] * 6), "boolean or multi-dimensional arrays"),
        ("time", "cannot index a ManifestArray with str"),
        ((..., ...), "single ellipsis"),
        ((0, 0, 0, 0), "too many indices: array is 3-dimensional, got 4"),
    ],
)
def test_indexing_inside_chunks_is_refused(marr: ManifestArray, key: object, message: str) -> None:
    with pytest.raises(UnsupportedIndexingError, match=message):
        marr[key]


def test_axes_cannot_change_when_codecs_depend_on_the_chunk_shape() -> None:
    # numcodecs' delta runs over the flattened chunk, and knows nothing of axes.
    metadata = create_v3_array_metadata(
        shape=(2, 4),
        data_type="<f4",
        chunk_shape=(1, 4),
        codecs=[
            {"name": "numcodecs.delta", "configuration": {"dtype": "<f4"}},
            {"name": "bytes", "configuration": {"endian": "little"}},
        ],
    )
    marr = ManifestArray(metadata, ChunkManifest({}, shape=(2, 1)))

    with pytest.raises(UnsupportedIndexingError, match=r"array-to-array codec 'numcodecs\.delta'"):
        marr[0]
    with pytest.raises(IncompatibleArraysError, match=r"cannot insert axis 0: .* 'numcodecs"):
        np.stack([marr, marr])
    with pytest.raises(IncompatibleArraysError, match=r"cannot broadcast .* 'numcodecs.delta'"):
        np.broadcast_to(marr, (3, 2, 4))


def test_a_transpose_order_follows_dropped_and_added_axes() -> None:
    metadata = create_v3_array_metadata(
        shape=(2, 4, 6),
        data_type="<u2",
        chunk_shape=(1, 4, 6),
        codecs=[
            {"name": "transpose", "configuration": {"order": [1, 2, 0]}},
            {"name": "bytes", "configuration": {"endian": "little"}},
        ],
    )
    marr = ManifestArray(metadata, ChunkManifest({}, shape=(2, 1, 1)))

    def order(array: ManifestArray) -> list[int]:
        return list(array.metadata.codecs[0].to_dict()["configuration"]["order"])

    assert order(marr[0]) == [0, 1]
    assert order(marr[:, None]) == [2, 1, 3, 0]


# -- loading is refused ------------------------------------------------------------------------


def test_converting_to_numpy_is_refused_with_advice(marr: ManifestArray) -> None:
    with pytest.raises(UnsupportedOperationError, match="loadable_variables"):
        np.asarray(marr)
    with pytest.raises(NotImplementedError, match=r"xr.open_zarr\(manifest_store\)"):
        np.array(marr)


def test_arithmetic_and_reductions_are_refused(marr: ManifestArray) -> None:
    with pytest.raises(UnsupportedOperationError, match="cannot apply add"):
        np.add(marr, 1)
    with pytest.raises(UnsupportedOperationError, match=r"numpy.sum is not supported"):
        np.sum(marr)


def test_values_and_load_of_a_virtual_variable_are_refused(marr: ManifestArray) -> None:
    ds = xr.Dataset({"t": marr.to_virtual_variable()})

    with pytest.raises(UnsupportedOperationError, match="cannot be loaded or computed on"):
        _ = ds["t"].values
    with pytest.raises(UnsupportedOperationError, match="loadable_variables"):
        ds.load()
    with pytest.raises(UnsupportedOperationError, match="loadable_variables"):
        ds.compute()
