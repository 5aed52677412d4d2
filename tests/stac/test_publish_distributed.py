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
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import icechunk
import numpy as np
import pystac
import pytest
import xarray as xr
from cluster_publishing import (
    DAYS,
    collection_of,
    expected_t2m,
    expected_times,
    killing_write,
)
from distributed import Client, get_task_stream

from virtualstac.cli import main
from virtualstac.errors import IncompatibleArraysError, WorkerLostError
from virtualstac.stac import open_stac, publish
from virtualstac.stac.publish_distributed import batched, document_of, documents_of, item_of


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


def assert_published(target: Path, items: list[pystac.Item]) -> None:
    dataset = read_back(target)
    assert dataset.sizes["time"] == 24 * len(items)
    np.testing.assert_allclose(dataset["t2m"].values, expected_t2m(items), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(dataset["time"].values, expected_times(items))


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


def test_a_store_published_on_the_cluster_moves_with_its_self_contained_catalog(
    client: Client, archive: list[pystac.Item], tmp_path: Path
) -> None:
    """The workers name the files below the catalog's directory after its container, as a
    local publish does, so the directory moved whole still reads every value."""
    root = tmp_path / "root"
    collection = pystac.Collection("era", "hourly temperature", pystac.Extent.from_items(archive))
    for item in archive:
        collection.add_item(item)
    shutil.move(tmp_path / "archive", root / "archive")
    for item in archive:
        data = item.assets["data"]
        data.href = str(root / "archive" / Path(data.href).name)
    collection.normalize_hrefs(str(root))
    collection.make_all_asset_hrefs_relative()
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    publish(collection, root / "era.icechunk", parallel=client)
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    assert collection.assets["icechunk"].extra_fields["virtual:root"] == root.as_uri() + "/"

    elsewhere = tmp_path / "moved"
    shutil.move(root, elsewhere)
    moved = pystac.Collection.from_file(str(elsewhere / "collection.json"))
    after = open_stac(moved)
    assert after["t2m"].chunks is not None  # read from the store, not parsed from sources
    items = sorted(moved.get_items(recursive=True), key=lambda item: item.id)
    assert all(str(elsewhere) in (i.assets["data"].get_absolute_href() or "") for i in items)
    np.testing.assert_allclose(after["t2m"].values, expected_t2m(items), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(after["time"].values, expected_times(archive))


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


def scenes_collection(extra_fields: dict[str, Any] | None = None) -> pystac.Collection:
    """An unsaved Collection "scenes" with a whole-world extent from 2024 on."""
    return pystac.Collection(
        "scenes",
        "Scenes",
        pystac.Extent(
            pystac.SpatialExtent([[-180.0, -90.0, 180.0, 90.0]]),
            pystac.TemporalExtent([[dt.datetime(2024, 1, 1, tzinfo=dt.UTC), None]]),
        ),
        extra_fields=extra_fields,
    )


def test_an_unsaved_collection_travels_with_its_items_to_the_workers(tmp_path: Path) -> None:
    # A worker cannot read a Collection the client has not saved yet, and its item_assets may
    # hold what the items' assets leave out (nodata, scale): it goes along with each item.
    bands = [{"nodata": 0, "scale": 0.5, "offset": -1.0}]
    collection = scenes_collection(
        {"item_assets": {"data": {"roles": ["data"], "raster:bands": bands}}}
    )
    item = pystac.Item("scene", None, None, dt.datetime(2024, 1, 1, tzinfo=dt.UTC), properties={})
    item.add_asset("data", pystac.Asset(str(tmp_path / "scene.tif")))
    collection.add_item(item)
    collection.normalize_hrefs(str(tmp_path))

    sent = json.loads(json.dumps(document_of(item)))
    rebuilt = item_of(sent)

    assert not (tmp_path / "collection.json").exists()
    held = rebuilt.get_collection()
    assert held is not None
    assert held.extra_fields["item_assets"]["data"]["raster:bands"] == bands
    assert rebuilt.get_single_link("collection").get_absolute_href() == str(
        tmp_path / "collection.json"
    )


def test_a_collection_is_written_once_for_its_items_without_their_links(tmp_path: Path) -> None:
    # One link per item: written for every item, a Collection of n items would cost n^2.
    collection = scenes_collection()
    for day in range(1, 4):
        item = pystac.Item(f"d{day}", None, None, dt.datetime(2024, 1, day, tzinfo=dt.UTC), {})
        item.add_asset("data", pystac.Asset(str(tmp_path / f"d{day}.tif")))
        collection.add_item(item)
    collection.normalize_hrefs(str(tmp_path))

    documents = documents_of(list(collection.get_items()))

    written = {id(document["collection"]) for document in documents}
    assert len(written) == 1
    assert [link["rel"] for link in documents[0]["collection"]["links"]] == ["self"]
    assert len(collection.get_links(pystac.RelType.ITEM)) == 3  # the client's is untouched
