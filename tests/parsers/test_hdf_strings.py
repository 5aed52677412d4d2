"""netCDF-4 string variables (``NC_STRING``) read as netCDF4 reads them."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac.parsers.hdf import HDFParser
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray.unpacking import open_zarr_values


def write_strings_shorter_than_their_dimension(path: Path) -> Path:
    """String variables along an unlimited dimension of six records: two written records
    with and without a ``_FillValue``, and none written at all."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createVariable("time", "f8", ("time",))[:6] = np.arange(6)
        labelled = nc.createVariable("labelled", str, ("time",), fill_value="N/A")
        labelled[0], labelled[1] = "first", "second"
        plain = nc.createVariable("plain", str, ("time",))
        plain[0], plain[1] = "first", "second"
        nc.createVariable("unwritten", str, ("time",), fill_value="N/A")
        nc.createVariable("unwritten_plain", str, ("time",))
    return path


def texts(variable: xr.DataArray) -> list[str | None]:
    """The values as text, masked ones as None (NaN is not equal to itself)."""
    return [value if isinstance(value, str) else None for value in variable.values.tolist()]


@pytest.mark.parametrize("mask_and_scale", [True, False])
@pytest.mark.parametrize("inline_threshold", [0, 10**6])
def test_records_past_a_string_variable_read_as_its_fill_value(
    tmp_path: Path, mask_and_scale: bool, inline_threshold: int
) -> None:
    path = write_strings_shorter_than_their_dimension(tmp_path / "strings.nc")
    store = HDFParser(inline_threshold=inline_threshold)(
        str(path), ObjectStoreRegistry.for_url(str(path))
    )
    ours = open_zarr_values(store, mask_and_scale=mask_and_scale)
    with xr.open_dataset(path, engine="netcdf4", mask_and_scale=mask_and_scale) as reference:
        if not mask_and_scale:
            assert reference["labelled"].values.tolist()[2:] == ["N/A"] * 4
        for name in ("labelled", "plain", "unwritten", "unwritten_plain"):
            assert texts(ours[name]) == texts(reference[name]), name
