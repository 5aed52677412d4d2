"""open_virtual_dataset and open_virtual_mfdataset: loaded coordinates, executors, combining."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import open_virtual_dataset, open_virtual_mfdataset
from virtualstac.parsers import HDFParser


def write_step(path: Path, step: int) -> Path:
    """One time step of a netCDF4 file: time, lat and lon coordinates and a chunked variable."""
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("lat", 3)
        ds.createDimension("lon", 4)
        time = ds.createVariable("time", "f8", ("time",))
        time.units = "days since 2024-01-01"
        time[:] = [step]
        ds.createVariable("lat", "f4", ("lat",))[:] = [10, 20, 30]
        ds.createVariable("lon", "f4", ("lon",))[:] = [0, 90, 180, 270]
        t2m = ds.createVariable(
            "t2m", "f4", ("time", "lat", "lon"), zlib=True, chunksizes=(1, 3, 4)
        )
        t2m[:] = np.full((1, 3, 4), step, dtype="f4")
    return path


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    directory = tmp_path_factory.mktemp("steps")
    # More files than four per CPU, so that a process pool gets them in batches.
    return [str(write_step(directory / f"step{i}.nc", i)) for i in range(20)]


def test_dimension_coordinates_are_loaded_with_indexes(steps: list[str]) -> None:
    ds = open_virtual_dataset(steps[2], parser=HDFParser())

    assert set(ds.xindexes) == {"time", "lat", "lon"}
    assert ds["time"].values.astype("datetime64[D]").tolist() == [np.datetime64("2024-01-03")]
    np.testing.assert_array_equal(ds["lat"].values, [10, 20, 30])
    assert list(ds.data_vars) == ["t2m"]
    assert type(ds["t2m"].data).__name__ == "ManifestArray"


def test_virtual_coordinates_stay_without_index(steps: list[str]) -> None:
    ds = open_virtual_dataset(steps[0], parser=HDFParser(), loadable_variables=["lat"])

    assert set(ds.coords) == {"time", "lat", "lon"}
    assert set(ds.xindexes) == {"lat"}
    assert type(ds["time"].data).__name__ == "ManifestArray"


@pytest.mark.parametrize(
    "executor",
    [
        pytest.param(lambda: ThreadPoolExecutor(max_workers=3), id="threads"),
        # forkserver: forking a process whose obstore runtime has threads can deadlock.
        pytest.param(
            lambda: ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver")),
            id="processes",
        ),
    ],
)
def test_executors_give_the_serial_result(
    steps: list[str], executor: Callable[[], Executor]
) -> None:
    serial = open_virtual_mfdataset(steps, parser=HDFParser(), progress=False)
    with executor() as pool:
        parallel = open_virtual_mfdataset(steps, parser=HDFParser(), parallel=pool, progress=False)

    assert dict(parallel.sizes) == dict(serial.sizes) == {"time": 20, "lat": 3, "lon": 4}
    xr.testing.assert_identical(parallel.drop_vars("t2m"), serial.drop_vars("t2m"))
    assert parallel["t2m"].data.manifest == serial["t2m"].data.manifest
