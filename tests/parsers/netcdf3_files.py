"""netCDF3 test files (CDF-1, CDF-2, CDF-5), written by netCDF4-python."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np

FORMATS = ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA"]


def write_everything(path: Path, fmt: str) -> Path:
    """A file with every type the format allows, record and fixed variables, chars, scalars."""
    rng = np.random.default_rng(1)
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("time", None)
        ds.createDimension("lat", 6)
        ds.createDimension("lon", 10)
        ds.createDimension("strlen", 7)
        ds.title = "everything"
        ds.history = "written by netCDF4-python"
        ds.version = np.int32(3)
        ds.valid = np.array([1.5, 2.5])
        ds.flags = np.array([1, 2, 4], dtype="i1")
        time = ds.createVariable("time", "f8", ("time",))
        time.units = "hours since 2000-01-01 00:00"
        time.calendar = "standard"
        time[:] = np.arange(5) * 6.0
        lat = ds.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lat[:] = np.linspace(-50, 50, 6)
        lon = ds.createVariable("lon", "f8", ("lon",))
        lon[:] = np.linspace(0, 360, 10, endpoint=False)
        temp = ds.createVariable("temp", "i2", ("time", "lat", "lon"), fill_value=-999)
        temp.scale_factor = np.float32(0.01)
        temp.add_offset = np.float32(273.15)
        temp.units = "K"
        temp.valid_range = np.array([-5000, 5000], dtype="i2")
        temp[:] = rng.normal(0, 10, (5, 6, 10))
        temp[2, 0, 0] = np.ma.masked
        precip = ds.createVariable("precip", "f4", ("time", "lat", "lon"), fill_value=np.nan)
        values = rng.random((5, 6, 10)).astype("f4")
        values[1, 2, 3] = np.nan
        precip[:] = values
        counts = ds.createVariable("counts", "i4", ("lat", "lon"))
        counts.missing_value = np.int32(-1)
        counts[:] = rng.integers(-1, 100, (6, 10))
        ds.createVariable("level", "f8", ())[...] = 850.0
        byte = ds.createVariable("quality", "i1", ("lat",))
        byte._Unsigned = "true"
        byte.set_auto_maskandscale(False)
        byte[:] = np.array([0, 1, -1, -128, 127, 5], dtype="i1")
        names = ds.createVariable("station", "S1", ("lat", "strlen"))
        names[:] = netCDF4.stringtochar(
            np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta7ch"], dtype="S7")
        )
        encoded = ds.createVariable("city", "S1", ("lat", "strlen"))
        encoded._Encoding = "utf-8"
        # With _Encoding, netCDF4-python encodes strings to UTF-8 characters itself.
        encoded[:] = np.array(["Zürich", "Oslo", "Köln", "", "Nîmes", "Rome"], dtype="U7")
        label = ds.createVariable("label", "S1", ("time", "strlen"))
        label[:] = netCDF4.stringtochar(np.array([f"rec{i}" for i in range(5)], dtype="S7"))
        if fmt == "NETCDF3_64BIT_DATA":
            for dtype in ("u1", "u2", "u4", "i8", "u8"):
                variable = ds.createVariable(f"v_{dtype}", dtype, ("time", "lon"))
                info = np.iinfo(dtype)
                variable[:] = np.linspace(info.min, info.max // 2, 50).astype(dtype).reshape(5, 10)
            ds.createVariable("filled_u8", "u8", ("lat",), fill_value=np.uint64(7))[:3] = 1
            ds.big_int = np.int64(2**40)
    return path
