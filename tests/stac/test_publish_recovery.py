"""A publish interrupted after writing its store is completed by the next one; others' are not.

The interruption is raised in-process at the exact step after the store's commit (or rename) and
before the Collection is updated, which is where a killed ``virtualstac publish`` leaves the
store ahead of its catalog (``test_publish_kills.py`` kills real processes). Stores are read
back with plain icechunk or fsspec and compared with rasterio reading the COGs.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import icechunk
import numpy as np
import obstore
import pystac
import pytest
import rasterio
from rasterio.transform import from_origin
from tiff_files import pixels, write_gdal

from virtualstac import ObjectStoreRegistry
from virtualstac.stac import PublishError, open_published, open_stac, publish
from virtualstac.stac.targets import Target
from virtualstac.writers.staging import temporary_name

if TYPE_CHECKING:
    from conftest import Scenes
    from servers import S3Server

ReadBand = Callable[[Path], np.ndarray]
COG = "image/tiff; application=geotiff; profile=cloud-optimized"
# The module, which ``virtualstac.stac.publish`` (the function) hides as an attribute.
publishing = importlib.import_module("virtualstac.stac.publish")


class Killed(BaseException):
    """Stands for SIGKILL: not an Exception, so no handler of the publish catches it."""


def catalog_of(
    scenes: Scenes, tmp_path: Path, *ids: str, name: str = "catalog"
) -> pystac.Collection:
    """A Collection saved at ``tmp_path/name/collection.json`` (its self href) with ``ids``."""
    items = [next(i for i in scenes.items if i.id == wanted) for wanted in ids]
    collection = pystac.Collection("scenes", "scenes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    collection.set_self_href(str(tmp_path / name / "collection.json"))
    return collection


def add(collection: pystac.Collection, scenes: Scenes, item_id: str) -> None:
    collection.add_item(next(i for i in scenes.items if i.id == item_id), set_parent=False)


@contextmanager
def killed_before_the_catalog(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Interrupt the publish once its store is written, before the Collection records it."""

    def kill(*args: Any, **kwargs: Any) -> None:
        raise Killed

    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(publishing, "add_published_asset", kill)
        yield


def dead_pid() -> int:
    """The id of a process that has exited (and was reaped)."""
    finished = subprocess.Popen(["true"])
    finished.wait()
    return finished.pid


def publish_commits(repository: Path) -> list[icechunk.SnapshotInfo]:
    history = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repository)))
    return [s for s in history.ancestry(branch="main") if s.parent_id is not None]


def assert_store_holds(
    collection: pystac.Collection,
    key: str,
    scenes: Scenes,
    ids: list[str],
    read_band: ReadBand,
    registry: ObjectStoreRegistry | None = None,
) -> None:
    asset = collection.assets[key]
    assert asset.extra_fields["virtual:items"] == ids
    assert len(asset.extra_fields["vrt:hrefs"]) == len(ids)
    dataset = open_published(asset, registry=registry)
    assert dataset.sizes["time"] == len(ids)
    for index, item_id in enumerate(ids):
        expected = read_band(scenes.files[item_id]["B02"])
        np.testing.assert_array_equal(dataset["B02"].isel(time=index).values, expected)


def test_a_first_icechunk_publish_killed_after_its_commit_is_adopted(
    scenes: Scenes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_band: ReadBand
) -> None:
    collection = catalog_of(scenes, tmp_path, "S2_0")
    repository = tmp_path / "scenes.icechunk"
    with killed_before_the_catalog(monkeypatch):
        publish(collection, repository, assets=["B02"])
    assert "icechunk" not in collection.assets
    [commit] = publish_commits(repository)
    assert commit.metadata["virtualstac.publish"]["items"] == ["S2_0"]
    assert commit.metadata["virtualstac.publish"]["catalog"] == collection.get_self_href()

    add(collection, scenes, "S2_1")  # the rerun may bring more items: they are appended
    publish(collection, repository, assets=["B02"])
    assert [c.id for c in publish_commits(repository)][1] == commit.id
    assert collection.assets["icechunk"].extra_fields["version"] != commit.id
    assert_store_holds(collection, "icechunk", scenes, ["S2_0", "S2_1"], read_band)


def test_an_icechunk_append_killed_after_its_commit_is_adopted(
    scenes: Scenes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_band: ReadBand
) -> None:
    collection = catalog_of(scenes, tmp_path, "S2_0")
    repository = tmp_path / "scenes.icechunk"
    publish(collection, repository, assets=["B02"])
    add(collection, scenes, "S2_1")  # in another directory: a container is added
    saved = collection.to_dict()

    def kill(self: icechunk.Repository) -> None:
        raise Killed

    with monkeypatch.context() as patch, pytest.raises(Killed):
        # Killed between the commit and saving the container it needs.
        patch.setattr(icechunk.Repository, "save_config", kill)
        publish(collection, repository, assets=["B02"])
    assert collection.to_dict() == saved
    head = publish_commits(repository)[0].id
    assert head != collection.assets["icechunk"].extra_fields["version"]

    publish(collection, repository, assets=["B02"])
    fields = collection.assets["icechunk"].extra_fields
    assert fields["version"] == head  # adopted, not written again
    assert len(publish_commits(repository)) == 2
    assert fields["virtual:containers"] == [
        f"file://{tmp_path}/S2_0/",
        f"file://{tmp_path}/S2_1/",
    ]
    assert_store_holds(collection, "icechunk", scenes, ["S2_0", "S2_1"], read_band)


def test_commits_of_another_catalog_or_other_sources_are_not_adopted(
    scenes: Scenes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repository = tmp_path / "scenes.icechunk"
    ours = catalog_of(scenes, tmp_path, "S2_0")
    with killed_before_the_catalog(monkeypatch):
        publish(ours, repository, assets=["B02"])
    theirs = catalog_of(scenes, tmp_path, "S2_0", name="elsewhere")
    with pytest.raises(PublishError, match="already holds an Icechunk repository"):
        publish(theirs, repository, assets=["B02"])
    with pytest.raises(PublishError, match="already holds an Icechunk repository"):
        publish(ours, repository, assets=["B02", "B03"])  # other sources than the commit's
    publish(ours, repository, assets=["B02"])
    assert ours.assets["icechunk"].extra_fields["virtual:items"] == ["S2_0"]


@pytest.mark.parametrize("layout", ["json", "parquet"])
def test_kerchunk_references_whose_catalog_was_not_saved_are_adopted(
    scenes: Scenes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    read_band: ReadBand,
    layout: str,
) -> None:
    collection = catalog_of(scenes, tmp_path, "S2_0")
    target = tmp_path / f"scenes.{layout}"
    options: dict[str, Any] = {"format": "kerchunk", "kerchunk_format": layout, "assets": ["B02"]}
    with killed_before_the_catalog(monkeypatch):
        publish(collection, target, **options)
    publish(collection, target, **options)  # first publish: adopted
    assert_store_holds(collection, "kerchunk", scenes, ["S2_0"], read_band)
    add(collection, scenes, "S2_1")
    saved = collection.to_dict()
    with killed_before_the_catalog(monkeypatch):
        publish(collection, target, **options)
    assert collection.to_dict() == saved
    add(collection, scenes, "S2_2")
    publish(collection, target, **options)  # S2_1 adopted, S2_2 appended
    assert_store_holds(collection, "kerchunk", scenes, ["S2_0", "S2_1", "S2_2"], read_band)
    if layout == "json":
        data = target.read_bytes()
        assert collection.assets["kerchunk"].extra_fields["file:size"] == len(data)
        assert json.loads(data)["virtualstac"]["virtualstac.publish"]["items"] == [
            "S2_0",
            "S2_1",
            "S2_2",
        ]
    stranger = catalog_of(scenes, tmp_path, "S2_0", "S2_1", "S2_2", name="elsewhere")
    with pytest.raises(PublishError, match="already exists"):
        publish(stranger, target, **options)


def test_leftovers_of_dead_publishes_are_removed_and_those_of_live_ones_kept(
    scenes: Scenes, tmp_path: Path
) -> None:
    target = tmp_path / "scenes.parq"
    dead = dead_pid()
    orphan = tmp_path / temporary_name(target.name).replace(f"-{os.getpid()}-", f"-{dead}-")
    (orphan / "B02").mkdir(parents=True)
    live = tmp_path / temporary_name(target.name)  # this process: it may still be writing
    live.mkdir()
    foreign = tmp_path / "scenes.parq.tmp-0123456789abcdef0123456789abcdef"  # no owner named
    foreign.mkdir()
    collection = catalog_of(scenes, tmp_path, "S2_0")
    publish(collection, target, format="kerchunk", kerchunk_format="parquet", assets=["B02"])
    assert not orphan.exists()
    assert live.is_dir() and foreign.is_dir()
    assert (target / ".zmetadata").is_file()


def test_an_object_store_parquet_swap_killed_midway_is_finished_by_the_next_publish(
    scenes: Scenes,
    tmp_path: Path,
    s3_server: S3Server,
    monkeypatch: pytest.MonkeyPatch,
    read_band: ReadBand,
) -> None:
    bucket = s3_server.create_bucket()
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    registry.register(f"file://{tmp_path}/")
    target = f"s3://{bucket}/scenes.parq"
    options: dict[str, Any] = {
        "format": "kerchunk",
        "kerchunk_format": "parquet",
        "assets": ["B02"],
        "registry": registry,
    }
    collection = catalog_of(scenes, tmp_path, "S2_0")
    publish(collection, target, **options)
    add(collection, scenes, "S2_1")
    renamed: list[str] = []
    real_rename = obstore.rename

    def rename_once(store: Any, source: str, destination: str) -> None:
        if renamed:
            raise Killed
        real_rename(store, source, destination)
        renamed.append(destination)

    dead = dead_pid()
    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(obstore, "rename", rename_once)
        patch.setattr(os, "getpid", lambda: dead)
        publish(collection, target, **options)
    store, _ = registry.resolve(target)
    [staged] = [p for p in obstore.list_with_delimiter(store)["common_prefixes"] if ".tmp-" in p]
    assert renamed  # half swapped: one file new, the others old

    add(collection, scenes, "S2_2")
    publish(collection, target, **options)  # finishes the swap, adopts S2_1, appends S2_2
    names = [p.rstrip("/") for p in obstore.list_with_delimiter(store)["common_prefixes"]]
    assert names == ["scenes.parq"]
    ids = ["S2_0", "S2_1", "S2_2"]
    assert_store_holds(collection, "kerchunk", scenes, ids, read_band, registry)
    assert staged.startswith("scenes.parq.tmp-")


def test_object_store_repositories_whose_creation_was_killed_are_taken_over(
    scenes: Scenes, tmp_path: Path, s3_server: S3Server, read_band: ReadBand
) -> None:
    bucket = s3_server.create_bucket()
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    registry.register(f"file://{tmp_path}/")
    store, _ = registry.resolve(f"s3://{bucket}/x")
    empty = f"s3://{bucket}/empty.icechunk"  # created, killed before the first commit
    icechunk.Repository.create(Target.of(empty, registry=registry).icechunk_storage())
    begun = f"s3://{bucket}/begun.icechunk"  # killed while Icechunk was creating it
    obstore.put(store, "begun.icechunk/snapshots/1CECHNKREP0F1RSTCMT0", b"partial")
    for target in (empty, begun):
        collection = catalog_of(scenes, tmp_path, "S2_0")
        publish(collection, target, assets=["B02"], registry=registry)
        assert_store_holds(collection, "icechunk", scenes, ["S2_0"], read_band, registry)
    obstore.put(store, "other.icechunk/data.bin", b"not ours")
    with pytest.raises(PublishError, match="holds objects but no Icechunk repository"):
        publish(
            catalog_of(scenes, tmp_path, "S2_0"),
            f"s3://{bucket}/other.icechunk",
            assets=["B02"],
            registry=registry,
        )


@pytest.mark.parametrize("layout", ["icechunk", "kerchunk"])
def test_an_interrupted_multiscales_publish_is_adopted_with_its_levels(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_item: Callable[..., pystac.Item],
    layout: str,
) -> None:
    items = []
    for day in range(2):
        folder = tmp_path / f"S{day}"
        folder.mkdir()
        write_gdal(
            folder / "B02.tif",
            driver="COG",
            width=256,
            height=256,
            transform=from_origin(500000.0, 4000000.0, 10.0, 10.0),
            blocksize=64,
            compress="DEFLATE",
            overview_count=1,
            data=pixels(1, 256, 256, "uint16", seed=day),
        )
        when = dt.datetime(2024, 5, 1 + day, tzinfo=dt.UTC)
        item = make_item(f"S{day}", when, {"B02": ("./B02.tif", COG)})
        item.set_self_href(str(folder / f"S{day}.json"))
        items.append(item)
    collection = pystac.Collection("scenes", "scenes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    collection.set_self_href(str(tmp_path / "catalog" / "collection.json"))
    target = tmp_path / ("scenes.icechunk" if layout == "icechunk" else "scenes.json")
    with killed_before_the_catalog(monkeypatch):
        publish(collection, target, format=layout, assets=["B02"], overviews=True)
    publish(collection, target, format=layout, assets=["B02"], overviews=True)
    assert collection.assets[layout].extra_fields["virtual:items"] == ["S0", "S1"]
    overview = open_stac(collection, overview_level=0)["B02"]
    for day in range(2):
        with rasterio.open(tmp_path / f"S{day}" / "B02.tif", overview_level=0) as src:
            np.testing.assert_array_equal(overview.isel(time=day).values, src.read(1))
