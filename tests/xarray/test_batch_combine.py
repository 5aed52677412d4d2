"""Many files joined a batch at a time where they are parsed: the result is xarray's.

``open_virtual_mfdataset`` joins each batch of alike files in the worker that parsed it and the
caller joins the batches; these tests compare that with opening every file and combining them
all at once with ``xr.combine_nested`` / ``xr.combine_by_coords``, for every kind of executor.
"""

import gc
import multiprocessing
import pickle
import random
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import open_virtual_dataset, open_virtual_mfdataset
from virtualstac.errors import VirtualStacError
from virtualstac.parallel import SerialExecutor
from virtualstac.xarray.batch_combine import Partial, open_batch

FILES = 11
OPTIONS: dict[str, Any] = {
    "coords": "minimal",
    "compat": "override",
    "combine_attrs": "drop_conflicts",
}


def write_day(path: Path, day: int, attrs: dict[str, str], name: str = "air temperature") -> Path:
    """One day of two six-hourly steps on a 4 x 5 grid, as the netCDF4 library writes it."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.setncatts(attrs)
        nc.createDimension("time", None)
        nc.createDimension("lat", 4)
        nc.createDimension("lon", 5)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "hours since 2024-01-01"
        time[:] = [24.0 * day, 24.0 * day + 6]
        nc.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-45, 45, 4)
        nc.createVariable("lon", "f4", ("lon",))[:] = np.linspace(0, 160, 5)
        tas = nc.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True, shuffle=True)
        tas.units = "K"
        tas.long_name = name
        tas[:] = np.full((2, 4, 5), 270.0 + day, dtype="f4")
    return path


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Daily files whose attributes agree in some batches and not in others: ``history``
    differs between the first two files (the first batch of every executor), ``source`` is
    in two files only, and ``tas:long_name`` differs in the last file."""
    directory = tmp_path_factory.mktemp("days")
    paths = []
    for day in range(FILES):
        attrs = {"title": "daily tas", "history": "written" if day else "rewritten"}
        if day in (3, 7):
            attrs["source"] = "model A"
        name = "near-surface air temperature" if day == FILES - 1 else "air temperature"
        paths.append(str(write_day(directory / f"day_{day:02d}.nc", day, attrs, name)))
    return paths


def reference(paths: list[str], combine: str) -> xr.Dataset:
    """Every file opened, then combined at once by xarray."""
    datasets = [open_virtual_dataset(p) for p in paths]
    if combine == "nested":
        return xr.combine_nested(datasets, concat_dim="time", **OPTIONS)
    combined = xr.combine_by_coords(datasets, **OPTIONS)
    assert isinstance(combined, xr.Dataset)
    return combined


def assert_same(combined: xr.Dataset, expected: xr.Dataset) -> None:
    xr.testing.assert_identical(combined, expected)
    assert combined.encoding == expected.encoding
    for name, variable in expected.variables.items():
        assert combined[name].encoding == variable.encoding, name
    assert combined.virtual.to_kerchunk() == expected.virtual.to_kerchunk()


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[Any]:
    """A dask.distributed cluster of two worker processes, one thread each."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def forkserver_pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver"))


EXECUTORS: dict[str, Callable[[], Any]] = {
    "serial": lambda: False,
    "threads": lambda: ThreadPoolExecutor(3),
    "processes": forkserver_pool,
}


def executor(name: str, request: pytest.FixtureRequest) -> Any:
    if name == "cluster":
        return request.getfixturevalue("cluster_client")
    return EXECUTORS[name]()


@pytest.mark.parametrize("combine", ["nested", "by_coords"])
@pytest.mark.parametrize("name", [*EXECUTORS, "cluster"])
def test_batches_joined_by_workers_give_xarrays_result(
    days: list[str], name: str, combine: str, request: pytest.FixtureRequest
) -> None:
    parallel = executor(name, request)
    concat = {"concat_dim": "time"} if combine == "nested" else {}
    combined = open_virtual_mfdataset(
        days, combine=combine, parallel=parallel, progress=False, **concat, **OPTIONS
    )
    if isinstance(parallel, Executor):
        parallel.shutdown()

    expected = reference(days, combine)
    assert_same(combined, expected)
    # The attributes one batch's files disagree on stay dropped whatever the other batches
    # say; those no two files disagree on are kept.
    assert "history" not in combined.attrs
    assert combined.attrs["source"] == "model A"
    assert "long_name" not in combined["tas"].attrs


def test_files_given_out_of_order_are_combined_by_coords_in_order(days: list[str]) -> None:
    shuffled = list(days)
    random.Random(3).shuffle(shuffled)

    with ThreadPoolExecutor(2) as pool:
        combined = open_virtual_mfdataset(shuffled, parallel=pool, progress=False, **OPTIONS)

    assert_same(combined, reference(days, "by_coords"))
    assert combined.indexes["time"].is_monotonic_increasing


def with_height_on_day_5(ds: xr.Dataset) -> xr.Dataset:
    """A scalar coordinate on one file only: its batch cannot be joined, the others can."""
    return ds.assign_coords(height=2.0) if float(ds["time"][0]) == 24.0 * 5 else ds


@pytest.mark.parametrize("combine", ["nested", "by_coords"])
def test_files_that_are_not_alike_are_combined_one_by_one(days: list[str], combine: str) -> None:
    concat = {"concat_dim": "time"} if combine == "nested" else {}
    with ThreadPoolExecutor(2) as pool:
        combined = open_virtual_mfdataset(
            days,
            combine=combine,
            parallel=pool,
            preprocess=with_height_on_day_5,
            progress=False,
            decode_times=False,
            **concat,
            **OPTIONS,
        )

    datasets = [with_height_on_day_5(open_virtual_dataset(p, decode_times=False)) for p in days]
    if combine == "nested":
        expected = xr.combine_nested(datasets, concat_dim="time", **OPTIONS)
    else:
        expected = xr.combine_by_coords(datasets, **OPTIONS)
    assert_same(combined, expected)
    assert "height" in combined.coords


def test_files_not_alike_in_batches_of_one_are_parsed_once(days: list[str]) -> None:
    opened: list[float] = []

    def counting(ds: xr.Dataset) -> xr.Dataset:
        opened.append(float(ds["time"][0]))
        return with_height_on_day_5(ds)

    with ThreadPoolExecutor(3) as pool:  # 12 batches for 11 files
        combined = open_virtual_mfdataset(
            days,
            combine="nested",
            concat_dim="time",
            parallel=pool,
            preprocess=counting,
            progress=False,
            decode_times=False,
            **OPTIONS,
        )

    assert sorted(opened) == [24.0 * day for day in range(FILES)]
    assert combined.sizes["time"] == 2 * FILES


@pytest.mark.parametrize("name", ["processes", "cluster"])
def test_a_damaged_file_in_a_batch_is_named(
    days: list[str], tmp_path: Path, name: str, request: pytest.FixtureRequest
) -> None:
    damaged = tmp_path / "day_04.nc"
    damaged.write_bytes(Path(days[4]).read_bytes()[:2000])
    paths = [*days[:4], str(damaged), *days[5:]]
    parallel = executor(name, request)

    with pytest.raises(VirtualStacError, match=str(damaged)):
        open_virtual_mfdataset(
            paths, combine="nested", concat_dim="time", parallel=parallel, progress=False
        )
    if isinstance(parallel, Executor):
        parallel.shutdown()


def test_a_worker_sends_back_one_dataset_per_batch(days: list[str]) -> None:
    task = {"virtualize": open_virtual_dataset, "options": OPTIONS}
    per_file = [open_virtual_dataset(p) for p in days]

    joined = open_batch(days, dim="time", **task)
    by_coords = open_batch(list(reversed(days)), dim=None, **task)

    assert isinstance(joined, Partial) and joined.files == FILES
    assert isinstance(by_coords, Partial) and by_coords.dim == "time"
    xr.testing.assert_identical(by_coords.dataset, joined.dataset)
    # What the caller receives and keeps: one dataset, not one per file.
    assert len(pickle.dumps(joined)) < sum(len(pickle.dumps(d)) for d in per_file) / 3


def test_the_progress_bar_counts_files_a_batch_at_a_time(
    days: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    open_virtual_mfdataset(days, parallel=SerialExecutor(), progress=True)
    assert f"virtualizing: {FILES}/{FILES}" in capsys.readouterr().err


def test_a_batch_is_opened_without_garbage_collections(days: list[str]) -> None:
    # Each collection would rescan every long-lived object (the libraries' and the batch's
    # datasets so far) to free about a kilobyte of cycles per file: a tenth of the batch's time.
    collector_on: list[bool] = []

    def virtualize(url: str) -> xr.Dataset:
        collector_on.append(gc.isenabled())
        return open_virtual_dataset(url)

    open_batch(days, dim="time", virtualize=virtualize, options=OPTIONS)

    assert collector_on == [False] * FILES
    assert gc.isenabled()
