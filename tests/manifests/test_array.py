"""ManifestArray: metadata, equality, renaming, chunk-aligned indexing, and refusing to load."""

from collections.abc import Callable, Mapping
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr
import zarr

from virtualstac import ChunkManifest, ManifestArray
from virtualstac.errors import (
    IncompatibleArraysError,
    IndexerTypeError,
    InvalidIndexerError,
    InvalidManifestError,
    UnsupportedIndexingError,
    UnsupportedOperationError,
)
from virtualstac.manifests.metadata import create_v3_array_metadata, replace_metadata

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
    larger = ChunkManifest({"2": {"path": "s3://bucket/a.nc", "offset": 0, "length": 20}})
    other_dimensions = ChunkManifest(
        {"0.0": {"path": "s3://bucket/a.nc", "offset": 0, "length": 8}}
    )

    for manifest in (larger, other_dimensions):
        with pytest.raises(InvalidManifestError, match=r"does not match .* expected grid \(2,\)"):
            ManifestArray(metadata, manifest)


def test_a_manifest_of_fewer_chunk_keys_reads_the_rest_as_the_fill_value(
    write_hdf5: Callable[..., Path], read_virtual: ReadVirtual
) -> None:
    path = write_hdf5("rows.h5", np.arange(20, dtype="<f4").reshape(4, 5), chunks=(2, 5))
    with h5py.File(path) as f:
        first = f["data"].id.get_chunk_info(0)
    # Keys "0.0" only: the inferred grid is (1, 1), the array's (2, 1).
    manifest = ChunkManifest(
        {"0.0": {"path": path.as_uri(), "offset": first.byte_offset, "length": first.size}}
    )
    metadata = create_v3_array_metadata(
        shape=(4, 5),
        data_type="<f4",
        chunk_shape=(2, 5),
        fill_value=np.nan,
        codecs=[
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}},
            {"name": "numcodecs.zlib", "configuration": {"level": 4}},
        ],
        dimension_names=["y", "x"],
    )

    marr = ManifestArray(metadata, manifest)

    assert marr.manifest.shape_chunk_grid == (2, 1)
    values = read_virtual({"v": marr})["v"].values
    np.testing.assert_array_equal(values[:2], h5_values(path)[:2])
    assert np.isnan(values[2:]).all()


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
    moved = np.concatenate([a[:2, :], a[:2, :].rename_paths("s3://bucket/other.nc")], axis=0)

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


# zarr warns that fixed-length bytes have no Zarr v3 specification yet.
@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")
@pytest.mark.parametrize("stored", ["S6", "U6"])
def test_astype_to_a_wider_string_type_keeps_the_stored_values(
    tmp_path: Path, read_virtual: ReadVirtual, stored: str
) -> None:
    names = np.array(["alpha", "beta", "gamma", "delta"], dtype=stored)
    path = tmp_path / "names.zarr"
    written = zarr.create_array(
        path, shape=(4,), chunks=(2,), dtype=stored, compressors=None, dimension_names=["n"]
    )
    written[:] = names
    entries = {
        f.name: {"path": f.as_uri(), "offset": 0, "length": f.stat().st_size}
        for f in (path / "c").iterdir()
    }
    marr = ManifestArray(written.metadata.to_dict(), entries)
    kind = stored[0]

    for wider in (f"{kind}12", kind):
        assert marr.astype(wider) is marr
    np.testing.assert_array_equal(read_virtual({"names": marr.astype(kind)})["names"].values, names)
    with pytest.raises(UnsupportedOperationError, match=f"to .{kind}3: .* wider string or bytes"):
        marr.astype(f"{kind}3")
    with pytest.raises(UnsupportedOperationError, match="only a wider string or bytes type"):
        marr.astype("S6" if kind == "U" else "U6")


def test_a_nan_fill_value_can_be_given_as_a_number(
    temperature: Path, marr: ManifestArray, read_virtual: ReadVirtual
) -> None:
    as_dict = {**marr.metadata.to_dict(), "fill_value": np.nan}
    placeholder = marr.with_fill_value_only(np.nan)

    assert np.isnan(ManifestArray(as_dict, marr.manifest).fill_value)
    assert np.isnan(replace_metadata(marr.metadata, fill_value=np.float32("nan")).fill_value)
    assert len(placeholder.manifest) == 0
    assert placeholder.chunks == marr.chunks
    assert placeholder.metadata.codecs == marr.metadata.codecs
    # A variable some files lack, concatenated with one they hold: NaN where it is missing.
    joined = np.concatenate(
        [placeholder.with_fill_value_only(np.nan), marr.with_fill_value_only(np.nan)]
    )
    assert np.isnan(read_virtual({"t": joined})["t"].values).all()
    with pytest.raises(InvalidManifestError, match="fill value 'warm' cannot be stored"):
        marr.with_fill_value_only("warm")


def test_a_placeholder_reads_as_its_fill_value_beside_real_chunks(
    temperature: Path, marr: ManifestArray, read_virtual: ReadVirtual
) -> None:
    nan_marr = ManifestArray(replace_metadata(marr.metadata, fill_value=np.nan), marr.manifest)

    joined = np.concatenate([nan_marr, nan_marr.with_fill_value_only(np.nan)], axis=0)

    values = read_virtual({"t": joined})["t"].values
    np.testing.assert_array_equal(values[:6], h5_values(temperature))
    assert np.isnan(values[6:]).all()


def test_rename_paths_moves_every_chunk_and_keeps_the_metadata(marr: ManifestArray) -> None:
    def local_to_s3(old: str) -> str:
        return "s3://my-bucket/" + old.rsplit("/", 1)[-1]

    renamed = marr.rename_paths(local_to_s3)

    assert renamed.metadata == marr.metadata
    assert set(renamed.manifest.iter_nonempty_paths()) == {"s3://my-bucket/temperature.h5"}
    assert (renamed.manifest.offsets == marr.manifest.offsets).all()


def test_to_virtual_variable_carries_dimension_names_and_attributes(
    temperature: Path, hdf5_array: Callable[..., ManifestArray]
) -> None:
    marr = hdf5_array(temperature, dims=["time", "y", "x"], attributes={"units": "K", "n": 1})

    variable = marr.to_virtual_variable()

    assert variable.dims == ("time", "y", "x")
    assert variable.attrs == {"units": "K", "n": 1}
    assert variable.chunks == marr.chunks
    # The variable holds names and attributes; the array keeps what concatenation compares.
    assert variable.data.manifest is marr.manifest
    assert variable.data.metadata.dimension_names is None
    assert variable.data.metadata.attributes == {"units": "K"}


def test_to_virtual_variable_needs_dimension_names() -> None:
    metadata = create_v3_array_metadata(shape=(4,), data_type="<f4", chunk_shape=(4,))
    marr = ManifestArray(metadata, ChunkManifest({}, shape=(1,)))

    with pytest.raises(InvalidManifestError, match="needs a name for each of its 1 dimensions"):
        marr.to_virtual_variable()


# -- indexing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [..., (slice(None),) * 3, (slice(None), ...), (np.arange(6), ...)])
def test_no_op_indexing_returns_the_array(marr: ManifestArray, key: object) -> None:
    assert marr[key] is marr


def test_an_index_names_every_axis_or_has_an_ellipsis(marr: ManifestArray) -> None:
    """The array API's rule (numpy would pad ``marr[0:2]`` with ``:``)."""
    for key in (slice(0, 2), (None,), (0, 0, 0, 0), (0, None, 0, 0, 0)):
        with pytest.raises(InvalidIndexerError, match="Indexer must contain a number"):
            marr[key]
    with pytest.raises(ValueError, match="single-axis indexing expressions"):
        marr[slice(0, 2)]


def test_none_inserts_an_axis_of_one_chunk(marr: ManifestArray) -> None:
    expanded = marr[None, ...]

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
        (slice(0, 2), slice(4, 8), ...),
        (slice(4, None), ...),
        (slice(0, 0), ...),
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

    row = marr[np.int64(-1), :]

    assert row.shape == (8,)
    assert row.metadata.dimension_names == ("x",)
    np.testing.assert_array_equal(read_virtual({"row": row})["row"].values, values[-1])


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ((slice(1, 4), ...), r"axis 0 \(length 6, chunks of 2\) with slice\(1, 4, None\)"),
        ((slice(None), slice(0, 3), ...), r"axis 1 .* split individual chunks"),
        ((slice(None, None, 2), ...), "a step of 2 picks elements of chunks"),
        ((slice(None, None, -1), ...), "a step of -1 picks elements of chunks"),
        ((0, ...), "an integer picks one element of a chunk of 2"),
        ((np.array([0, 2]), ...), "arbitrary integer array"),
        ((np.array([True] * 6), ...), "boolean, float or multi-dimensional arrays"),
    ],
)
def test_indexing_inside_chunks_is_refused(marr: ManifestArray, key: object, message: str) -> None:
    with pytest.raises(UnsupportedIndexingError, match=message):
        marr[key]


@pytest.mark.parametrize(
    ("key", "error", "message"),
    [
        ((7, ...), InvalidIndexerError, "index 7 is out of bounds for axis 0 with size 6"),
        (("time", ...), IndexerTypeError, "indexer must be of type int, slice, .* got str"),
        ([0, 1], IndexerTypeError, "got list"),
        ((..., ...), InvalidIndexerError, "multiple Ellipses are invalid, got 2"),
    ],
)
def test_malformed_indexers_are_refused(
    marr: ManifestArray, key: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        marr[key]


def test_indexing_errors_are_the_builtins_callers_catch(marr: ManifestArray) -> None:
    """Cutting chunks is what numpy (IndexError), VirtualiZarr (ValueError, NotImplementedError
    for fancy indexing) refuse; a malformed indexer is an IndexError and ValueError, a wrong
    type also a TypeError."""
    for builtin in (IndexError, ValueError, NotImplementedError):
        with pytest.raises(builtin):
            marr[1:4, ...]
    for builtin in (IndexError, ValueError):
        with pytest.raises(builtin):
            marr[..., ...]
    with pytest.raises(TypeError):
        marr["time", ...]


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
        marr[0, :]
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

    assert order(marr[0, ...]) == [0, 1]
    assert order(marr[:, None, ...]) == [2, 1, 3, 0]


# -- loading is refused ------------------------------------------------------------------------


def test_converting_to_numpy_is_refused_with_advice(marr: ManifestArray) -> None:
    with pytest.raises(UnsupportedOperationError, match="loadable_variables"):
        np.asarray(marr)
    with pytest.raises(
        NotImplementedError, match=r"xr\.open_zarr\(ds\.virtual\.to_store\(registry\)\)"
    ):
        np.array(marr)


def test_arithmetic_and_reductions_are_refused(marr: ManifestArray) -> None:
    with pytest.raises(UnsupportedOperationError, match="cannot apply add"):
        np.add(marr, 1)
    with pytest.raises(UnsupportedOperationError, match=r"numpy.sum is not supported"):
        np.sum(marr)


def test_values_and_load_of_a_virtual_variable_are_refused(marr: ManifestArray) -> None:
    ds = xr.Dataset({"t": marr.to_virtual_variable()})

    with pytest.raises(
        UnsupportedOperationError,
        match=r"cannot be loaded, computed or plotted\. For values, open it without references",
    ):
        _ = ds["t"].values
    with pytest.raises(UnsupportedOperationError, match="loadable_variables"):
        ds.load()
    with pytest.raises(UnsupportedOperationError, match="loadable_variables"):
        ds.compute()
