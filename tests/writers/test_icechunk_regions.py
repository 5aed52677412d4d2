"""Writing one group in regions: layouts stacked, metadata written once, each batch into a fork.

This is what a cluster's workers do (tests/stac/test_publish_distributed.py runs it on one);
here the forks are pickled and merged in this process, and the result must read like netCDF4.
"""

import pickle
from pathlib import Path

import icechunk
import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import open_virtual_dataset
from virtualstac.demo import write_sample_archive
from virtualstac.errors import IncompatibleArraysError
from virtualstac.manifests import ManifestGroup
from virtualstac.writers import authorize_containers, ensure_containers, required_containers
from virtualstac.writers.icechunk_regions import (
    Layout,
    stack_layouts,
    write_layout,
    write_region,
)


def repository_for(path: Path, sources: set[str]) -> icechunk.Repository:
    containers = required_containers(sources)
    return icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)),
        config=ensure_containers(icechunk.RepositoryConfig.default(), containers),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )


def write_in_regions(
    repository: icechunk.Repository, groups: list[ManifestGroup], *, append: bool = False
) -> str:
    stacked, starts = stack_layouts([Layout.of(group) for group in groups], "time", "the test")
    session = repository.writable_session("main")
    places = write_layout(stacked, session.store, append_dim="time" if append else None)
    forks = []
    for number, (group, start) in enumerate(zip(groups, starts, strict=True)):
        fork = pickle.loads(pickle.dumps(session.fork()))  # as it travels to a worker
        write_region(group, fork.store, dim="time", places=places, start=start, first=number == 0)
        forks.append(pickle.loads(pickle.dumps(fork)))  # and back
    session.merge(*forks)
    return str(session.commit("in regions", metadata=stacked.summary().as_metadata()))


def read(repository: icechunk.Repository) -> xr.Dataset:
    session = repository.readonly_session(branch="main")
    return xr.open_zarr(session.store, consolidated=False, zarr_format=3, chunks=None)


def test_batches_written_into_forks_read_like_netcdf4(tmp_path: Path) -> None:
    archive = write_sample_archive(tmp_path / "archive", days=4)
    groups = [open_virtual_dataset(str(path)).virtual.to_group() for path in archive]
    repository = repository_for(tmp_path / "repo", {path.as_uri() for path in archive})
    snapshot = write_in_regions(repository, groups[:3])
    write_in_regions(repository, groups[3:], append=True)
    with xr.open_mfdataset(archive, engine="netcdf4", combine="by_coords") as direct:
        xr.testing.assert_identical(read(repository).load(), direct.load())
    metadata = next(iter(repository.ancestry(snapshot_id=snapshot))).metadata
    assert metadata["virtualstac.sources"] == 3
    # t2m: 4 chunks along time per file, 2 x 2 in space; the coordinates are inlined.
    assert metadata["virtualstac.references"] == 3 * 16


def test_batches_that_differ_outside_their_length_are_refused(tmp_path: Path) -> None:
    archive = write_sample_archive(tmp_path / "archive", days=2)
    first, second = (open_virtual_dataset(str(path)) for path in archive)
    moved = second.assign_coords(lat=second["lat"] + 1)
    with pytest.raises(IncompatibleArraysError, match="'lat' differs between batch 0 and batch 1"):
        stack_layouts(
            [Layout.of(first.virtual.to_group()), Layout.of(moved.virtual.to_group())],
            "time",
            "the test",
        )
    second["time"].encoding["units"] = "hours since 2024-01-02 00:00:00"
    with pytest.raises(IncompatibleArraysError, match=r"cannot stack 'time'.*attribute 'units'"):
        stack_layouts(
            [Layout.of(first.virtual.to_group()), Layout.of(second.virtual.to_group())],
            "time",
            "the test",
        )


def test_a_batch_ending_inside_a_chunk_is_refused(tmp_path: Path) -> None:
    """Ten steps in chunks of six: the next batch's first chunk would land at step 6, not 10."""
    paths = []
    for number, steps in enumerate((10, 12)):
        path = tmp_path / f"part{number}.nc"
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("time", None)
            nc.createDimension("x", 40)  # big enough to be referenced, not inlined
            variable = nc.createVariable("v", "f4", ("time", "x"), chunksizes=(6, 40))
            variable[:] = np.arange(steps * 40, dtype="f4").reshape(steps, 40)
        paths.append(path)
    groups = [open_virtual_dataset(str(path)).virtual.to_group() for path in paths]
    with pytest.raises(IncompatibleArraysError, match="batch 0 of 'v' holds 10 steps"):
        stack_layouts([Layout.of(group) for group in groups], "time", "the test")
