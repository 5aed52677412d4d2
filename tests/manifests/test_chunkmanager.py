"""Virtual datasets in xarray: chunks, combining, chunk-aligned selection, and refusing to load.

ManifestArray has a ``.chunks`` attribute, so xarray treats it as a chunked array; virtualstac
registers a chunk manager for it (the ``xarray.chunkmanagers`` entry point) so that xarray's
combining functions work on virtual datasets and computing fails with advice.
"""

from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr
from xarray.namedarray.parallelcompat import get_chunked_array_type, list_chunkmanagers

from virtualstac import ManifestArray, ManifestGroup, ManifestStore, ObjectStoreRegistry
from virtualstac.errors import (
    IncompatibleArraysError,
    UnsupportedIndexingError,
    UnsupportedOperationError,
)
from virtualstac.manifests.chunkmanager import ManifestChunkManager
from virtualstac.xarray.convert import dataset_to_group

# Combining virtual datasets must not compare values, which would need loading them.
NO_COMPARISON = {"coords": "minimal", "compat": "override"}


@pytest.fixture
def months(
    write_hdf5: Callable[..., Path], hdf5_array: Callable[..., ManifestArray]
) -> tuple[list[xr.Dataset], list[np.ndarray]]:
    """Two virtual datasets over two HDF5 files of (4, 6) float32 in (2, 3) chunks; and values.

    Each has a ``time`` dimension coordinate and an ``x`` coordinate, both virtual.
    """
    rng = np.random.default_rng(2)
    datasets, values = [], []
    for month, name in enumerate(["jan", "feb"]):
        air = write_hdf5(f"{name}.h5", rng.random((4, 6)).astype("<f4"), chunks=(2, 3))
        time = write_hdf5(f"{name}-time.h5", np.arange(4.0) + 4 * month, chunks=(2,))
        x = write_hdf5(f"{name}-x.h5", np.linspace(0, 50, 6), chunks=(3,))
        group = ManifestGroup(
            arrays={
                "air": hdf5_array(air, dims=["time", "x"], attributes={"units": "K"}),
                "time": hdf5_array(time, dims=["time"], attributes={"units": "days since 2000"}),
                "x": hdf5_array(x, dims=["x"]),
            },
            attributes={"title": "air temperature"},
        )
        datasets.append(group.to_virtual_dataset())
        with h5py.File(air, "r") as f:
            values.append(f["data"][()])
    return datasets, values


def read(dataset: xr.Dataset, directory: Path) -> xr.Dataset:
    """Read a virtual dataset's values through a ManifestStore allowed to read ``directory``."""
    registry = ObjectStoreRegistry.for_url(str(directory / "any-file"))
    store = ManifestStore(dataset_to_group(dataset), registry=registry)
    return xr.open_zarr(store, chunks=None, decode_times=False).load()


# -- the chunk manager -------------------------------------------------------------------------


def test_xarray_finds_the_chunk_manager_through_the_entry_point(
    months: tuple[list[xr.Dataset], list[np.ndarray]],
) -> None:
    (ds, _), _ = months

    assert isinstance(list_chunkmanagers()["virtualstac"], ManifestChunkManager)
    assert isinstance(get_chunked_array_type(ds["air"].data), ManifestChunkManager)


def test_chunks_are_reported_in_xarrays_form(
    months: tuple[list[xr.Dataset], list[np.ndarray]],
) -> None:
    (ds, _), _ = months

    assert ds["air"].chunks == (2, 3)
    assert dict(ds.chunks) == {"time": 2, "x": 3}
    assert ManifestChunkManager().chunks(ds["air"].data) == ((2, 2), (3, 3))
    assert ManifestChunkManager().chunks(ds["air"].data[:, :3][:, :3]) == ((2, 2), (3,))


# -- combining ---------------------------------------------------------------------------------


def test_concat_along_an_existing_dimension_reads_as_the_concatenated_files(
    months: tuple[list[xr.Dataset], list[np.ndarray]], tmp_path: Path
) -> None:
    datasets, values = months

    combined = xr.concat(datasets, dim="time", data_vars="minimal", **NO_COMPARISON)

    assert combined["air"].shape == (8, 6)
    assert combined["x"].shape == (6,)
    assert isinstance(combined["air"].data, ManifestArray)
    loaded = read(combined, tmp_path)
    np.testing.assert_array_equal(loaded["air"].values, np.concatenate(values))
    np.testing.assert_array_equal(loaded["time"].values, np.arange(8.0))
    np.testing.assert_array_equal(loaded["x"].values, np.linspace(0, 50, 6))
    assert loaded["air"].attrs["units"] == "K"


def test_concat_along_a_new_dimension_reads_as_the_stacked_files(
    months: tuple[list[xr.Dataset], list[np.ndarray]], tmp_path: Path
) -> None:
    datasets, values = months
    without_time = [ds.drop_vars("time") for ds in datasets]

    combined = xr.concat(without_time, dim="member", data_vars="all", **NO_COMPARISON)

    assert combined["air"].dims == ("member", "time", "x")
    assert combined["air"].chunks == (1, 2, 3)
    np.testing.assert_array_equal(read(combined, tmp_path)["air"].values, np.stack(values))


def test_combine_nested_in_two_dimensions(
    months: tuple[list[xr.Dataset], list[np.ndarray]], tmp_path: Path
) -> None:
    (jan, feb), (a, b) = months
    air_only = [[jan[["air"]], feb[["air"]]], [feb[["air"]], jan[["air"]]]]

    combined = xr.combine_nested(
        air_only, concat_dim=["time", "x"], data_vars="minimal", **NO_COMPARISON
    )

    assert combined["air"].shape == (8, 12)
    np.testing.assert_array_equal(
        read(combined, tmp_path)["air"].values, np.block([[a, b], [b, a]])
    )


def test_merge_of_different_variables(
    months: tuple[list[xr.Dataset], list[np.ndarray]], tmp_path: Path
) -> None:
    (jan, feb), (a, b) = months

    merged = xr.merge([jan, feb.rename(air="air_feb")], compat="override")

    assert set(merged.data_vars) == {"air", "air_feb"}
    loaded = read(merged, tmp_path)
    np.testing.assert_array_equal(loaded["air"].values, a)
    np.testing.assert_array_equal(loaded["air_feb"].values, b)


def test_concat_of_arrays_with_different_encodings_is_refused(
    months: tuple[list[xr.Dataset], list[np.ndarray]],
) -> None:
    (jan, feb), _ = months
    data = feb["air"].data
    rescaled = ManifestArray(data.metadata.update_attributes({"scale_factor": 0.5}), data.manifest)
    feb = feb.assign(air=(("time", "x"), rescaled, feb["air"].attrs))

    with pytest.raises(IncompatibleArraysError, match=r"'scale_factor' is None .* but 0.5"):
        xr.concat([jan, feb], dim="time", data_vars="minimal", **NO_COMPARISON)


def test_comparing_values_while_combining_is_refused_with_advice(
    months: tuple[list[xr.Dataset], list[np.ndarray]],
) -> None:
    (jan, feb), _ = months

    values_instead = r"without references=True.*xr\.open_zarr\(ds\.virtual\.to_store"
    with pytest.raises(UnsupportedOperationError, match=values_instead):
        xr.concat([jan, feb], dim="time", data_vars="minimal", coords="different", compat="equals")
    with pytest.raises(UnsupportedOperationError, match=values_instead):
        xr.merge([jan, feb.rename(air="air_feb")], compat="no_conflicts")


# -- selecting ---------------------------------------------------------------------------------


def test_isel_with_chunk_aligned_slices(
    months: tuple[list[xr.Dataset], list[np.ndarray]], tmp_path: Path
) -> None:
    (jan, _), (a, _) = months

    part = jan.isel(time=slice(2, 4), x=slice(3, None))

    assert part["air"].shape == (2, 3)
    assert part["time"].shape == (2,)
    loaded = read(part, tmp_path)
    np.testing.assert_array_equal(loaded["air"].values, a[2:4, 3:])
    np.testing.assert_array_equal(loaded["time"].values, [2.0, 3.0])


def test_isel_inside_a_chunk_is_refused(
    months: tuple[list[xr.Dataset], list[np.ndarray]],
) -> None:
    (jan, _), _ = months

    with pytest.raises(
        UnsupportedIndexingError,
        match=r"axis 0 .* slice\(1, 3, None\): it would split individual chunks",
    ):
        jan.isel(time=slice(1, 3))
    with pytest.raises(
        UnsupportedIndexingError, match="an integer picks one element of a chunk of 2"
    ):
        jan.isel(time=0)


# -- what needs values -------------------------------------------------------------------------


# netCDF4 starts defining variables before xarray asks the chunk manager for their values.
@pytest.mark.filterwarnings("ignore:endian-ness of dtype and endian kwarg do not match")
def test_loading_computing_and_writing_values_are_refused(
    months: tuple[list[xr.Dataset], list[np.ndarray]], tmp_path: Path
) -> None:
    (jan, _), _ = months

    for attempt in (
        jan.load,
        jan.compute,
        jan.persist,
        lambda: jan["air"].values,
        lambda: jan.to_netcdf(tmp_path / "out.nc"),
    ):
        with pytest.raises(
            UnsupportedOperationError,
            match=r"cannot be loaded, computed or plotted\. For values, open it without references",
        ):
            attempt()


def test_rechunking_virtual_data_is_refused(
    months: tuple[list[xr.Dataset], list[np.ndarray]],
) -> None:
    (jan, _), _ = months
    manager = ManifestChunkManager()

    with pytest.raises(UnsupportedOperationError, match="cannot be rechunked"):
        manager.rechunk(jan["air"].data, (4, 6))
    with pytest.raises(UnsupportedOperationError, match="cannot be rechunked"):
        jan.unify_chunks()
    with pytest.raises(UnsupportedOperationError, match="does not chunk in-memory arrays"):
        manager.from_array(np.zeros(3), chunks=(1,))
