"""Dimension names of HDF5/netCDF-4 datasets, as netCDF4 and xarray name them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac.errors import NotVirtualizableError
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.hdf import HDFParser
from virtualstac.storage.registry import ObjectStoreRegistry


def parse(path: Path, **options: Any) -> ManifestStore:
    return HDFParser(**options)(str(path), ObjectStoreRegistry.for_url(str(path)))


def assert_reads_like_netcdf4(path: Path, store: ManifestStore) -> None:
    ours = xr.open_zarr(store, consolidated=False, chunks=None)
    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert set(ours.variables) == set(reference.variables)
        assert set(ours.coords) == set(reference.coords)
        assert dict(ours.sizes) == dict(reference.sizes)
        for name, expected in reference.variables.items():
            assert ours[name].dims == expected.dims, name
            np.testing.assert_array_equal(ours[name].values, expected.values, strict=True)


def write_non_coordinate_variable(path: Path) -> Path:
    """A variable ``y`` along ``x`` beside a dimension ``y`` of another length.

    netCDF-4 stores the variable as ``_nc4_non_coord_y``, since dataset ``y`` is the dimension.
    """
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.createDimension("x", 5)
        ds.createDimension("y", 3)
        ds.createVariable("y", "f4", ("x",))[:] = np.arange(5, dtype="f4") / 2
        ds.createVariable("z", "i4", ("x", "y"))[:] = np.arange(15).reshape(5, 3)
    return path


def test_a_variable_named_like_another_dimension_keeps_its_netcdf_name(tmp_path: Path) -> None:
    path = write_non_coordinate_variable(tmp_path / "non_coord.nc")
    with netCDF4.Dataset(path) as reference:
        assert reference["y"].dimensions == ("x",)
    store = parse(path)
    assert set(store.group.arrays) == {"y", "z"}
    assert store.group["y"].metadata.dimension_names == ("x",)
    assert store.group["z"].metadata.dimension_names == ("x", "y")
    # xarray makes such a variable a coordinate without an index; so does our store.
    assert_reads_like_netcdf4(path, store)
    assert "y" not in xr.open_zarr(store, consolidated=False, chunks=None).indexes


def test_a_non_coordinate_variable_is_dropped_by_its_netcdf_name(tmp_path: Path) -> None:
    path = write_non_coordinate_variable(tmp_path / "non_coord.nc")
    assert set(parse(path, drop_variables=["y"]).group.arrays) == {"z"}
    assert set(parse(path, drop_variables=["_nc4_non_coord_y"]).group.arrays) == {"z"}


def test_a_prefixed_dataset_beside_its_netcdf_name_raises(tmp_path: Path) -> None:
    import h5py

    path = tmp_path / "both.h5"
    with h5py.File(path, "w") as f:
        f["y"] = np.arange(3)
        f["_nc4_non_coord_y"] = np.arange(5)
    with pytest.raises(NotVirtualizableError, match=r"'_nc4_non_coord_y' is netCDF-4's name"):
        parse(path)
    assert set(parse(path, drop_variables=["_nc4_non_coord_y"]).group.arrays) == {"y"}
