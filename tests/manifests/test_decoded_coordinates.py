"""Files holding the same dimension coordinates share one decoding of them, each file's
dataset still its own: the same values, indexes and attributes as xarray opens each file with."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import open_virtual_dataset
from virtualstac.manifests.decoded_coordinates import DecodedCoordinates


def write_step(path: Path, hour: float, lat_units: str = "degrees_north") -> Path:
    """One time step on a 3 x 4 grid, as the netCDF4 library writes it."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 3)
        nc.createDimension("lon", 4)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "hours since 2024-01-01"
        time[:] = [hour]
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat.units = lat_units
        lat[:] = [-10.0, 0.0, 10.0]
        nc.createVariable("lon", "f4", ("lon",))[:] = [0.0, 90.0, 180.0, 270.0]
        nc.createVariable("tas", "f4", ("time", "lat", "lon"))[:] = np.full((1, 3, 4), hour)
    return path


def test_files_with_the_same_coordinates_share_their_index(tmp_path: Path) -> None:
    first = open_virtual_dataset(write_step(tmp_path / "a.nc", 0.0))
    second = open_virtual_dataset(write_step(tmp_path / "b.nc", 6.0))

    assert first.xindexes["lat"] is second.xindexes["lat"]
    assert first.xindexes["time"] is not second.xindexes["time"]
    for dataset, path in [(first, tmp_path / "a.nc"), (second, tmp_path / "b.nc")]:
        with xr.open_dataset(path) as expected:
            xr.testing.assert_identical(dataset.coords.to_dataset(), expected.coords.to_dataset())


def test_each_file_keeps_its_own_attributes_and_cannot_change_the_shared_values(
    tmp_path: Path,
) -> None:
    first = open_virtual_dataset(write_step(tmp_path / "a.nc", 0.0))
    second = open_virtual_dataset(write_step(tmp_path / "b.nc", 6.0))

    first["lat"].attrs["units"] = "changed"
    first["lat"].encoding["dtype"] = "f8"

    assert second["lat"].attrs["units"] == "degrees_north"
    assert second["lat"].encoding["dtype"] == np.dtype("float32")
    with pytest.raises(ValueError, match="read-only"):
        first["lat"].values[0] = 99.0


def test_coordinates_differing_in_attributes_are_decoded_apart(tmp_path: Path) -> None:
    north = open_virtual_dataset(write_step(tmp_path / "a.nc", 0.0))
    other = open_virtual_dataset(write_step(tmp_path / "b.nc", 0.0, lat_units="degrees"))

    assert north.xindexes["lat"] is not other.xindexes["lat"]
    assert other["lat"].attrs["units"] == "degrees"


def test_only_the_last_coordinates_are_kept() -> None:
    cache = DecodedCoordinates(max_entries=2)
    decodings: list[int] = []

    def decoded(value: int) -> xr.Variable:
        def decode() -> xr.Variable:
            decodings.append(value)
            return xr.Variable(("x",), np.array([value]))

        return cache.decoded("x", ("x",), np.array([value]), {}, (), decode).variable

    for value in [1, 2, 1, 3, 2, 1]:
        decoded(value)

    # 1 and 2 decoded; 1 again kept; 3 evicts 2 (the least recently used); 2 evicts 1.
    assert decodings == [1, 2, 3, 2, 1]
