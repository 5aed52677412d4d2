"""The examples of the data-structures guide and the developer API, run against virtualstac.

They are the VirtualiZarr documentation's examples with only the paths adapted: the guide's
``air.nc`` (int16 packed with ``scale_factor`` 0.01, one chunk of shape (2920, 25, 53)) is
replaced by a smaller HDF5 file of the same kind written with h5py.
"""

from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

from virtualstac import (
    ChunkManifest,
    ManifestArray,
    ManifestGroup,
    ManifestStore,
    ObjectStoreRegistry,
)
from virtualstac.errors import UnsupportedOperationError
from virtualstac.manifests import INLINED_CHUNK_PATH
from virtualstac.manifests.metadata import create_v3_array_metadata

AIR_SHAPE = (20, 5, 7)
AIR_ATTRS = {"scale_factor": 0.01, "units": "degK", "long_name": "4xDaily Air temperature"}


@pytest.fixture
def air_nc(tmp_path: Path) -> Path:
    """A contiguous int16 ``air`` variable packed with scale_factor 0.01, like the guide's."""
    path = tmp_path / "air.nc"
    kelvin = 240 + 60 * np.random.default_rng(3).random(AIR_SHAPE)
    with h5py.File(path, "w") as f:
        air = f.create_dataset("air", data=np.round(kelvin / 0.01).astype("<i2"))
        air.attrs.update(AIR_ATTRS)
    return path


@pytest.fixture
def marr(air_nc: Path) -> ManifestArray:
    """The ``air`` variable as one virtual chunk, located by h5py."""
    with h5py.File(air_nc, "r") as f:
        air = f["air"]
        entry = {
            "path": str(air_nc),
            "offset": air.id.get_offset(),
            "length": air.id.get_storage_size(),
        }
    metadata = create_v3_array_metadata(
        shape=AIR_SHAPE,
        data_type="<i2",
        chunk_shape=AIR_SHAPE,
        attributes=AIR_ATTRS,
        dimension_names=["time", "lat", "lon"],
    )
    return ManifestArray(metadata, ChunkManifest({"0.0.0": entry}))


def decoded_air(path: Path) -> np.ndarray:
    """What a netCDF reader gives for ``air``: the packed integers times scale_factor."""
    with h5py.File(path, "r") as f:
        return f["air"][()] * f["air"].attrs["scale_factor"]


def store_over(path: Path, **arrays: ManifestArray) -> ManifestStore:
    group = ManifestGroup(arrays=arrays, attributes={"title": "4x daily NMC reanalysis"})
    return ManifestStore(group, registry=ObjectStoreRegistry.for_url(str(path)))


# -- "Chunk manifests" -------------------------------------------------------------------------


def test_a_manifest_of_four_chunks_in_one_file() -> None:
    manifest = ChunkManifest(
        entries={
            "0.0.0": {"path": "s3://bucket/foo.nc", "offset": 100, "length": 100},
            "0.0.1": {"path": "s3://bucket/foo.nc", "offset": 200, "length": 100},
            "0.1.0": {"path": "s3://bucket/foo.nc", "offset": 300, "length": 100},
            "0.1.1": {"path": "s3://bucket/foo.nc", "offset": 400, "length": 100},
        }
    )

    assert manifest.shape_chunk_grid == (1, 2, 2)
    assert repr(manifest) == "ChunkManifest<shape=(1, 2, 2)>"


def test_an_empty_manifest_with_an_explicit_grid() -> None:
    manifest = ChunkManifest(entries={}, shape=(4, 8))

    assert manifest.shape_chunk_grid == (4, 8)
    assert manifest.dict() == {}


def test_from_arrays() -> None:
    paths = np.asarray(["s3://bucket/foo.nc", "s3://bucket/bar.nc"], dtype=np.dtypes.StringDType())
    offsets = np.asarray([100, 200], dtype=np.uint64)
    lengths = np.asarray([100, 100], dtype=np.uint64)

    manifest = ChunkManifest.from_arrays(paths=paths, offsets=offsets, lengths=lengths)

    assert manifest.dict() == {
        "0": {"path": "s3://bucket/foo.nc", "offset": 100, "length": 100},
        "1": {"path": "s3://bucket/bar.nc", "offset": 200, "length": 100},
    }


def test_inlined_chunks_from_entries_and_from_arrays_agree() -> None:
    from_entries = ChunkManifest(
        entries={
            "0.0": {"path": "s3://bucket/foo.nc", "offset": 100, "length": 100},
            "0.1": {"path": "", "offset": 0, "length": 4, "data": b"\x00\x01\x02\x03"},
        }
    )
    from_arrays = ChunkManifest.from_arrays(
        paths=np.asarray(["s3://bucket/foo.nc", ""], dtype=np.dtypes.StringDType()),
        offsets=np.asarray([100, 0], dtype=np.uint64),
        lengths=np.asarray([100, 4], dtype=np.uint64),
        inlined={(1,): b"\x00\x01\x02\x03"},
    )

    assert from_entries.get_entry((0, 1)) == from_arrays.get_entry((1,))
    assert from_arrays.get_entry((1,)) == {
        "path": INLINED_CHUNK_PATH,
        "offset": 0,
        "length": 4,
        "data": b"\x00\x01\x02\x03",
    }


def test_inlined_and_virtual_chunks_read_together_through_the_store(tmp_path: Path) -> None:
    np.arange(4, dtype="<i2").tofile(tmp_path / "first.bin")
    manifest = ChunkManifest(
        {
            "0": {"path": str(tmp_path / "first.bin"), "offset": 0, "length": 8},
            "1": {
                "path": "",
                "offset": 0,
                "length": 8,
                "data": np.arange(4, 8, dtype="<i2").tobytes(),
            },
        }
    )
    metadata = create_v3_array_metadata(
        shape=(8,), data_type="<i2", chunk_shape=(4,), dimension_names=["x"]
    )

    ds = xr.open_zarr(store_over(tmp_path / "first.bin", x=ManifestArray(metadata, manifest)))

    np.testing.assert_array_equal(ds["x"].values, np.arange(8))


# -- "ManifestArray class" ---------------------------------------------------------------------


def test_the_air_variable_is_one_chunk(marr: ManifestArray, air_nc: Path) -> None:
    with h5py.File(air_nc, "r") as f:
        offset = f["air"].id.get_offset()

    assert repr(marr) == "ManifestArray<shape=(20, 5, 7), dtype=int16, chunks=(20, 5, 7)>"
    assert repr(marr.manifest) == "ChunkManifest<shape=(1, 1, 1)>"
    assert marr.manifest.dict() == {
        "0.0.0": {"path": air_nc.as_uri(), "offset": offset, "length": 20 * 5 * 7 * 2}
    }
    assert marr.metadata.attributes["scale_factor"] == 0.01


def test_concatenating_merges_manifests_and_relabels_keys(
    marr: ManifestArray, air_nc: Path
) -> None:
    concatenated = np.concatenate([marr, marr], axis=0)

    assert repr(concatenated) == "ManifestArray<shape=(40, 5, 7), dtype=int16, chunks=(20, 5, 7)>"
    entries = concatenated.manifest.dict()
    assert list(entries) == ["0.0.0", "1.0.0"]
    assert entries["0.0.0"] == entries["1.0.0"] == marr.manifest.dict()["0.0.0"]

    ds = xr.open_zarr(store_over(air_nc, air=concatenated))
    np.testing.assert_allclose(ds["air"].values, np.concatenate([decoded_air(air_nc)] * 2))


def test_values_cannot_be_loaded_from_a_virtual_dataset(marr: ManifestArray) -> None:
    vds = ManifestGroup(arrays={"air": marr}).to_virtual_dataset()

    with pytest.raises(NotImplementedError, match="cannot be loaded"):
        _ = vds["air"].values
    with pytest.raises(UnsupportedOperationError):
        vds.load()


# -- reading through the store -----------------------------------------------------------------


def test_the_store_reads_decoded_values(marr: ManifestArray, air_nc: Path) -> None:
    ds = xr.open_zarr(store_over(air_nc, air=marr))

    assert ds["air"].dtype == np.float64
    assert ds["air"].attrs["units"] == "degK"
    np.testing.assert_allclose(ds["air"].values, decoded_air(air_nc))


def test_the_store_loads_the_variables_it_is_asked_to(marr: ManifestArray, air_nc: Path) -> None:
    store = store_over(air_nc, air=marr)

    virtual = store.to_virtual_dataset()
    loaded = store.to_virtual_dataset(loadable_variables=["air"])

    assert isinstance(virtual["air"].data, ManifestArray)
    assert virtual.attrs == {"title": "4x daily NMC reanalysis"}
    np.testing.assert_allclose(loaded["air"].values, decoded_air(air_nc))


# -- "rename_paths" ----------------------------------------------------------------------------


def local_to_s3_url(old_local_path: str) -> str:
    new_s3_bucket_url = "http://s3.amazonaws.com/my_bucket/"

    filename = Path(old_local_path).name
    return new_s3_bucket_url + filename


def test_rename_paths_from_local_files_to_a_bucket(marr: ManifestArray) -> None:
    renamed_manifest = marr.manifest.rename_paths(local_to_s3_url)
    renamed_array = marr.rename_paths(local_to_s3_url)

    expected = "http://s3.amazonaws.com/my_bucket/air.nc"
    assert renamed_manifest.dict()["0.0.0"]["path"] == expected
    assert renamed_array.manifest == renamed_manifest
    assert (
        renamed_array.manifest.dict()["0.0.0"]["offset"] == marr.manifest.dict()["0.0.0"]["offset"]
    )
