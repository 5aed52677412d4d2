"""Fill values of HDF5 datasets: what the HDF5 library reads where nothing was written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import hdf_files
import numpy as np
import pytest
import xarray as xr
import zarr

from virtualstac.errors import NotVirtualizableError
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.hdf import HDFParser
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray.unpacking import open_zarr_values

_NEVER_WRITTEN = [n for n, _, written, _ in hdf_files.UNDEFINED_FILL_DATASETS if not written]


def parse(path: Path, **options: Any) -> ManifestStore:
    return HDFParser(**options)(str(path), ObjectStoreRegistry.for_url(str(path)))


@pytest.fixture(scope="module")
def undefined_fill(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("h5") / "undefined_fill.h5"
    return hdf_files.write_hdf5_undefined_fill(path)


@pytest.mark.parametrize("inline_threshold", [0, 10**6])
def test_undefined_fill_value_reads_as_h5py_reads_it(
    undefined_fill: Path, inline_threshold: int
) -> None:
    store = parse(undefined_fill, drop_variables=_NEVER_WRITTEN, inline_threshold=inline_threshold)
    root = zarr.open_group(store, mode="r")
    with h5py.File(undefined_fill) as f:
        assert set(store.group.arrays) == set(f) - set(_NEVER_WRITTEN)
        for name in store.group.arrays:
            assert (
                f[name].id.get_create_plist().fill_value_defined() == h5py.h5d.FILL_VALUE_UNDEFINED
            )
            # Unwritten chunks (of chunked_3) read as zeros, as HDF5 reads them.
            np.testing.assert_array_equal(root[name][...], f[name][()], strict=True)
            # No fill value to record: the attribute stays absent.
            assert store.group[name].metadata.attributes == {"units": "m"}
            assert store.group[name].metadata.fill_value == 0
    if not inline_threshold:
        assert len(store.group["chunked_3"].manifest) == 1  # the others were never written


@pytest.mark.parametrize("name", _NEVER_WRITTEN)
def test_undefined_fill_value_never_written_raises(undefined_fill: Path, name: str) -> None:
    with h5py.File(undefined_fill) as f, pytest.raises(OSError, match="no data can be read"):
        f[name][()]  # the reference reader cannot read it either
    others = [n for n in _NEVER_WRITTEN if n != name]
    with pytest.raises(
        NotVirtualizableError, match=r"fill value is undefined\) and was never"
    ) as info:
        parse(undefined_fill, drop_variables=others)
    message = str(info.value)
    assert str(undefined_fill) in message and f"variable {name!r}" in message
    assert f"drop_variables=[{name!r}]" in message


@pytest.mark.parametrize("inline_threshold", [0, 10**6])
def test_chunks_never_written_with_fill_time_never_read_as_h5py_reads_them(
    tmp_path: Path, inline_threshold: int
) -> None:
    # Zeros, not the fill value HDF5 never writes, whether the values are read or referenced.
    path = hdf_files.write_hdf5_fill_never(tmp_path / "fill_never.h5")
    root = zarr.open_group(parse(path, inline_threshold=inline_threshold), mode="r")
    with h5py.File(path) as f:
        assert f["sparse"].fillvalue == 9
        np.testing.assert_array_equal(root["sparse"][...], f["sparse"][()], strict=True)
    np.testing.assert_array_equal(root["sparse"][...], [1, 1, 1, 1, 0, 0, 0, 0, 0, 0])


#: The datasets of ``write_hdf5_fill_attributes`` whose ``_FillValue`` is refused.
NOT_ONE_VALUE = ["two", "fraction", "text", "record"]


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("two", "[5, 6]"),
        ("fraction", "5.5"),
        ("text", "'abc'"),
        ("record", "{'a': 5, 'b': 6.0}"),
    ],
)
def test_a_fill_value_attribute_not_one_value_of_the_type_raises(
    tmp_path: Path, name: str, shown: str
) -> None:
    # Rounded or cut to one number, it would mask values netCDF does not mask (5 for 5.5).
    path = hdf_files.write_hdf5_fill_attributes(tmp_path / "fills.h5")
    others = [n for n in NOT_ONE_VALUE if n != name]
    with pytest.raises(NotVirtualizableError) as info:
        parse(path, drop_variables=others)
    message = str(info.value)
    assert f"variable {name!r} has a _FillValue of {shown}, which is not one value" in message
    assert str(path) in message and f"drop_variables=[{name!r}]" in message


def test_a_whole_float_fill_value_of_an_integer_variable_masks_as_netcdf4_masks(
    tmp_path: Path,
) -> None:
    path = hdf_files.write_hdf5_fill_attributes(tmp_path / "fills.h5")
    store = parse(path, drop_variables=NOT_ONE_VALUE)
    ours = xr.open_zarr(store, consolidated=False, chunks=None)["whole"]
    with xr.open_dataset(path, engine="netcdf4", drop_variables=NOT_ONE_VALUE) as ref:
        np.testing.assert_array_equal(ours.values, ref["whole"].values, strict=True)


def test_a_string_fill_value_attribute_masks_as_with_the_netcdf4_engine(tmp_path: Path) -> None:
    """h5py strings with a ``_FillValue`` attribute but HDF5's own fill (the empty string): the
    written fill masks, unwritten elements read as HDF5 fills them."""
    path = tmp_path / "strings.h5"
    with h5py.File(path, "w") as f:
        names = f.create_dataset("names", shape=(4,), dtype=h5py.string_dtype())
        names[:2] = ["one", "N/A"]
        names.attrs["_FillValue"] = "N/A"
    values = open_zarr_values(parse(path))
    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert reference["names"].values.tolist()[1:] == [np.nan, "", ""]
        xr.testing.assert_identical(values["names"].variable, reference["names"].variable)
        assert values["names"].encoding["_FillValue"] == reference["names"].encoding["_FillValue"]
