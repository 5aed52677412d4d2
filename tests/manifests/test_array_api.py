"""np.concatenate, np.stack, np.expand_dims and np.broadcast_to on ManifestArrays.

Each combines references only; reading the result through a ManifestStore must give what numpy
gives on the values h5py reads from the same files.
"""

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
import zarr

from virtualstac import ChunkManifest, ManifestArray
from virtualstac.errors import IncompatibleArraysError, UnsupportedOperationError
from virtualstac.manifests import array_api
from virtualstac.manifests.metadata import create_v3_array_metadata, replace_metadata

ReadVirtual = Callable[[Mapping[str, ManifestArray]], xr.Dataset]


@pytest.fixture
def two_files(
    write_hdf5: Callable[..., Path], hdf5_array: Callable[..., ManifestArray]
) -> tuple[list[ManifestArray], list[np.ndarray]]:
    """Two HDF5 files with a (4, 6) float32 dataset each, chunked (2, 3); their arrays, values."""
    rng = np.random.default_rng(1)
    arrays, values = [], []
    for name in ("jan.h5", "feb.h5"):
        path = write_hdf5(name, rng.random((4, 6)).astype("<f4"), chunks=(2, 3))
        arrays.append(hdf5_array(path, dims=["time", "x"], attributes={"units": "K"}))
        with h5py.File(path, "r") as f:
            values.append(f["data"][()])
    return arrays, values


# -- concatenate -------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenated_files_read_as_the_concatenated_values(
    two_files: tuple[list[ManifestArray], list[np.ndarray]], read_virtual: ReadVirtual, axis: int
) -> None:
    arrays, values = two_files

    joined = np.concatenate(arrays, axis=axis)

    assert joined.shape == np.concatenate(values, axis=axis).shape
    assert joined.chunks == (2, 3)
    np.testing.assert_array_equal(
        read_virtual({"v": joined})["v"].values, np.concatenate(values, axis=axis)
    )


def test_concatenation_relabels_chunk_keys(virtual_array: Callable[..., ManifestArray]) -> None:
    a = virtual_array((2, 3), (2, 3), path="s3://bucket/a.nc")
    b = virtual_array((2, 3), (2, 3), path="s3://bucket/b.nc")

    joined = np.concatenate([a, b, a], 0)

    assert joined.manifest.dict() == {
        "0.0": {"path": "s3://bucket/a.nc", "offset": 0, "length": 100},
        "1.0": {"path": "s3://bucket/b.nc", "offset": 0, "length": 100},
        "2.0": {"path": "s3://bucket/a.nc", "offset": 0, "length": 100},
    }
    assert joined.manifest.path_table == ("s3://bucket/a.nc", "s3://bucket/b.nc")


def test_concatenation_shifts_inlined_chunks() -> None:
    metadata = create_v3_array_metadata(
        shape=(2,), data_type="<i2", chunk_shape=(1,), dimension_names=["x"]
    )
    inlined = ManifestArray(
        metadata,
        ChunkManifest(
            {
                "0": {"path": "s3://bucket/a.nc", "offset": 0, "length": 2},
                "1": {"path": "", "offset": 0, "length": 2, "data": b"\x07\x00"},
            }
        ),
    )

    joined = np.concatenate([inlined, inlined])

    assert joined.manifest.inlined == {(1,): b"\x07\x00", (3,): b"\x07\x00"}


def test_the_last_array_may_end_in_a_partial_chunk(
    write_hdf5: Callable[..., Path],
    hdf5_array: Callable[..., ManifestArray],
    read_virtual: ReadVirtual,
) -> None:
    full = hdf5_array(write_hdf5("full.h5", np.arange(8, dtype="<i4"), chunks=(4,)), dims=["x"])
    tail = hdf5_array(write_hdf5("tail.h5", np.arange(5, dtype="<i4"), chunks=(4,)), dims=["x"])

    joined = np.concatenate([full, tail])

    assert joined.shape == (13,)
    np.testing.assert_array_equal(
        read_virtual({"x": joined})["x"].values, np.r_[np.arange(8), np.arange(5)]
    )


def test_a_partial_chunk_before_the_end_is_refused(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    with pytest.raises(IncompatibleArraysError, match=r"Concat input 0 has array length 3 .* 2"):
        np.concatenate([virtual_array((3, 6), (2, 3)), virtual_array((4, 6), (2, 3))])


@pytest.mark.parametrize(
    ("differs", "message"),
    [
        ({"data_type": "<f8"}, "array 0 has data type float32, array 1 has float64"),
        ({"fill_value": -9.0}, "array 0 has fill value .*0.0.*, array 1 has .*-9.0"),
        ({"chunks": (4, 3)}, "array 0 has chunk shape \\(2, 3\\), array 1 has \\(4, 3\\)"),
        (
            {
                "codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "numcodecs.zlib", "configuration": {"level": 4}},
                ]
            },
            "array 1 has .*numcodecs.zlib.*; one Zarr array has one codec chain",
        ),
        ({"attributes": {"scale_factor": 0.01}}, "attribute 'scale_factor' is None .* but 0.01"),
        ({"attributes": {"add_offset": 273.15}}, "attribute 'add_offset' is None .* but 273.15"),
        (
            {"attributes": {"units": "hours since 2000-01-01"}},
            "attribute 'units' is None in array 0 but 'hours since 2000-01-01'",
        ),
        ({"attributes": {"units": "hours"}}, "attribute 'units' is None in array 0 but 'hours'"),
    ],
)
def test_concatenation_is_refused_when_one_array_could_not_describe_both(
    virtual_array: Callable[..., ManifestArray], differs: dict[str, Any], message: str
) -> None:
    chunks = differs.pop("chunks", (2, 3))
    with pytest.raises(IncompatibleArraysError, match=message):
        np.concatenate([virtual_array((4, 6), (2, 3)), virtual_array((4, 6), chunks, **differs)])


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"units": "K"}, {"units": "kelvin"}),
        ({"units": "K"}, {}),
        ({"units": "days since 2000-01-01"}, {"units": "days since 2000-01-01 00:00:00"}),
        (
            {"units": "days since 2000-01-01", "calendar": "gregorian"},
            {"units": "days since 2000-1-1"},
        ),
        ({"calendar": "365_day"}, {"calendar": "noleap"}),
    ],
)
def test_concatenation_keeps_the_first_units_and_calendar_where_they_mean_the_same(
    virtual_array: Callable[..., ManifestArray], first: dict[str, Any], second: dict[str, Any]
) -> None:
    """Units that decode nothing are a label xarray merges as any attribute; the same time
    units or calendar spelled otherwise decode the numbers alike."""
    joined = np.concatenate(
        [
            virtual_array((4, 6), (2, 3), attributes=first),
            virtual_array((4, 6), (2, 3), attributes=second),
        ]
    )
    assert joined.shape == (8, 6)
    assert joined.metadata.attributes == first


def test_concatenation_is_refused_for_other_shapes_and_in_memory_arrays(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    a = virtual_array((4, 6), (2, 3))

    with pytest.raises(IncompatibleArraysError, match=r"array 1 has shape \(4, 3\)"):
        np.concatenate([a, virtual_array((4, 3), (2, 3))], axis=0)
    with pytest.raises(IncompatibleArraysError, match=r"arrays with \[2, 3\] dimensions"):
        np.concatenate([a, virtual_array((4, 6, 1), (2, 3, 1))])
    with pytest.raises(IncompatibleArraysError, match=r"with a ndarray \(array 1\)"):
        np.concatenate([a, np.zeros((4, 6), dtype="f4")])
    with pytest.raises(IncompatibleArraysError, match="axis=None"):
        np.concatenate([a, a], axis=None)
    with pytest.raises(np.exceptions.AxisError):
        np.concatenate([a, a], axis=2)
    with pytest.raises(ValueError, match="need at least one array"):
        array_api.concatenate([])


# -- stack, expand_dims, broadcast_to ----------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_stacked_files_read_as_the_stacked_values(
    two_files: tuple[list[ManifestArray], list[np.ndarray]], read_virtual: ReadVirtual, axis: int
) -> None:
    arrays, values = two_files

    stacked = np.stack(arrays, axis=axis)

    assert stacked.shape == np.stack(values, axis=axis).shape
    assert stacked.chunks[axis] == 1
    np.testing.assert_array_equal(
        read_virtual({"v": stacked})["v"].values, np.stack(values, axis=axis)
    )


def test_stacking_arrays_of_different_shapes_is_refused(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    with pytest.raises(IncompatibleArraysError, match="different shapes"):
        np.stack([virtual_array((4, 6), (2, 3)), virtual_array((2, 6), (2, 3))])


def test_expand_dims_adds_an_unnamed_axis_of_one_chunk(
    two_files: tuple[list[ManifestArray], list[np.ndarray]],
) -> None:
    marr = two_files[0][0]

    expanded = np.expand_dims(marr, 1)

    assert expanded.shape == (4, 1, 6)
    assert expanded.chunks == (2, 1, 3)
    assert expanded.metadata.dimension_names == ("time", None, "x")
    assert expanded.manifest.get_entry((1, 0, 1)) == marr.manifest.get_entry((1, 1))


def test_broadcast_repeats_references_along_axes_of_one_chunk(
    two_files: tuple[list[ManifestArray], list[np.ndarray]], read_virtual: ReadVirtual
) -> None:
    (marr, _), (values, _) = two_files

    repeated = np.broadcast_to(np.expand_dims(marr, axis=0), (3, 4, 6))
    prepended = np.broadcast_to(marr, shape=(2, 4, 6))

    assert repeated.chunks == prepended.chunks == (1, 2, 3)
    assert repeated.manifest.path_table == marr.manifest.path_table
    np.testing.assert_array_equal(
        read_virtual({"v": repeated})["v"].values, np.broadcast_to(values, (3, 4, 6))
    )
    np.testing.assert_array_equal(
        read_virtual({"v": prepended})["v"].values, np.broadcast_to(values, (2, 4, 6))
    )


def test_broadcasting_inside_a_chunk_is_refused(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    with pytest.raises(IncompatibleArraysError, match="axis 0: its chunk size is 2, not 1"):
        np.broadcast_to(virtual_array((1, 6), (2, 3)), (4, 6))
    with pytest.raises(ValueError, match=r"cannot broadcast shape \(4, 6\) to \(5, 6\)"):
        np.broadcast_to(virtual_array((4, 6), (2, 3)), (5, 6))
    with pytest.raises(ValueError, match="to fewer dimensions"):
        np.broadcast_to(virtual_array((4, 6), (2, 3)), (6,))


def test_broadcasting_copies_inlined_chunks() -> None:
    metadata = create_v3_array_metadata(
        shape=(1, 2), data_type="u1", chunk_shape=(1, 1), dimension_names=["y", "x"]
    )
    entries = {"0.1": {"path": "", "offset": 0, "length": 1, "data": b"\x05"}}
    marr = ManifestArray(metadata, ChunkManifest(entries, shape=(1, 2)))

    broadcast = np.broadcast_to(marr, (2, 3, 2))

    assert broadcast.manifest.inlined == {(i, j, 1): b"\x05" for i in range(2) for j in range(3)}


def test_result_type_uses_the_dtype_of_the_virtual_array(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    assert np.result_type(virtual_array((2,), (2,), data_type="<i2"), np.int8) == np.int16


def test_virtual_arrays_of_different_dtypes_have_no_result_type(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    a = virtual_array((2,), (2,), data_type="<i2")

    assert np.result_type(a, a) == np.int16
    with pytest.raises(ValueError, match=r"inconsistent dtypes \['int16', 'int32'\]"):
        np.result_type(a, virtual_array((2,), (2,), data_type="<i4"))


def test_arrays_with_different_codecs_are_refused_as_not_implemented(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    """VirtualiZarr raises NotImplementedError for it; ``except ValueError`` still works."""
    zlib = [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "numcodecs.zlib", "configuration": {"level": 4}},
    ]
    arrays = [virtual_array((4, 6), (2, 3)), virtual_array((4, 6), (2, 3), codecs=zlib)]

    for builtin in (NotImplementedError, ValueError):
        with pytest.raises(builtin, match="arrays with different codecs"):
            np.concatenate(arrays)
        with pytest.raises(builtin, match="arrays with different codecs"):
            np.stack(arrays)


def named(array: ManifestArray, *names: str) -> ManifestArray:
    """``array`` with dimension names, which reading it through xarray needs."""
    return ManifestArray(replace_metadata(array.metadata, dimension_names=names), array.manifest)


# -- arrays of shards --------------------------------------------------------------------------


@pytest.fixture
def sharded(tmp_path: Path) -> tuple[ManifestArray, np.ndarray]:
    """A zarr array of (8, 12) int32 in shards of (4, 6) holding chunks of (2, 3)."""
    values = np.arange(96, dtype="<i4").reshape(8, 12)
    path = tmp_path / "sharded.zarr"
    array = zarr.create_array(
        path, shape=(8, 12), chunks=(2, 3), shards=(4, 6), dtype="<i4", dimension_names=("y", "x")
    )
    array[:] = values
    entries = {
        ".".join(f.relative_to(path / "c").parts): {
            "path": f.as_uri(),
            "offset": 0,
            "length": f.stat().st_size,
        }
        for f in (path / "c").rglob("*")
        if f.is_file()
    }
    return ManifestArray(array.metadata.to_dict(), entries), values


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_a_new_axis_enters_the_shards_and_their_chunks(
    sharded: tuple[ManifestArray, np.ndarray], read_virtual: ReadVirtual, axis: int
) -> None:
    marr, values = sharded

    expanded = np.expand_dims(marr, axis=axis)

    assert expanded.metadata.shards == tuple(np.insert([4, 6], axis, 1))
    assert expanded.metadata.chunks == tuple(np.insert([2, 3], axis, 1))
    np.testing.assert_array_equal(
        read_virtual({"v": expanded})["v"].values, np.expand_dims(values, axis)
    )


def test_stacked_and_concatenated_shards_read_as_numpy_joins_them(
    sharded: tuple[ManifestArray, np.ndarray], read_virtual: ReadVirtual
) -> None:
    marr, values = sharded

    stacked = np.stack([marr, marr], axis=1)
    joined = np.concatenate([marr, marr], axis=1)

    assert (stacked.metadata.shards, stacked.metadata.chunks) == ((4, 1, 6), (2, 1, 3))
    assert (joined.metadata.shards, joined.metadata.chunks) == ((4, 6), (2, 3))
    ds = read_virtual(
        {"stacked": named(stacked, "y", "copy", "x"), "joined": named(joined, "y", "x2")}
    )
    np.testing.assert_array_equal(ds["stacked"].values, np.stack([values, values], axis=1))
    np.testing.assert_array_equal(ds["joined"].values, np.concatenate([values, values], axis=1))


def test_shards_broadcast_along_new_leading_axes(
    sharded: tuple[ManifestArray, np.ndarray], read_virtual: ReadVirtual
) -> None:
    marr, values = sharded

    broadcast = np.broadcast_to(marr, (2, 3, 8, 12))

    assert broadcast.metadata.shards == (1, 1, 4, 6)
    assert broadcast.metadata.chunks == (1, 1, 2, 3)
    np.testing.assert_array_equal(
        read_virtual({"v": named(broadcast, "a", "b", "y", "x")})["v"].values,
        np.broadcast_to(values, (2, 3, 8, 12)),
    )


def test_shards_of_nested_shards_gain_the_axis_at_every_level(
    tmp_path: Path, read_virtual: ReadVirtual
) -> None:
    inner = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [2, 3],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        },
    }
    outer = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [4, 6],
            "codecs": [inner],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        },
    }
    metadata = create_v3_array_metadata(
        shape=(8, 12), data_type="<i4", chunk_shape=(8, 12), codecs=[outer]
    )
    marr = ManifestArray(metadata, ChunkManifest({}, shape=(1, 1)))

    expanded = np.expand_dims(marr, axis=0)

    (shards,) = expanded.metadata.codecs
    (nested,) = shards.codecs
    assert shards.chunk_shape == (1, 4, 6)
    assert nested.chunk_shape == (1, 2, 3)


# -- 0-d arrays --------------------------------------------------------------------------------


def test_a_scalar_broadcasts_to_repeated_references(
    tmp_path: Path, hdf5_array: Callable[..., ManifestArray], read_virtual: ReadVirtual
) -> None:
    with h5py.File(tmp_path / "scalar.h5", "w") as f:
        f.create_dataset("data", data=np.float64(273.15))
    scalar = _scalar_array(tmp_path / "scalar.h5")

    assert scalar.shape == ()
    broadcast = np.broadcast_to(scalar, (2, 3))

    assert broadcast.chunks == (1, 1)
    assert broadcast.manifest.shape_chunk_grid == (2, 3)
    values = read_virtual({"v": named(broadcast, "a", "b")})["v"].values
    np.testing.assert_array_equal(values, np.full((2, 3), 273.15))


def _scalar_array(path: Path) -> ManifestArray:
    """A 0-d ManifestArray over a contiguous scalar HDF5 dataset."""
    with h5py.File(path) as f:
        offset = f["data"].id.get_offset()
    metadata = create_v3_array_metadata(shape=(), data_type="<f8", chunk_shape=())
    return ManifestArray(metadata, {"0": {"path": path.as_uri(), "offset": offset, "length": 8}})


def test_numpy_functions_outside_the_supported_set_are_refused(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    with pytest.raises(UnsupportedOperationError, match=r"numpy.flip is not supported.*stack"):
        np.flip(virtual_array((2, 3), (1, 3)))


# -- pixel-interleaved rasters: the transpose order follows the axes ---------------------------


@pytest.fixture
def interleaved(tmp_path: Path) -> tuple[list[ManifestArray], list[np.ndarray]]:
    """Two 3-band uint16 GeoTIFFs written by GDAL pixel-interleaved (a chunk holds every band,
    stored (y, x, band)) with the horizontal predictor; their band_data arrays, rasterio's reads.
    """
    import rasterio

    from virtualstac.parsers import TIFFParser
    from virtualstac.storage.registry import ObjectStoreRegistry

    arrays, values = [], []
    rng = np.random.default_rng(3)
    for name in ("a.tif", "b.tif"):
        path = tmp_path / name
        data = rng.integers(0, 60000, (3, 40, 48), dtype="uint16")
        profile = {"driver": "GTiff", "width": 48, "height": 40, "count": 3, "dtype": "uint16"}
        tiling = {"tiled": True, "blockxsize": 16, "blockysize": 16, "interleave": "pixel"}
        with rasterio.open(path, "w", **profile, **tiling, compress="deflate", predictor=2) as f:
            f.write(data)
        with rasterio.open(path) as f:
            values.append(f.read())
        store = TIFFParser()(path.as_uri(), ObjectStoreRegistry.for_url(path.as_uri()))
        array = store.group["band_data"]
        assert isinstance(array, ManifestArray)
        arrays.append(array)
    return arrays, values


def transpose_order(array: ManifestArray) -> list[int]:
    first = array.metadata.codecs[0].to_dict()
    assert first["name"] == "transpose"
    return list(first["configuration"]["order"])


def test_stacked_pixel_interleaved_rasters_read_as_the_stacked_values(
    interleaved: tuple[list[ManifestArray], list[np.ndarray]], read_virtual: ReadVirtual
) -> None:
    arrays, values = interleaved
    assert transpose_order(arrays[0]) == [1, 2, 0]

    stacked = np.stack(arrays)
    at_end = np.stack(arrays, axis=-1)

    assert transpose_order(stacked) == [0, 2, 3, 1]
    np.testing.assert_array_equal(read_virtual({"v": stacked})["v"].values, np.stack(values))
    np.testing.assert_array_equal(
        read_virtual({"v": at_end})["v"].values, np.stack(values, axis=-1)
    )
    # Dropping the stacked axis again gives back the file's own layout.
    assert transpose_order(stacked[1, ...]) == [1, 2, 0]
    np.testing.assert_array_equal(read_virtual({"v": stacked[1, ...]})["v"].values, values[1])


def test_expanded_and_broadcast_pixel_interleaved_rasters_keep_their_values(
    interleaved: tuple[list[ManifestArray], list[np.ndarray]], read_virtual: ReadVirtual
) -> None:
    (array, _), (value, _) = interleaved

    expanded = np.expand_dims(array, axis=1)
    broadcast = np.broadcast_to(array, (2, *array.shape))

    assert transpose_order(expanded) == [2, 1, 3, 0]
    np.testing.assert_array_equal(
        read_virtual({"v": expanded})["v"].values, np.expand_dims(value, 1)
    )
    np.testing.assert_array_equal(
        read_virtual({"v": broadcast})["v"].values, np.broadcast_to(value, (2, *value.shape))
    )


def test_transposing_moves_references_and_keeps_the_stored_layout(
    interleaved: tuple[list[ManifestArray], list[np.ndarray]], read_virtual: ReadVirtual
) -> None:
    (array, _), (value, _) = interleaved

    stored_order = np.transpose(array, (1, 2, 0))
    band_last_x_first = array.transpose(2, 1, 0)

    # The chunks' own order: no transpose codec is needed any more.
    assert "transpose" not in [c.to_dict()["name"] for c in stored_order.metadata.codecs]
    assert stored_order.chunks == (16, 16, 3)
    np.testing.assert_array_equal(
        read_virtual({"v": stored_order})["v"].values, np.transpose(value, (1, 2, 0))
    )
    np.testing.assert_array_equal(
        read_virtual({"v": band_last_x_first})["v"].values, value.transpose(2, 1, 0)
    )
    with pytest.raises(ValueError, match="not a permutation"):
        np.transpose(array, (0, 0, 1))
