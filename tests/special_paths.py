"""Local files in directories whose names URLs must escape (a space, '%', '#', '?', '[', non-ASCII),
shared by the tests of the Kerchunk references we write and read for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import netCDF4
import numpy as np

#: Directory names a ``file://`` URL must escape; ``"p%20q"`` (a name that looks escaped) apart.
DIRECTORIES = ["my data", "100% done", "a#b", "q?x", "ünïcode", "x[1]"]


def write_netcdf(path: Path) -> Path:
    """A netCDF4 file with two zlib chunks, too large for the parser to inline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 40_000)
        v = ds.createVariable("v", "f4", ("x",), zlib=True, chunksizes=(20_000,))
        v[:] = np.random.default_rng(0).random(40_000).astype("f4")
    return path


def netcdf_values(path: Path) -> np.ndarray[Any, Any]:
    """The file's ``v`` as netCDF4 reads it."""
    with netCDF4.Dataset(path) as ds:
        return np.asarray(ds["v"][:])
