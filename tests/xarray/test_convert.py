"""Loaded variables stored again: with ``decode_cf=False`` they show the attributes the file's
own reader shows, not the defaults xarray's encoder adds (a calendar, a NaN fill value)."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.xarray.unpacking import open_zarr_values


def stored_again(path: Path, **decoding: bool) -> xr.Dataset:
    """The file's virtual dataset (coordinates loaded) through a store, read back."""
    registry = ObjectStoreRegistry.for_url(str(path))
    store = open_virtual_dataset(str(path), registry=registry).virtual.to_store(registry)
    return open_zarr_values(store, **decoding)


@pytest.mark.parametrize(
    ("time_attrs", "lat_fill"),
    [
        ({}, None),  # no calendar, no fill: xarray's encoder would add both
        ({"calendar": "noleap"}, None),
        ({"calendar": "standard"}, -999.0),
        ({"calendar": "360_day"}, None),  # decoded to cftime objects
    ],
)
def test_loaded_coordinates_keep_the_files_attributes(
    tmp_path: Path, time_attrs: dict[str, str], lat_fill: float | None
) -> None:
    path = tmp_path / "c.nc"
    with netCDF4.Dataset(path, "w") as f:
        f.createDimension("time", None)
        f.createDimension("lat", 3)
        time = f.createVariable("time", "f8", ("time",))
        time.setncatts({"units": "days since 2000-01-01", **time_attrs})
        time[:] = [0.0, 1.5]
        lat = f.createVariable("lat", "f4", ("lat",), fill_value=lat_fill)
        lat[:] = [-10.0, 0.0, 10.0]
        f.createVariable("t2m", "f4", ("time", "lat"))[:] = np.ones((2, 3))

    ours = stored_again(path, decode_cf=False)
    with xr.open_dataset(path, engine="netcdf4", decode_cf=False) as theirs:
        for name in ("time", "lat"):
            assert ours[name].attrs == theirs[name].attrs
            np.testing.assert_array_equal(ours[name].values, theirs[name].values)
    with xr.open_dataset(path, engine="netcdf4") as theirs:
        xr.testing.assert_identical(stored_again(path)["time"], theirs["time"])
