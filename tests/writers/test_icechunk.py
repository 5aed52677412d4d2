"""Icechunk output: round trips, change detection, appends, containers, and clean failures."""

import os
import subprocess
import sys
from pathlib import Path

import icechunk
import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import open_virtual_dataset, open_virtual_datatree
from virtualstac.demo import write_sample_archive
from virtualstac.errors import IncompatibleArraysError
from virtualstac.writers import (
    IcechunkWriteError,
    authorize_containers,
    ensure_containers,
    required_containers,
)


def create_repository(path: Path, dataset: xr.Dataset) -> icechunk.Repository:
    """A repository that declares exactly the containers ``dataset`` needs."""
    containers = required_containers(dataset.virtual.to_group())
    config = ensure_containers(icechunk.RepositoryConfig.default(), containers)
    return icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)),
        config=config,
        authorize_virtual_chunk_access=authorize_containers(containers),
    )


def open_published(path: Path) -> xr.Dataset:
    """Open a repository as a reader does: authorize the containers its config declares."""
    storage = icechunk.local_filesystem_storage(str(path))
    config = icechunk.Repository.fetch_config(storage)
    assert config is not None
    credentials = {
        prefix: icechunk.credentials.LocalFileSystemAccess
        for prefix in config.virtual_chunk_containers
    }
    repository = icechunk.Repository.open(
        storage, authorize_virtual_chunk_access=icechunk.containers_credentials(credentials)
    )
    return xr.open_zarr(repository.readonly_session("main").store, consolidated=False)


def test_round_trip_and_commit_metadata(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    repository = create_repository(tmp_path / "repo", virtual)
    session = repository.writable_session("main")
    snapshot = virtual.virtual.to_icechunk(session.store, commit="two days of t2m")
    xr.testing.assert_identical(open_published(tmp_path / "repo").load(), direct)
    info = next(iter(repository.ancestry(snapshot_id=snapshot)))
    assert info.message == "two days of t2m"
    assert info.metadata["virtualstac.sources"] == 2
    assert info.metadata["virtualstac.references"] == 32


def test_commits_stamp_local_sources_to_the_nanosecond(
    tmp_path: Path, virtual: xr.Dataset, archive: list[Path]
) -> None:
    repository = create_repository(tmp_path / "repo", virtual)
    session = repository.writable_session("main")
    snapshot = virtual.virtual.to_icechunk(session.store, commit="stamped")

    stamps = next(iter(repository.ancestry(snapshot_id=snapshot))).metadata[
        "virtualstac.local_files"
    ]
    assert stamps == {
        path.as_uri(): [path.stat().st_size, path.stat().st_mtime_ns] for path in archive
    }


def test_only_the_needed_prefix_is_declared(
    tmp_path: Path, virtual: xr.Dataset, archive: list[Path]
) -> None:
    repository = create_repository(tmp_path / "repo", virtual)
    declared = list(repository.config.virtual_chunk_containers)
    assert declared == [archive[0].parent.as_uri() + "/"]


def test_reading_a_changed_source_fails(
    tmp_path: Path, virtual: xr.Dataset, archive: list[Path]
) -> None:
    repository = create_repository(tmp_path / "repo", virtual)
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="first")
    later = archive[0].stat().st_mtime + 5
    os.utime(archive[0], (later, later))
    with pytest.raises(icechunk.IcechunkError, match="has changed"):
        open_published(tmp_path / "repo")["t2m"].load()


def test_append_along_time(
    tmp_path: Path, archive: list[Path], virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    first, second = (open_virtual_dataset(str(path)) for path in archive)
    repository = create_repository(tmp_path / "repo", virtual)
    first.virtual.to_icechunk(repository.writable_session("main").store, commit="day 1")
    second.virtual.to_icechunk(
        repository.writable_session("main").store, append_dim="time", commit="day 2"
    )
    xr.testing.assert_identical(open_published(tmp_path / "repo").load(), direct)

    session = repository.writable_session("main")
    with pytest.raises(IncompatibleArraysError, match="already references"):
        second.virtual.to_icechunk(session.store, append_dim="time")
    assert not session.has_uncommitted_changes


# Icechunk checks each reference against its source's last-modified time in whole seconds, and
# takes one such checksum per call: files modified within the same second share a call.
SAME_SECOND = (1_700_000_000.2, 1_700_000_000.7)
SECONDS_APART = (1_700_000_000.0, 1_700_000_100.0)


def set_mtimes(paths: list[Path], mtimes: tuple[float, ...]) -> None:
    for path, mtime in zip(paths, mtimes, strict=True):
        os.utime(path, (mtime, mtime))


@pytest.mark.parametrize("mtimes", [SAME_SECOND, SECONDS_APART], ids=["same", "apart"])
def test_sources_whose_chunks_interleave_round_trip(
    tmp_path: Path, archive: list[Path], direct: xr.Dataset, mtimes: tuple[float, ...]
) -> None:
    """A file referenced on both sides of another one spans the other's chunks in the grid."""
    set_mtimes(archive, mtimes)
    first, second = (open_virtual_dataset(str(path)) for path in archive)
    virtual = xr.concat([first, second, first], dim="time", coords="minimal", compat="override")
    repository = create_repository(tmp_path / "repo", virtual)
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="a b a")
    day = direct.isel(time=slice(0, 24))
    expected = xr.concat([day, direct.isel(time=slice(24, 48)), day], dim="time")
    xr.testing.assert_identical(open_published(tmp_path / "repo").load(), expected)


@pytest.mark.parametrize("order", [(0, 1, 1, 1, 2), (0, 1, 2, 0)], ids=["far", "near"])
def test_files_sharing_a_checksum_around_another_round_trip(
    tmp_path: Path, order: tuple[int, ...]
) -> None:
    """The first and last file share a checksum; another file's chunks lie between theirs."""
    days = write_sample_archive(tmp_path / "archive", days=3)
    set_mtimes(days, (SAME_SECOND[0], SECONDS_APART[1], SAME_SECOND[1]))
    parts = [open_virtual_dataset(str(path)) for path in days]
    virtual = xr.concat([parts[i] for i in order], dim="time", coords="minimal", compat="override")
    repository = create_repository(tmp_path / "repo", virtual)
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="mixed")
    with xr.open_mfdataset(days, engine="netcdf4", combine="by_coords") as direct:
        each = [direct.isel(time=slice(24 * d, 24 * (d + 1))).load() for d in range(3)]
    expected = xr.concat([each[i] for i in order], dim="time")
    xr.testing.assert_identical(open_published(tmp_path / "repo").load(), expected)


@pytest.mark.parametrize("mtimes", [SAME_SECOND, SECONDS_APART], ids=["same", "apart"])
def test_a_changed_source_fails_only_its_own_chunks(
    tmp_path: Path, archive: list[Path], direct: xr.Dataset, mtimes: tuple[float, ...]
) -> None:
    set_mtimes(archive, mtimes)
    first, second = (open_virtual_dataset(str(path)) for path in archive)
    virtual = xr.concat([first, second], dim="time", coords="minimal", compat="override")
    repository = create_repository(tmp_path / "repo", virtual)
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="two days")
    later = mtimes[1] + 5
    os.utime(archive[1], (later, later))
    published = open_published(tmp_path / "repo")
    day_one = published["t2m"].isel(time=slice(0, 24)).load()
    xr.testing.assert_identical(day_one, direct["t2m"].isel(time=slice(0, 24)))
    with pytest.raises(icechunk.IcechunkError, match="has changed"):
        published["t2m"].isel(time=slice(24, 48)).load()


def test_appending_different_packing_is_refused(
    tmp_path: Path, archive: list[Path], virtual: xr.Dataset
) -> None:
    first, second = (open_virtual_dataset(str(path)) for path in archive)
    second["t2m"].attrs["scale_factor"] = 0.02
    repository = create_repository(tmp_path / "repo", virtual)
    first.virtual.to_icechunk(repository.writable_session("main").store, commit="day 1")
    with pytest.raises(IncompatibleArraysError, match="scale_factor"):
        second.virtual.to_icechunk(repository.writable_session("main").store, append_dim="time")


def test_a_failed_write_leaves_the_session_untouched(tmp_path: Path, virtual: xr.Dataset) -> None:
    storage = icechunk.local_filesystem_storage(str(tmp_path / "bare"))
    repository = icechunk.Repository.create(storage)
    session = repository.writable_session("main")
    with pytest.raises(IcechunkWriteError, match=r"no virtual .* covers '.*temperature_2024"):
        virtual.virtual.to_icechunk(session.store)
    assert not session.has_uncommitted_changes


def test_published_store_opens_without_virtualstac(
    tmp_path: Path, virtual: xr.Dataset, archive: list[Path]
) -> None:
    """icechunk and zarr alone read the references: no virtualstac code is imported."""
    repository = create_repository(tmp_path / "repo", virtual)
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="publish")
    script = f"""
import sys, icechunk, zarr
storage = icechunk.local_filesystem_storage({str(tmp_path / "repo")!r})
prefixes = icechunk.Repository.fetch_config(storage).virtual_chunk_containers
access = {{p: icechunk.credentials.LocalFileSystemAccess for p in prefixes}}
credentials = icechunk.containers_credentials(access)
repo = icechunk.Repository.open(storage, authorize_virtual_chunk_access=credentials)
packed = zarr.open_group(repo.readonly_session("main").store, mode="r")["t2m"][:]
assert "virtualstac" not in sys.modules, "virtualstac was imported"
sys.stdout.buffer.write(packed.tobytes())
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
    packed = np.frombuffer(result.stdout, dtype="<i2").reshape(48, 90, 180)
    import netCDF4

    for day, path in enumerate(archive):
        with netCDF4.Dataset(path) as nc:
            nc.set_auto_maskandscale(False)
            np.testing.assert_array_equal(packed[24 * day : 24 * (day + 1)], nc["t2m"][:])


def test_containers_are_the_narrowest_per_bucket() -> None:
    urls = [
        "s3://bucket-a/data/2024/01/a.nc",
        "s3://bucket-a/data/2024/02/b.nc",
        "s3://bucket-b/x/c.nc",
        "https://example.com/files/d.tif",
    ]
    prefixes = [spec.prefix for spec in required_containers(urls)]
    assert prefixes == [
        "https://example.com/files/",
        "s3://bucket-a/data/2024/",
        "s3://bucket-b/x/",
    ]


def test_loaded_variables_are_written_as_native_chunks(tmp_path: Path, virtual: xr.Dataset) -> None:
    repository = create_repository(tmp_path / "repo", virtual)
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="c")
    session = repository.readonly_session("main")
    assert str(session.chunk_type("/time", [0])).lower().endswith(("inline", "native"))
    assert str(session.chunk_type("/t2m", [0, 0, 0])).lower().endswith("virtual")
    np.testing.assert_array_equal(
        open_published(tmp_path / "repo")["time"].values, virtual["time"].values
    )


def write_day(path: Path, day: int, **options: object) -> Path:
    """One day of hourly values in a netCDF4 file; ``options`` change how ``v`` is stored."""
    import netCDF4

    settings: dict[str, object] = {
        "datatype": "i2",
        "zlib": True,
        "complevel": 4,
        "chunksizes": (6, 20),
        "hours": 24,
        "width": 40,
        **options,
    }
    hours, width = int(settings.pop("hours")), int(settings.pop("width"))  # type: ignore[call-overload]
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", width)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "hours since 2024-01-01"
        time[:] = np.arange(hours) + 24 * day
        nc.createVariable("x", "i4", ("x",))[:] = np.arange(width)
        v = nc.createVariable("v", dimensions=("time", "x"), **settings)  # type: ignore[arg-type]
        v[:] = np.arange(hours * width).reshape(hours, width) % 100
    return path


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"complevel": 9}, r"appended array \(\S+day2.nc\) has .*'level': 9.*one codec chain"),
        ({"zlib": False}, r"appended array \(\S+day2.nc\) has .*bytes.*one codec chain"),
        (
            {"chunksizes": (4, 20)},
            r"chunk shape \(6, 20\), the appended array \(\S+\) has \(4, 20\)",
        ),
        ({"datatype": "i4"}, r"repository's array has data type int16, the appended .* has int32"),
        ({"width": 44}, r"shape \(24, 44\) does not match \(24, 40\)"),
    ],
)
def test_appending_an_array_stored_differently_is_refused(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    first = open_virtual_dataset(str(write_day(tmp_path / "day1.nc", 0)))
    other = open_virtual_dataset(str(write_day(tmp_path / "day2.nc", 1, **options)))
    repository = create_repository(tmp_path / "repo", first)
    first.virtual.to_icechunk(repository.writable_session("main").store, commit="day 1")
    session = repository.writable_session("main")
    with pytest.raises(IncompatibleArraysError, match=message):
        other.virtual.to_icechunk(session.store, append_dim="time")
    assert not session.has_uncommitted_changes


def test_appending_after_a_partial_last_chunk_is_refused(tmp_path: Path) -> None:
    first = open_virtual_dataset(str(write_day(tmp_path / "day1.nc", 0, hours=20)))
    second = open_virtual_dataset(str(write_day(tmp_path / "day2.nc", 1)))
    repository = create_repository(tmp_path / "repo", first)
    first.virtual.to_icechunk(repository.writable_session("main").store, commit="day 1")
    with pytest.raises(IncompatibleArraysError, match=r"length 20 along 'time' is not a multiple"):
        second.virtual.to_icechunk(repository.writable_session("main").store, append_dim="time")


@pytest.mark.parametrize("hours", [(24, 24, 24), (24, 12, 18)], ids=["equal", "unequal"])
def test_appended_days_read_as_the_files(tmp_path: Path, hours: tuple[int, ...]) -> None:
    # The loaded time coordinate is one chunk as long as its file (24, then 12, then 18 steps):
    # appended as to_zarr appends, into the repository's chunks, whatever their lengths.
    paths = [write_day(tmp_path / f"day{d}.nc", d, hours=h) for d, h in enumerate(hours)]
    datasets = [open_virtual_dataset(str(p)) for p in paths]
    repository = create_repository(tmp_path / "repo", datasets[0])
    datasets[0].virtual.to_icechunk(repository.writable_session("main").store, commit="day 0")
    for day, dataset in enumerate(datasets[1:], start=1):
        dataset.virtual.to_icechunk(
            repository.writable_session("main").store, append_dim="time", commit=f"day {day}"
        )
    with xr.open_mfdataset(paths, engine="netcdf4", combine="by_coords") as expected:
        xr.testing.assert_identical(open_published(tmp_path / "repo").load(), expected.load())
    messages = [info.message for info in repository.ancestry(branch="main")]
    assert messages[:3] == ["day 2", "day 1", "day 0"]


def test_loaded_times_in_other_units_are_appended_in_the_repositorys(tmp_path: Path) -> None:
    # A file counting its times in other units (its own start, or minutes) appends as with
    # to_zarr: its times are encoded in the units and calendar the repository holds.
    paths = [write_day(tmp_path / "day0.nc", 0), write_day(tmp_path / "day1.nc", 1, hours=12)]
    first, second = (open_virtual_dataset(str(p)) for p in paths)
    second["time"].encoding["units"] = "minutes since 2024-01-02"
    repository = create_repository(tmp_path / "repo", first)
    first.virtual.to_icechunk(repository.writable_session("main").store, commit="day 0")
    second.virtual.to_icechunk(
        repository.writable_session("main").store, append_dim="time", commit="day 1"
    )
    published = open_published(tmp_path / "repo")
    assert published["time"].encoding["units"] == "hours since 2024-01-01"
    with xr.open_mfdataset(paths, engine="netcdf4", combine="by_coords") as expected:
        xr.testing.assert_identical(published.load(), expected.load())


def write_day_with_a_group(path: Path, day: int, steps: int) -> Path:
    """A day of ``steps`` values at the root and in group ``g``, its times counted from it."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 1000)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = f"hours since 2024-01-{1 + day:02d}"
        time[:] = np.arange(steps)
        top = nc.createVariable("top", "f4", ("time", "x"), chunksizes=(1, 1000))
        top[:] = np.arange(steps * 1000).reshape(steps, 1000) + day
        group = nc.createGroup("g")
        inner = group.createVariable("inner", "f4", ("time", "x"), chunksizes=(1, 1000))
        inner[:] = np.arange(steps * 1000).reshape(steps, 1000) - day
    return path


def test_a_tree_appends_its_times_in_the_repositorys_units(tmp_path: Path) -> None:
    paths = [write_day_with_a_group(tmp_path / f"day{d}.nc", d, 4 - d) for d in range(2)]
    first, second = (open_virtual_datatree(str(p)) for p in paths)
    repository = create_repository(tmp_path / "repo", first.to_dataset())
    first.virtual.to_icechunk(repository.writable_session("main").store, commit="day 0")
    second.virtual.to_icechunk(
        repository.writable_session("main").store, append_dim="time", commit="day 1"
    )
    published = xr.open_datatree(
        repository.readonly_session("main").store, engine="zarr", consolidated=False
    )
    expected = [xr.open_datatree(p, engine="netcdf4") for p in paths]
    for name in ("time", "top", "g/inner"):
        joined = np.concatenate([tree[name].values for tree in expected])
        assert (published[name].values == joined).all()


def write_steps(path: Path, written: list[int], value: float) -> Path:
    """Four steps of ``v`` (one chunk each), of which only ``written`` are; and ``v2``."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", 4)
        nc.createDimension("x", 1000)
        v = nc.createVariable("v", "f4", ("time", "x"), chunksizes=(1, 1000), fill_value=-9.0)
        for step in written:
            v[step] = np.full(1000, value)
        nc.createVariable("v2", "f4", ("x",), chunksizes=(1000,))[:] = np.full(1000, value)
    return path


def test_an_array_written_again_is_replaced_whole(tmp_path: Path) -> None:
    # The array written again lacks chunks 0 and 2: they read as its fill value, never as the
    # chunks the array it replaces had there.
    full = open_virtual_dataset(write_steps(tmp_path / "full.nc", [0, 1, 2, 3], 100.0))
    sparse = write_steps(tmp_path / "sparse.nc", [1, 3], 1.0)
    repository = create_repository(tmp_path / "repo", full)
    full.virtual.to_icechunk(repository.writable_session("main").store, commit="full")
    again = open_virtual_dataset(sparse, loadable_variables=[], drop_variables=["v2"])
    again.virtual.to_icechunk(repository.writable_session("main").store, commit="sparse")
    published = open_published(tmp_path / "repo")
    with netCDF4.Dataset(sparse) as nc:
        expected = nc["v"][:].astype("f4").filled(np.nan)
    assert np.array_equal(published["v"].values, expected, equal_nan=True)
    assert np.isnan(published["v"].values[[0, 2]]).all()
    assert (published["v2"].values == 100).all()  # not written again: kept


def test_appending_a_variable_the_repository_lacks_is_refused(tmp_path: Path) -> None:
    # Created by the append, "extra" would hold 24 steps beside a time of 48: xarray could no
    # longer open the root ("conflicting sizes for dimension 'time'").
    first = open_virtual_dataset(str(write_day(tmp_path / "day0.nc", 0)))
    second = open_virtual_dataset(str(write_day(tmp_path / "day1.nc", 1)))
    second["extra"] = second["v"]
    repository = create_repository(tmp_path / "repo", first)
    first.virtual.to_icechunk(repository.writable_session("main").store, commit="day 0")
    session = repository.writable_session("main")
    with pytest.raises(IncompatibleArraysError, match="cannot append 'extra' along 'time'"):
        second.virtual.to_icechunk(session.store, append_dim="time")
    assert not session.has_uncommitted_changes
    xr.open_zarr(repository.readonly_session("main").store, consolidated=False)


def test_appending_without_a_variable_the_repository_has_is_refused(tmp_path: Path) -> None:
    # Left at 24 steps while the others grow to 48, "v" would keep the root from opening.
    first = open_virtual_dataset(str(write_day(tmp_path / "day0.nc", 0)))
    second = open_virtual_dataset(str(write_day(tmp_path / "day1.nc", 1)), drop_variables=["v"])
    repository = create_repository(tmp_path / "repo", first)
    first.virtual.to_icechunk(repository.writable_session("main").store, commit="day 0")
    session = repository.writable_session("main")
    with pytest.raises(IncompatibleArraysError, match="the repository's 'v' is not among"):
        second.virtual.to_icechunk(session.store, append_dim="time")
    assert not session.has_uncommitted_changes


def test_appending_on_another_grid_is_refused(tmp_path: Path) -> None:
    # "x" has no time: left as the repository holds it, it would label the new values with
    # the first file's positions.
    first = open_virtual_dataset(str(write_day(tmp_path / "day0.nc", 0)))
    second = open_virtual_dataset(str(write_day(tmp_path / "day1.nc", 1)))
    second = second.assign_coords(x=second["x"] + 1)
    repository = create_repository(tmp_path / "repo", first)
    first.virtual.to_icechunk(repository.writable_session("main").store, commit="day 0")
    session = repository.writable_session("main")
    with pytest.raises(IncompatibleArraysError, match="'x' has no such dimension and its values"):
        second.virtual.to_icechunk(session.store, append_dim="time")
    assert not session.has_uncommitted_changes


def test_a_dataset_written_into_a_nested_group_is_found_from_the_root(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    # zarr writes the groups above a node it creates; a Zarr v3 reader lists nothing below a
    # group no zarr.json declares, so the root and "model" must exist for the tree to open.
    repository = create_repository(tmp_path / "repo", virtual)
    virtual.virtual.to_icechunk(
        repository.writable_session("main").store, group="model/run 1", commit="run 1"
    )
    store = repository.readonly_session("main").store
    tree = xr.open_datatree(store, engine="zarr", consolidated=False)
    assert [node.path for node in tree.subtree] == ["/", "/model", "/model/run 1"]
    published = open_published(tmp_path / "repo")
    assert not published.variables
    reopened = xr.open_zarr(store, group="model/run 1", consolidated=False)
    xr.testing.assert_identical(reopened.load(), direct)


def test_a_scalar_array_reads_back_its_value(tmp_path: Path) -> None:
    # A 0-d array (xarray writes a CRS's spatial_ref as one) has one chunk with no indices:
    # zarr reads it from "c", not "c/0".
    import zarr

    source = tmp_path / "scalars.zarr"
    group = zarr.open_group(source, mode="w", zarr_format=3)
    group.create_array("level", shape=(), dtype="f4", fill_value=0)[...] = 3.5
    group.create_array("x", shape=(3,), dtype="i2", dimension_names=["x"])[:] = [1, 2, 3]
    virtual = open_virtual_dataset(str(source))
    repository = create_repository(tmp_path / "repo", virtual)
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="scalars")
    published = open_published(tmp_path / "repo").load()
    xr.testing.assert_identical(published, xr.open_zarr(source, consolidated=False).load())
    assert published["level"].item() == 3.5
