"""Packing attributes keep the types JSON would change, so values unpack as netCDF4 gives them."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import open_virtual_dataset
from virtualstac.xarray.unpacking import open_zarr_values

# (scale_factor, add_offset): xarray unpacks to the scale_factor's type when it is alone, and to
# float64 when an add_offset is given but the two differ or are not floats.
PACKINGS = {
    "int16_scale": (np.int16(3), None),
    "int32_scale": (np.int32(2), None),
    "float32_scale": (np.float32(0.5), None),
    "int32_pair": (np.int32(2), np.int32(1)),
    "int8_offset": (None, np.int8(3)),
}


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_DATA"])
def test_integer_packing_attributes_unpack_to_their_own_type(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "packed.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as nc:
        nc.createDimension("x", 4)
        for name, (scale_factor, add_offset) in PACKINGS.items():
            variable = nc.createVariable(name, "i2", ("x",))
            if scale_factor is not None:
                variable.scale_factor = scale_factor
            if add_offset is not None:
                variable.add_offset = add_offset
            variable.set_auto_maskandscale(False)
            variable[:] = np.array([0, 100, -100, 7], dtype="i2")

    loaded = open_virtual_dataset(path, loadable_variables=list(PACKINGS))
    stored = open_zarr_values(open_virtual_dataset(path).virtual.to_store(), consolidated=False)

    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert reference["int16_scale"].dtype == np.int16
        assert reference["int32_scale"].dtype == np.int32
        for name in PACKINGS:
            for ours in (loaded[name], stored[name]):
                np.testing.assert_array_equal(ours.values, reference[name].values, strict=True)
