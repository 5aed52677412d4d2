"""Reading a file through ``open_virtual_dataset`` with every variable loaded, and comparing
it with what xarray reads of the same references or store, for the interop tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from kerchunk_refs import open_fsspec

from virtualstac import open_virtual_dataset
from virtualstac.storage.registry import ObjectStoreRegistry


def loaded(path: Path | str, registry: ObjectStoreRegistry, group: str | None = None) -> xr.Dataset:
    """Every variable of the file read through virtualstac and decoded, in memory."""
    names = list(open_virtual_dataset(str(path), registry=registry, group=group).variables)
    virtual = open_virtual_dataset(
        str(path), registry=registry, group=group, loadable_variables=names
    )
    return virtual.load()


def through_fsspec(fo: Any, group: str | None = None, **options: Any) -> xr.Dataset:
    """The references as fsspec's reference file system and xarray's Zarr engine read them."""
    return open_fsspec(fo, group, **options).load()


def _text(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    """Variable-length strings as objects: virtualstac decodes them as the netcdf4 engine
    does (``object``), xarray's Zarr engine keeps zarr's ``StringDType``; same values."""
    if values.dtype.kind in "OT" and all(isinstance(v, str) for v in values.ravel()):
        return values.astype(object)
    return None


def assert_same_dataset(ours: xr.Dataset, expected: xr.Dataset) -> None:
    """Same variables, dimensions, dtypes, values (NaN where NaN) and attributes."""
    assert set(ours.variables) == set(expected.variables)
    assert dict(ours.sizes) == dict(expected.sizes)
    for name, variable in expected.variables.items():
        actual = ours.variables[name]
        assert actual.dims == variable.dims, name
        theirs, mine = _text(variable.values), _text(actual.values)
        if theirs is not None and mine is not None:
            assert mine.tolist() == theirs.tolist(), name
        else:
            assert actual.dtype == variable.dtype, name
            np.testing.assert_array_equal(actual.values, variable.values, strict=True, err_msg=name)
        assert set(actual.attrs) == set(variable.attrs), name
        for key, value in variable.attrs.items():
            np.testing.assert_equal(actual.attrs[key], value, err_msg=f"{name}.{key}")
    assert set(ours.attrs) == set(expected.attrs)
    for key, value in expected.attrs.items():
        np.testing.assert_equal(ours.attrs[key], value, err_msg=key)
