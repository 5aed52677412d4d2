"""Fixtures of the storage tests: a netCDF4 file to serve from misbehaving servers."""

from __future__ import annotations

import netCDF4
import numpy as np
import pytest


@pytest.fixture(scope="session")
def netcdf(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, np.ndarray]:
    """A netCDF4 file of one chunked, compressed variable (4 chunks), and its values as the
    netCDF4 library reads them."""
    path = tmp_path_factory.mktemp("network") / "t2m.nc"
    values = np.arange(40 * 30, dtype="f4").reshape(40, 30) / 7
    with netCDF4.Dataset(path, "w") as dataset:
        dataset.createDimension("y", 40)
        dataset.createDimension("x", 30)
        variable = dataset.createVariable("t2m", "f4", ("y", "x"), chunksizes=(20, 15), zlib=True)
        variable[:] = values
    with netCDF4.Dataset(path) as dataset:
        expected = np.asarray(dataset["t2m"][:])
    return path.read_bytes(), expected
