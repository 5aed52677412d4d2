"""Publishing Kerchunk parquet references on a real dask.distributed cluster: workers write.

The cluster is two worker processes on this machine (``LocalCluster(processes=True)``), its
scheduler giving up on a task at the first worker that dies with it; the kill is a worker
plugin that ends its process (``os._exit``) when a chosen write task starts. Records hold 7
references here, so that most records lie inside one batch (written by its worker) and some
straddle two (joined by the client). References are read back with fsspec and xarray and
compared with netCDF4 reading the files, and with the references one process writes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import netCDF4
import numpy as np
import pyarrow.parquet as pq
import pystac
import pytest
import rasterio
import xarray as xr
from cluster_publishing import (
    collection_of,
    expected_t2m,
    expected_times,
    killing_write,
)
from distributed import Client, get_task_stream
from rasterio.transform import from_origin
from tiff_files import pixels, write_gdal

from virtualstac.cli import main
from virtualstac.errors import IncompatibleArraysError, WorkerLostError
from virtualstac.stac import open_stac, publish
from virtualstac.stac import publish_kerchunk as references_module

RECORD_SIZE = 7  # t2m has 16 chunks per day (one item, one batch): records straddle batches
PARQUET = {"format": "kerchunk", "kerchunk_format": "parquet"}


@pytest.fixture(autouse=True)
def small_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(references_module, "RECORD_SIZE", RECORD_SIZE)


def open_references(target: Path) -> xr.Dataset:
    fs = fsspec.filesystem("reference", fo=str(target), remote_protocol="file")
    return xr.open_dataset(fs.get_mapper(), engine="zarr", consolidated=False, zarr_format=2)


def assert_published(target: Path, items: list[pystac.Item]) -> None:
    """The references read back by fsspec hold netCDF4's values and times."""
    dataset = open_references(target)
    np.testing.assert_allclose(dataset["t2m"].values, expected_t2m(items), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(dataset["time"].values, expected_times(items))


def references(target: Path) -> dict[str, Any]:
    """Every reference of a parquet reference set by key, and its metadata documents."""
    index = json.loads((target / ".zmetadata").read_text())
    found: dict[str, Any] = {"metadata": index["metadata"], "record_size": index["record_size"]}
    for file in sorted(target.rglob("refs.*.parq")):
        rows = pq.read_table(file).to_pylist()
        array = file.parent.relative_to(target).as_posix()
        record = int(file.name.split(".")[1])
        for row_number, row in enumerate(rows):
            found[f"{array}#{record * RECORD_SIZE + row_number}"] = row
    return found


def test_workers_write_the_records_one_process_would_write(
    client: Client, archive: list[pystac.Item], tmp_path: Path
) -> None:
    alone = collection_of(archive, tmp_path / "alone.json")
    publish(alone, tmp_path / "alone.parq", **PARQUET)
    collection = collection_of(archive, tmp_path / "collection.json")
    target = tmp_path / "era.parq"
    with get_task_stream(client) as stream:
        publish(collection, target, parallel=client, **PARQUET)
    writers = {task["worker"] for task in stream.data if "virtualstac-write" in task["key"]}
    assert writers and writers <= set(client.scheduler_info()["workers"])
    assert_published(target, archive)
    written, expected = references(target), references(tmp_path / "alone.parq")
    assert written == expected
    assert len(list((target / "t2m").iterdir())) == 96 // RECORD_SIZE + 1
    asset, alone_asset = collection.assets["kerchunk"], alone.assets["kerchunk"]
    assert asset.href == str(target)
    for field in ("cube:dimensions", "cube:variables", "virtual:items", "vrt:hrefs"):
        assert asset.extra_fields[field] == alone_asset.extra_fields[field]


def test_a_worker_killed_while_writing_leaves_nothing_and_a_rerun_completes(
    client: Client, archive: list[pystac.Item], tmp_path: Path
) -> None:
    collection = collection_of(archive, tmp_path / "collection.json")
    collection.save_object(include_self_link=False)
    saved = Path(tmp_path / "collection.json").read_text()
    target = tmp_path / "era.parq"
    client.register_plugin(killing_write(batch=2))
    try:
        with pytest.raises(WorkerLostError, match="nothing was written"):
            publish(collection, target, parallel=client, **PARQUET)
    finally:
        client.unregister_worker_plugin("die-while-writing")
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "archive",
        "collection.json",
        "items",
    ]
    assert "kerchunk" not in collection.assets
    assert (tmp_path / "collection.json").read_text() == saved
    client.wait_for_workers(2)
    publish(collection, target, parallel=client, **PARQUET)
    assert_published(target, archive)


def test_new_items_are_appended_by_the_client_on_a_cluster(
    client: Client, archive: list[pystac.Item], tmp_path: Path
) -> None:
    """Appended references are the published ones rewritten with the new: this process
    reads the published ones and writes the union, as without a cluster."""
    collection = collection_of(archive[:2], tmp_path / "collection.json")
    target = tmp_path / "era.parq"
    publish(collection, target, parallel=client, **PARQUET)
    for item in archive[2:]:
        collection.add_item(item, set_parent=False)
    with get_task_stream(client) as stream:
        publish(collection, target, parallel=client, **PARQUET)
    assert not any("virtualstac-write" in task["key"] for task in stream.data)
    assert_published(target, archive)
    assert collection.assets["kerchunk"].extra_fields["virtual:items"] == [
        item.id for item in archive
    ]


def test_the_command_line_has_the_workers_of_a_scheduler_write_the_records(
    client: Client, archive: list[pystac.Item], tmp_path: Path
) -> None:
    collection = collection_of(archive, tmp_path / "collection.json")
    collection.save_object(include_self_link=False)
    address = client.scheduler.address.removeprefix("tcp://")
    with get_task_stream(client) as stream:
        assert main(["publish", str(tmp_path / "collection.json"), str(tmp_path / "era.parq"),
                     "--format", "kerchunk", "--kerchunk-format", "parquet",
                     "--parallel", f"dask://{address}", "--no-progress"]) == 0  # fmt: skip
    assert any("virtualstac-write" in task["key"] for task in stream.data)
    assert_published(tmp_path / "era.parq", archive)


def test_cog_overviews_written_by_workers_are_the_references_of_one_process(
    client: Client, tmp_path: Path, make_item: Callable[..., pystac.Item]
) -> None:
    """A multiscales group of pixel-interleaved RGB COGs: every level's records by the workers
    (stored axis order, time first), the same references as one process writes."""
    items, files = [], []
    for day in range(4):
        path = write_gdal(
            tmp_path / f"visual{day}.tif",
            count=3,
            dtype="uint8",
            data=pixels(3, 300, 400, "uint8", seed=day),
            driver="COG",
            width=400,
            height=300,
            transform=from_origin(500000.0, 4000000.0, 10.0, 10.0),
            blocksize=64,
            compress="DEFLATE",
            overview_count=2,
        )
        item = make_item(
            f"S{day}", dt.datetime(2024, 5, day + 1, tzinfo=dt.UTC), {"visual": (str(path), "")}
        )
        item.assets[
            "visual"
        ].media_type = "image/tiff; application=geotiff; profile=cloud-optimized"
        item.set_self_href(str(tmp_path / "items" / f"S{day}.json"))
        item.save_object(include_self_link=True)
        items.append(item)
        files.append(path)
    alone = collection_of(items, tmp_path / "alone.json")
    publish(alone, tmp_path / "alone.parq", overviews=True, **PARQUET)
    collection = collection_of(items, tmp_path / "collection.json")
    target = tmp_path / "scenes.parq"
    with get_task_stream(client) as stream:
        publish(collection, target, overviews=True, parallel=client, **PARQUET)
    assert any("virtualstac-write" in task["key"] for task in stream.data)
    assert references(target) == references(tmp_path / "alone.parq")
    for level in (None, 1):
        opened = open_stac(collection, overview_level=level)
        for day, path in enumerate(files):
            with rasterio.open(path, overview_level=level) as src:
                expected = src.read()
            values = opened["visual"].isel(time=day).transpose("band", "y", "x").values
            np.testing.assert_array_equal(values, expected)


def test_an_array_growing_along_another_axis_than_its_first_is_refused(
    client: Client, tmp_path: Path, make_item: Callable[..., pystac.Item]
) -> None:
    """Station series stored ``(station, time)``: a batch's chunks are not one run of records."""
    items = []
    for day in range(2):
        path = tmp_path / f"stations{day}.nc"
        with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
            nc.createDimension("station", 3)
            nc.createDimension("time", 4)
            times = nc.createVariable("time", "f8", ("time",))
            times.units = "hours since 2024-01-01 00:00:00"
            times[:] = np.arange(4) + 4 * day
            values = nc.createVariable("level", "f4", ("station", "time"), chunksizes=(1, 4))
            values[:] = np.arange(12, dtype="f4").reshape(3, 4) + day
        item = make_item(
            f"S{day}", dt.datetime(2024, 1, day + 1, tzinfo=dt.UTC), {"data": (str(path), "")}
        )
        item.assets["data"].media_type = "application/x-netcdf"
        item.set_self_href(str(tmp_path / "items" / f"S{day}.json"))
        item.save_object(include_self_link=True)
        items.append(item)
    collection = collection_of(items, tmp_path / "collection.json")
    with pytest.raises(IncompatibleArraysError, match="'level' does not grow along its first"):
        publish(collection, tmp_path / "stations.parq", parallel=client, **PARQUET)
    assert not (tmp_path / "stations.parq").exists()
    assert "kerchunk" not in collection.assets
    publish(collection, tmp_path / "stations.parq", **PARQUET)  # one process writes them
    level = open_references(tmp_path / "stations.parq")["level"]
    assert level.dims == ("station", "time")
    np.testing.assert_array_equal(level.values[:, 4:], np.arange(12).reshape(3, 4) + 1)
