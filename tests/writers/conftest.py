"""A small archive written by real writers, virtualized, for the writer round trips."""

from pathlib import Path

import pytest
import xarray as xr

from virtualstac import open_virtual_dataset
from virtualstac.demo import write_sample_archive


@pytest.fixture
def archive(tmp_path: Path) -> list[Path]:
    """Two daily netCDF4 files (zlib + shuffle, CF packing, time coordinates)."""
    return write_sample_archive(tmp_path / "archive", days=2)


@pytest.fixture
def virtual(archive: list[Path]) -> xr.Dataset:
    """The two files as one virtual dataset along time."""
    parts = [open_virtual_dataset(str(path)) for path in archive]
    return xr.concat(parts, dim="time", coords="minimal", compat="override")


@pytest.fixture
def direct(archive: list[Path]) -> xr.Dataset:
    """The same files read by netCDF4, the reference reader."""
    with xr.open_mfdataset(archive, engine="netcdf4", combine="by_coords") as ds:
        return ds.load()
