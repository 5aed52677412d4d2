"""``open_zarr_dataset``: ``xr.open_zarr`` for virtual stores, whose variables read past zarr's
per-chunk walk, with and without dask; other stores opened by ``xr.open_zarr`` itself."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

from virtualstac import ManifestGroup, ManifestStore, ObjectStoreRegistry, open_virtual_dataset
from virtualstac.xarray.zarr_store import VirtualChunksZarrStore, open_zarr_dataset


@pytest.fixture
def netcdf(tmp_path: Path) -> Path:
    """A netCDF4-style file written by h5py: temperature in 3 x 4 chunks, with edges."""
    path = tmp_path / "t.nc"
    values = np.random.default_rng(2).normal(280, 5, size=(3, 40, 50)).astype("<f4")
    with h5py.File(path, "w") as f:
        f.create_dataset("t", data=values, chunks=(1, 16, 16), compression="gzip", shuffle=True)
        f["t"].attrs["units"] = "K"
    return path


def store_of(path: Path) -> ManifestStore:
    registry = ObjectStoreRegistry.for_url(path.as_uri())
    group = open_virtual_dataset(path.as_uri(), registry=registry).virtual.to_group()
    assert isinstance(group, ManifestGroup)
    return ManifestStore(group, registry=registry)


@pytest.mark.parametrize("chunks", [None, {}, {"phony_dim_0": 2, "phony_dim_1": 32}])
def test_a_manifest_store_opens_as_xr_open_zarr_does_and_reads_past_the_walk(
    netcdf: Path, chunks: dict[str, int] | None, request: pytest.FixtureRequest
) -> None:
    expected = xr.open_zarr(store_of(netcdf), chunks=chunks)
    expected_chunks = expected.chunks
    expected.load()

    request.getfixturevalue("no_zarr_walk")
    opened = open_zarr_dataset(store_of(netcdf), chunks=chunks)

    assert opened.chunks == expected_chunks
    xr.testing.assert_identical(opened.load(), expected)
    assert opened["t"].encoding == expected["t"].encoding
    with h5py.File(netcdf) as f:
        np.testing.assert_array_equal(opened["t"].isel(phony_dim_1=slice(5, 33)), f["t"][:, 5:33])


def test_the_data_store_hands_xarray_arrays_that_skip_the_walk(netcdf: Path) -> None:
    data_store = VirtualChunksZarrStore.open_group(store_of(netcdf), mode="r")

    assert type(data_store.members["t"]).__name__ == "VirtualChunksArray"


def test_other_stores_open_with_xr_open_zarr(tmp_path: Path, no_zarr_walk: None) -> None:
    written = xr.Dataset({"v": (("x",), np.arange(10.0))})
    written.to_zarr(tmp_path / "plain.zarr", encoding={"v": {"chunks": (5,)}})

    with pytest.raises(AssertionError, match="walked"):
        open_zarr_dataset(str(tmp_path / "plain.zarr"), chunks=None)["v"].load()
