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

from virtualstac import ChunkManifest, ManifestArray
from virtualstac.errors import IncompatibleArraysError, UnsupportedOperationError
from virtualstac.manifests import array_api
from virtualstac.manifests.metadata import create_v3_array_metadata

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
    with pytest.raises(IncompatibleArraysError, match="array 0 has length 3, not a multiple"):
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
        ({"attributes": {"units": "degC"}}, "attribute 'units' is None in array 0 but 'degC'"),
    ],
)
def test_concatenation_is_refused_when_one_array_could_not_describe_both(
    virtual_array: Callable[..., ManifestArray], differs: dict[str, Any], message: str
) -> None:
    chunks = differs.pop("chunks", (2, 3))
    with pytest.raises(IncompatibleArraysError, match=message):
        np.concatenate([virtual_array((4, 6), (2, 3)), virtual_array((4, 6), chunks, **differs)])


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
    assert transpose_order(stacked[1]) == [1, 2, 0]
    np.testing.assert_array_equal(read_virtual({"v": stacked[1]})["v"].values, values[1])


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
