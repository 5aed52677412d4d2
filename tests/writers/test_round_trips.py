"""Every format, written to Icechunk and to both Kerchunk forms, reads back as its source.

Each published store is read three ways: by plain icechunk + xarray (or fsspec's reference file
system for Kerchunk), and by virtualstac's own parsers; all must equal the reference reader.
"""

from collections.abc import Callable
from pathlib import Path

import fsspec
import h5py
import icechunk
import netCDF4
import numpy as np
import pytest
import scipy.io
import xarray as xr
import zarr

from virtualstac import open_virtual_dataset
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.writers import authorize_containers, ensure_containers, required_containers


def netcdf4_with_groups(directory: Path) -> tuple[Path, xr.DataTree]:
    path = directory / "groups.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.title = "root"
        nc.createDimension("x", 6)
        nc.createVariable("x", "f8", ("x",))[:] = np.arange(6) * 0.5
        nc.createVariable("a", "i4", ("x",), zlib=True, chunksizes=(3,))[:] = np.arange(6)
        inner = nc.createGroup("inner")
        inner.createDimension("t", 4)
        var = inner.createVariable(
            "b", "f4", ("t", "x"), zlib=True, shuffle=True, chunksizes=(2, 3)
        )
        var[:] = np.arange(24, dtype="f4").reshape(4, 6)
        var.units = "K"
    return path, xr.open_datatree(path, engine="netcdf4")


def netcdf3(directory: Path) -> tuple[Path, xr.DataTree]:
    path = directory / "classic.nc"
    with scipy.io.netcdf_file(path, "w", version=2) as f:
        f.createDimension("time", None)
        f.createDimension("x", 5)
        time = f.createVariable("time", "f8", ("time",))
        time[:] = [0.0, 1.0, 2.0]
        time.units = "days since 2000-01-01"
        f.createVariable("v", "i2", ("time", "x"))[:] = np.arange(15).reshape(3, 5)
        f.createVariable("w", "f4", ("time", "x"))[:] = np.linspace(0, 1, 15).reshape(3, 5)
    with xr.open_dataset(path, engine="netcdf4") as ds:
        return path, xr.DataTree(ds.load())


def netcdf4_fill_off(directory: Path) -> tuple[Path, xr.DataTree]:
    """A variable written with fill off, whose records past its extent read as netCDF's
    default fill, which differs from its ``_FillValue`` (so they are not masked)."""
    path = directory / "fill_off.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.set_fill_off()
        nc.createDimension("time", None)
        nc.createDimension("x", 4)
        nc.createVariable("time", "f8", ("time",))[:6] = np.arange(6)
        var = nc.createVariable("v", "i2", ("time", "x"), chunksizes=(2, 4), fill_value=-3)
        var[:2] = np.arange(8).reshape(2, 4)
    with xr.open_dataset(path, engine="netcdf4") as ds:
        assert (ds["v"].values[2:] == -32767).all()
        return path, xr.DataTree(ds.load())


def plain_hdf5(directory: Path) -> tuple[Path, xr.DataTree]:
    path = directory / "plain.h5"
    big_endian = np.arange(20, dtype=">i4").reshape(4, 5)
    contiguous = np.linspace(0, 1, 7)
    with h5py.File(path, "w") as f:
        f.create_dataset("big_endian", data=big_endian, chunks=(2, 5))
        f.create_dataset("contiguous", data=contiguous)
    expected = xr.Dataset({"big_endian": (("a", "b"), big_endian), "contiguous": ("c", contiguous)})
    return path, xr.DataTree(expected)


def zarr_v3(directory: Path) -> tuple[Path, xr.DataTree]:
    path = directory / "source.zarr"
    ds = xr.Dataset(
        {"v": (("y", "x"), np.arange(48, dtype="f8").reshape(6, 8))},
        coords={"y": np.arange(6), "x": np.arange(8)},
    )
    ds.to_zarr(path, zarr_format=3, consolidated=False, encoding={"v": {"chunks": (3, 4)}})
    return path, xr.DataTree(xr.open_zarr(path, consolidated=False).load())


SOURCES: dict[str, Callable[[Path], tuple[Path, xr.DataTree]]] = {
    "netcdf4-groups": netcdf4_with_groups,
    "netcdf3": netcdf3,
    "netcdf4-fill-off": netcdf4_fill_off,
    "hdf5": plain_hdf5,
    "zarr": zarr_v3,
}


@pytest.fixture(params=sorted(SOURCES))
def source(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, xr.DataTree, xr.DataTree]:
    """A source file, the tree its reference reader gives, and its virtual tree."""
    path, expected = SOURCES[request.param](tmp_path)
    from virtualstac.parsers.detect import parser_for

    registry = ObjectStoreRegistry.for_url(str(path))
    store = parser_for(str(path), registry)(str(path), registry)
    return path, expected, store.to_virtual_datatree(loadable_variables=[])


def assert_same_values(actual: xr.DataTree, expected: xr.DataTree) -> None:
    for node in expected.subtree:
        for name, variable in node.dataset.data_vars.items():
            np.testing.assert_array_equal(
                actual[f"{node.path}/{name}".lstrip("/")].values, variable.values
            )


def test_icechunk(tmp_path: Path, source: tuple[Path, xr.DataTree, xr.DataTree]) -> None:
    _, expected, virtual = source
    containers = required_containers(virtual.virtual.to_group())
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config=ensure_containers(icechunk.RepositoryConfig.default(), containers),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="all")
    published = xr.open_datatree(
        repository.readonly_session("main").store, engine="zarr", consolidated=False
    )
    assert_same_values(published, expected)


@pytest.mark.parametrize("form", ["json", "parquet"])
def test_kerchunk(tmp_path: Path, source: tuple[Path, xr.DataTree, xr.DataTree], form: str) -> None:
    path, expected, virtual = source
    output = tmp_path / f"refs.{form}"
    virtual.virtual.to_kerchunk(output, format=form)  # type: ignore[arg-type]
    fs = fsspec.filesystem("reference", fo=str(output), remote_protocol="file")
    store = zarr.storage.FsspecStore.from_mapper(fs.get_mapper(), read_only=True)
    by_fsspec = xr.open_datatree(store, engine="zarr", consolidated=False, zarr_format=2)
    assert_same_values(by_fsspec, expected)
    registry = ObjectStoreRegistry.for_url(str(output))
    registry.register(path.parent.as_uri() + "/")
    reparsed = open_virtual_dataset(str(output), registry=registry, loadable_variables=[])
    by_us = xr.open_zarr(reparsed.virtual.to_store(registry))
    for name, variable in expected.dataset.data_vars.items():
        np.testing.assert_array_equal(by_us[name].values, variable.values)
