"""Attributes read back through every way values are read as the netcdf4 and h5netcdf engines
give them: files written by netCDF4 and h5py, read through the parsed store, the engine, and
Kerchunk (JSON, parquet) and Icechunk stores written from the virtual dataset.

JSON has no NaN, infinity or complex number: strict JSON writers spell the first as text
(``"NaN"``), complex numbers are ``[real, imaginary]`` pairs. Such attributes have their types
recorded (``_nczarr_attr``) and read back as the numpy scalars and arrays the engines give,
of their types; other numbers read back as JSON numbers of equal value.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import icechunk
import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import open_virtual_dataset, open_virtual_mfdataset
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.writers import authorize_containers, ensure_containers, required_containers
from virtualstac.xarray.unpacking import open_zarr_values

WAYS = ["store", "engine", "loaded", "kerchunk-json", "kerchunk-parquet", "icechunk"]


def read(way: str, path: Path, tmp_path: Path) -> xr.Dataset:
    """The file's values and attributes, read the way named."""
    registry = ObjectStoreRegistry.for_url(str(path))
    if way == "engine":
        return xr.open_dataset(path, engine="virtualstac").load()
    if way == "loaded":
        names = list(open_virtual_dataset(str(path), loadable_variables=[]).variables)
        loaded = open_virtual_dataset(str(path), loadable_variables=names)
        # The attributes of a virtual dataset are its references' (JSON, and their record).
        return xr.Dataset(loaded.variables).load()
    virtual = open_virtual_dataset(str(path), registry=registry, loadable_variables=[])
    if way == "store":
        return open_zarr_values(virtual.virtual.to_store(registry)).load()
    if way.startswith("kerchunk"):
        form = way.split("-")[1]
        output = tmp_path / f"refs.{form}"
        virtual.virtual.to_kerchunk(output, format=form)  # type: ignore[arg-type]
        registry.register(tmp_path.as_uri() + "/")
        reparsed = open_virtual_dataset(str(output), registry=registry, loadable_variables=[])
        return open_zarr_values(reparsed.virtual.to_store(registry)).load()
    containers = required_containers(virtual.virtual.to_group())
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config=ensure_containers(icechunk.RepositoryConfig.default(), containers),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="attributes")
    store = repository.readonly_session("main").store
    return open_zarr_values(store, consolidated=False).load()


def reference(path: Path, engine: str) -> xr.Dataset:
    options = {"phony_dims": "sort"} if engine == "h5netcdf" else {}
    with xr.open_dataset(path, engine=engine, **options) as direct:
        return direct.load()


def _kind(value: Any) -> tuple[Any, ...]:
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.newbyteorder("="), value.shape)
    return (type(value),)


def assert_same_attributes(
    ours: dict[Any, Any], theirs: dict[Any, Any], where: str, *, typed: Callable[[Any], bool]
) -> None:
    """The same names and values (NaN where NaN); the same types where ``typed(value)``."""
    assert set(ours) == set(theirs), where
    for name, value in theirs.items():
        assert xr.core.utils.equivalent(ours[name], value), f"{where}.{name}"
        if typed(value):
            assert _kind(ours[name]) == _kind(value), f"{where}.{name}: {ours[name]!r}"


def assert_same_dataset(
    ours: xr.Dataset, theirs: xr.Dataset, *, typed: Callable[[Any], bool], globals_: bool = True
) -> None:
    xr.testing.assert_equal(ours, theirs)
    for name, variable in theirs.variables.items():
        assert_same_attributes(ours[name].attrs, variable.attrs, str(name), typed=typed)
    if globals_:
        assert_same_attributes(ours.attrs, theirs.attrs, "/", typed=typed)
        xr.testing.assert_identical(ours, theirs)


def _non_finite(value: Any) -> bool:
    values = np.asarray(value)
    return values.dtype.kind == "f" and not np.isfinite(values).all()


def write_non_finite(path: Path, fmt: str = "NETCDF4") -> Path:
    """NaN and infinities in float attributes: scalars and arrays, of both float types, on
    float and integer variables and the file."""
    with netCDF4.Dataset(path, "w", format=fmt) as nc:
        nc.createDimension("x", 3)
        nc.missing = np.nan
        nc.bounds = np.array([np.inf, -np.inf], "f4")
        nc.title = "NaN"  # text, not a number
        tas = nc.createVariable("tas", "f4", ("x",))
        tas[:] = [1.0, np.inf, 3.0]
        tas.valid_max = np.float32(np.inf)
        tas.missing_value = np.float32(np.nan)
        tas.actual_range = np.array([np.nan, np.inf, -np.inf, 1.5])
        tas.limit = np.inf
        tas.finite = np.float32(2.5)
        count = nc.createVariable("count", "i4", ("x",))
        count[:] = [1, 2, 3]
        count.ceiling = np.float32(-np.inf)
        count.weights = np.array([0.5, np.nan])
        count.comment = "Infinity"
    return path


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
def test_non_finite_float_attributes_read_back_as_floats_of_their_types(
    tmp_path: Path, way: str, engine: str
) -> None:
    path = write_non_finite(tmp_path / "non_finite.nc")
    ours, theirs = read(way, path, tmp_path), reference(path, engine)
    assert_same_dataset(ours, theirs, typed=_non_finite, globals_=way != "loaded")
    assert ours["tas"].attrs["valid_max"].dtype == np.float32
    assert ours["count"].attrs["comment"] == "Infinity"
    if way != "loaded":
        assert ours.attrs["title"] == "NaN"


@pytest.mark.parametrize("way", ["store", "engine", "kerchunk-json", "icechunk"])
def test_non_finite_attributes_of_netcdf3_files_too(tmp_path: Path, way: str) -> None:
    path = write_non_finite(tmp_path / "classic.nc", fmt="NETCDF3_64BIT_OFFSET")
    ours = read(way, path, tmp_path)
    assert_same_dataset(ours, reference(path, "netcdf4"), typed=_non_finite)


def test_non_finite_attributes_of_groups_read_back_typed(tmp_path: Path) -> None:
    path = tmp_path / "groups.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 2)
        forecast = nc.createGroup("forecast")
        forecast.spread = np.array([np.nan, np.inf], "f4")
        member = forecast.createVariable("member", "f8", ("x",))
        member[:] = [1.0, 2.0]
        member.valid_min = -np.inf
    ours = xr.open_datatree(path, engine="virtualstac").load()
    with xr.open_datatree(path, engine="netcdf4") as direct:
        theirs = direct.load()
    xr.testing.assert_identical(ours, theirs)
    assert ours["forecast"].attrs["spread"].dtype == np.float32
    assert type(ours["forecast"]["member"].attrs["valid_min"]) is np.float64


def test_an_nczarr_store_s_recorded_types_give_its_non_finite_attributes(tmp_path: Path) -> None:
    # netCDF-C records every attribute's type (its NCZarr) and spells them as the writers do.
    path = tmp_path / "nczarr.zarr"
    with netCDF4.Dataset(f"file://{path}#mode=nczarr,file", "w") as nc:
        nc.createDimension("x", 2)
        nc.spread = np.array([np.nan, np.inf], "f4")
        variable = nc.createVariable("v", "f4", ("x",))
        variable[:] = [1.0, 2.0]
        variable.valid_max = np.float32(np.inf)
    registry = ObjectStoreRegistry.for_url(str(path) + "/")
    virtual = open_virtual_dataset(str(path), registry=registry, loadable_variables=[])
    ours = open_zarr_values(virtual.virtual.to_store(registry)).load()
    assert ours["v"].attrs["valid_max"] == np.float32(np.inf)
    assert ours["v"].attrs["valid_max"].dtype == np.float32
    np.testing.assert_array_equal(ours.attrs["spread"], np.array([np.nan, np.inf], "f4"))
    assert ours.attrs["spread"].dtype == np.float32


def test_non_finite_attributes_set_on_a_virtual_dataset_are_written_typed(tmp_path: Path) -> None:
    path = write_non_finite(tmp_path / "non_finite.nc")
    virtual = open_virtual_dataset(str(path), loadable_variables=[])
    virtual.attrs["ceiling"] = np.float32(np.inf)
    virtual["count"].attrs["floor"] = -np.inf
    virtual["count"].attrs["complex"] = np.complex64(1 - 2j)
    output = tmp_path / "refs.json"
    virtual.virtual.to_kerchunk(output, format="json")
    registry = ObjectStoreRegistry.for_url(str(path))
    reparsed = open_virtual_dataset(str(output), registry=registry, loadable_variables=[])
    ours = open_zarr_values(reparsed.virtual.to_store(registry))
    assert type(ours.attrs["ceiling"]) is np.float32 and ours.attrs["ceiling"] == np.inf
    assert type(ours["count"].attrs["floor"]) is np.float64
    assert ours["count"].attrs["complex"] == np.complex64(1 - 2j)
    assert type(ours["count"].attrs["complex"]) is np.complex64
    assert ours["tas"].attrs["valid_max"].dtype == np.float32  # the file's, kept


_NUMBERS = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16", "?"]


def write_every_type(path: Path) -> Path:
    """Attributes of every numpy type h5py writes (scalars, arrays, one-element and empty
    arrays, h5py.Empty, big-endian), strings of every form, and UTF-8 names, on the file, a
    dataset, and a dataset and a group named in UTF-8."""
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=np.arange(4, dtype="f4"))
        f.create_dataset("v\u00e4rde", data=np.arange(4))
        group = f.create_group("gr\u00fcppe \u2603")
        for node in (f, f["v"], f["v\u00e4rde"], group):
            attrs = node.attrs
            for code in _NUMBERS:
                dtype = np.dtype(code)
                attrs[f"scalar_{code}"] = np.array(1, dtype=dtype)[()]
                attrs[f"array_{code}"] = np.array([1, 0, 1], dtype=dtype)
                attrs[f"one_{code}"] = np.array([1], dtype=dtype)
                attrs[f"none_{code}"] = np.zeros((0,), dtype=dtype)
                attrs[f"empty_{code}"] = h5py.Empty(dtype)
                if dtype.itemsize > 1:
                    attrs[f"big_endian_{code}"] = np.array([1, 2], dtype=dtype.newbyteorder(">"))
            attrs["complex_nan"] = np.array([complex(np.nan, 1), complex(2, np.inf)], "c8")
            attrs["text"] = "d\u00e9j\u00e0 vu \u2603"
            attrs["texts"] = ["a", "bc"]
            attrs["long_texts"] = ["x" * 5000, "y" * 3000]
            attrs.create("fixed_texts", np.array([b"z" * 300, b"w"], dtype="S300"))
            attrs["no_text"] = ""
            attrs.create("no_texts", np.array([], dtype=object), dtype=h5py.string_dtype())
            attrs["empty_text"] = h5py.Empty("S1")
            attrs["n\u00e4me \u2603"] = 1
            attrs.create("enum", 1, dtype=h5py.enum_dtype({"A": 0, "B": 1}, basetype="i1"))
    return path


def _complex(value: Any) -> bool:
    return np.asarray(value).dtype.kind == "c" and np.asarray(value).size > 0


@pytest.mark.parametrize("way", WAYS)
def test_attributes_of_every_type_read_back_as_the_engines_give_them(
    tmp_path: Path, way: str
) -> None:
    path = write_every_type(tmp_path / "every_type.h5")
    ours = read(way, path, tmp_path)
    # h5netcdf reads every attribute; complex ones read back as its complex numbers.
    assert_same_dataset(ours, reference(path, "h5netcdf"), typed=_complex, globals_=way != "loaded")
    # netCDF4 leaves out the types netCDF lacks (bool, half floats, complex, enums h5py made),
    # which are kept; the others are its values.
    netcdf = reference(path, "netcdf4")
    for name, variable in netcdf.variables.items():
        kept = {key: ours[name].attrs[key] for key in variable.attrs}
        assert_same_attributes(kept, variable.attrs, str(name), typed=_non_finite)
    for code in ("?", "f2", "c8"):
        assert f"scalar_{code}" in ours["v"].attrs and f"scalar_{code}" not in netcdf["v"].attrs


def test_attributes_of_utf8_named_groups_read_back_as_the_engines_give_them(
    tmp_path: Path,
) -> None:
    path = write_every_type(tmp_path / "every_type.h5")
    group = "gr\u00fcppe \u2603"
    ours = xr.open_dataset(path, engine="virtualstac", group=group).load()
    with xr.open_dataset(path, engine="h5netcdf", group=group, phony_dims="sort") as direct:
        assert_same_dataset(ours, direct.load(), typed=_complex)


def test_files_whose_non_finite_attributes_differ_combine_as_open_mfdataset(
    tmp_path: Path,
) -> None:
    # The types recorded for them say how attributes read, not how values decode: a day all
    # missing (actual_range NaN) joins the others, as xarray joins them.
    paths = []
    for day, actual_range in enumerate([[np.nan, np.nan], [1.0, 2.0]]):
        paths.append(tmp_path / f"day{day}.nc")
        with netCDF4.Dataset(paths[-1], "w") as nc:
            nc.createDimension("time", None)
            time = nc.createVariable("time", "f8", ("time",))
            time.units = "days since 2000-01-01"
            time[:] = [day]
            tas = nc.createVariable("tas", "f4", ("time",))
            tas[:] = [day]
            tas.actual_range = np.array(actual_range, "f4")
            tas.valid_max = np.float32(np.inf)
    combined = open_virtual_mfdataset([str(p) for p in paths], progress=False)
    registry = ObjectStoreRegistry.for_url(str(paths[0]))
    ours = open_zarr_values(combined.virtual.to_store(registry)).load()
    with xr.open_mfdataset(paths, engine="netcdf4", combine_attrs="drop_conflicts") as direct:
        assert_same_dataset(ours, direct.load(), typed=_non_finite)
    assert type(ours["tas"].attrs["valid_max"]) is np.float32
