"""netCDF files, written by the netCDF4 library, whose text variables have a ``_FillValue``."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np


def write_character_fills(path: Path, fmt: str) -> Path:
    """Character variables with a ``_FillValue``, along a string length and without one, with
    unwritten elements (which read as the fill) and a string written as the fill itself."""
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("station", 3)
        ds.createDimension("strlen", 4)
        names = ds.createVariable("names", "S1", ("station", "strlen"), fill_value=b"?")
        names[:2] = netCDF4.stringtochar(np.array([b"one", b"?"], dtype="S4"))
        flags = ds.createVariable("flags", "S1", ("station",), fill_value=b"?")
        flags[0], flags[2] = b"a", b"c"
    return path


def write_string_fills(path: Path) -> Path:
    """netCDF-4 strings with a ``_FillValue``: unwritten elements (which read as the fill), a
    string written as the fill itself, and a string variable without one beside them."""
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("station", 4)
        names = ds.createVariable("names", str, ("station",), fill_value="N/A")
        names[0], names[1], names[3] = "one", "N/A", "four"
        ds.createVariable("labels", str, ("station",))[0] = "a"
    return path
