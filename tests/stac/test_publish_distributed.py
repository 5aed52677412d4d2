"""Publishing to Icechunk on a real dask.distributed cluster: workers parse and write.

The cluster is two worker processes on this machine (``LocalCluster(processes=True)``). Its
scheduler gives up on a task at the first worker that dies with it (``allowed-failures`` 0), so
a worker killed while writing fails the publish at once; the kill is a worker plugin that ends
its process (``os._exit``) when a chosen write task starts. Values read back through plain
icechunk + xarray are compared with netCDF4 reading the files.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dask
import icechunk
import netCDF4
import numpy as np
import pystac
import pytest
import xarray as xr
from distributed import Client, LocalCluster, WorkerPlugin, get_task_stream

from virtualstac.cli import main
from virtualstac.demo import write_sample_archive
from virtualstac.errors import IncompatibleArraysError, WorkerLostError
from virtualstac.stac import publish
from virtualstac.stac.publish_distributed import batched

DAYS = 6


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.fixture
def archive(tmp_path: Path, make_item: Callable[..., pystac.Item]) -> list[pystac.Item]:
    """Six daily netCDF4 files of 24 hourly steps, one item each, saved beside them."""
    items = []
    for day, path in enumerate(write_sample_archive(tmp_path / "archive", days=DAYS)):
        item = make_item(
            path.stem, dt.datetime(2024, 1, day + 1, tzinfo=dt.UTC), {"data": (str(path), "")}
        )
        item.assets["data"].media_type = "application/x-netcdf"
        item.set_self_href(str(tmp_path / "items" / f"{path.stem}.json"))
        item.save_object(include_self_link=True)
        items.append(item)
    return items


def collection_of(items: list[pystac.Item], path: Path) -> pystac.Collection:
    collection = pystac.Collection("era", "hourly temperature", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    collection.set_self_href(str(path))
    return collection


def repository_of(target: Path) -> icechunk.Repository:
    """The repository, its containers (the directory of the files) authorized."""
    archive = target.parent / "archive"
    containers = icechunk.containers_credentials(
        {archive.as_uri() + "/": icechunk.credentials.LocalFileSystemAccess}
    )
    return icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(target)),
        authorize_virtual_chunk_access=containers,
    )


def read_back(target: Path) -> xr.Dataset:
    session = repository_of(target).readonly_session(branch="main")
    return xr.open_zarr(session.store, consolidated=False, zarr_format=3, chunks=None)


def expected_t2m(items: list[pystac.Item]) -> np.ndarray:
    parts = []
    for item in items:
        with netCDF4.Dataset(item.assets["data"].href) as nc:
            parts.append(np.ma.filled(nc["t2m"][:].astype("f8"), np.nan))
    return np.concatenate(parts)


def assert_published(target: Path, items: list[pystac.Item]) -> None:
    dataset = read_back(target)
    assert dataset.sizes["time"] == 24 * len(items)
    np.testing.assert_allclose(dataset["t2m"].values, expected_t2m(items), rtol=0, atol=1e-6)
    expected_times = np.datetime64("2024-01-01") + np.arange(24 * len(items)).astype(
        "timedelta64[h]"
    )
    np.testing.assert_array_equal(dataset["time"].values, expected_times)


def killing_write(batch: int) -> WorkerPlugin:
    """A plugin that ends its worker's process when the write task of ``batch`` starts.

    Defined here so that cloudpickle ships the class itself to the worker processes.
    """

    class DieWhileWriting(WorkerPlugin):
        name = "die-while-writing"

        def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
            if finish == "executing" and str(key).startswith(f"virtualstac-write-{batch}-"):
                os._exit(1)

    return DieWhileWriting()


def test_a_cluster_parses_and_writes_on_its_workers_and_commits_once(
    client: Client, archive: list[pystac.Item], tmp_path: Path
) -> None:
    collection = collection_of(archive, tmp_path / "collection.json")
    target = tmp_path / "era.icechunk"
    with get_task_stream(client) as stream:
        publish(collection, target, parallel=client)
    assert_published(target, archive)
    ran = {task["key"].split("-")[1] for task in stream.data if "virtualstac" in task["key"]}
    assert ran == {"parse", "layout", "write"}
    writers = {task["worker"] for task in stream.data if "virtualstac-write" in task["key"]}
    assert writers <= set(client.scheduler_info()["workers"])
    history = list(repository_of(target).ancestry(branch="main"))
    assert len(history) == 2  # the repository's initial commit and the publish
    assert history[0].metadata["virtualstac.sources"] == DAYS
    assert collection.assets["icechunk"].extra_fields["virtual:items"] == [
        item.id for item in archive
    ]


def test_new_items_append_on_the_cluster(
    client: Client, archive: list[pystac.Item], tmp_path: Path
) -> None:
    collection = collection_of(archive[:2], tmp_path / "collection.json")
    target = tmp_path / "era.icechunk"
    publish(collection, target, parallel=client)
    for item in archive[2:]:
        collection.add_item(item, set_parent=False)
    publish(collection, target, parallel=client)
    assert_published(target, archive)
    history = list(repository_of(target).ancestry(branch="main"))
    assert len(history) == 3
    assert collection.assets["icechunk"].extra_fields["version"] == history[0].id


def test_a_worker_killed_while_writing_changes_nothing_and_a_rerun_completes(
    client: Client, archive: list[pystac.Item], tmp_path: Path
) -> None:
    collection = collection_of(archive[:2], tmp_path / "collection.json")
    target = tmp_path / "era.icechunk"
    publish(collection, target, parallel=client)
    collection.save_object(include_self_link=False)
    saved = Path(collection.get_self_href() or "").read_text()
    recorded = json.dumps(collection.assets["icechunk"].to_dict(), sort_keys=True)
    head = repository_of(target).lookup_branch("main")
    for item in archive[2:]:
        collection.add_item(item, set_parent=False)
    client.register_plugin(killing_write(batch=2))
    try:
        with pytest.raises(WorkerLostError, match="nothing was committed"):
            publish(collection, target, parallel=client)
    finally:
        client.unregister_worker_plugin("die-while-writing")
    assert repository_of(target).lookup_branch("main") == head
    assert json.dumps(collection.assets["icechunk"].to_dict(), sort_keys=True) == recorded
    assert Path(collection.get_self_href() or "").read_text() == saved
    client.wait_for_workers(2)
    publish(collection, target, parallel=client)
    assert_published(target, archive)


def test_a_worker_killed_while_creating_the_repository_leaves_no_repository(
    client: Client, archive: list[pystac.Item], tmp_path: Path
) -> None:
    collection = collection_of(archive, tmp_path / "collection.json")
    target = tmp_path / "era.icechunk"
    client.register_plugin(killing_write(batch=3))
    try:
        with pytest.raises(WorkerLostError):
            publish(collection, target, parallel=client)
    finally:
        client.unregister_worker_plugin("die-while-writing")
    assert not target.exists()
    assert "icechunk" not in collection.assets
    assert sorted(path.name for path in tmp_path.iterdir()) == ["archive", "items"]
    client.wait_for_workers(2)
    publish(collection, target, parallel=client)
    assert_published(target, archive)


def test_the_command_line_publishes_on_a_scheduler_or_in_processes(
    client: Client, archive: list[pystac.Item], tmp_path: Path
) -> None:
    collection = collection_of(archive, tmp_path / "collection.json")
    collection.save_object(include_self_link=False)
    address = client.scheduler.address.removeprefix("tcp://")
    with get_task_stream(client) as stream:
        assert main(["publish", str(tmp_path / "collection.json"), str(tmp_path / "era.icechunk"),
                     "--parallel", f"dask://{address}", "--no-progress"]) == 0  # fmt: skip
    assert any("virtualstac-write" in task["key"] for task in stream.data)
    assert_published(tmp_path / "era.icechunk", archive)
    assert main(["publish", str(tmp_path / "collection.json"), str(tmp_path / "era.json"),
                 "--format", "kerchunk", "--asset-key", "kerchunk", "--parallel", "processes",
                 "--workers", "2", "--no-progress"]) == 0  # fmt: skip
    saved = pystac.Collection.from_file(str(tmp_path / "collection.json"))
    assert set(saved.assets) == {"icechunk", "kerchunk"}


def test_batches_that_do_not_stack_are_refused_and_nothing_is_written(
    client: Client,
    archive: list[pystac.Item],
    tmp_path: Path,
    write_band: Callable[..., Path],
    make_item: Callable[..., pystac.Item],
) -> None:
    band = write_band(tmp_path / "band.tif", size=150, seed=1)
    raster = make_item("raster", dt.datetime(2024, 1, 9, tzinfo=dt.UTC), {"data": (str(band), "")})
    raster.assets["data"].media_type = "image/tiff; application=geotiff"
    raster.set_self_href(str(tmp_path / "items" / "raster.json"))
    collection = collection_of([*archive, raster], tmp_path / "collection.json")
    with pytest.raises(IncompatibleArraysError, match="cannot be stacked"):
        publish(collection, tmp_path / "era.icechunk", parallel=client)
    assert not (tmp_path / "era.icechunk").exists()
    assert "icechunk" not in collection.assets


def test_batches_never_part_items_of_one_time_step(make_item: Callable[..., pystac.Item]) -> None:
    """Items of the same datetime are one step (tiles of a mosaic): one worker opens them."""
    moments = [dt.datetime(2024, 1, day, tzinfo=dt.UTC) for day in (1, 1, 1, 2, 3, 3)]
    items = [make_item(f"i{n}", moment, {}) for n, moment in enumerate(moments)]
    assert [[item.id for item in batch] for batch in batched(items, 2)] == [
        ["i0", "i1", "i2"],
        ["i3", "i4", "i5"],
    ]
    assert [len(batch) for batch in batched(items, 1)] == [3, 1, 2]
