"""A self-contained catalog (catalog, sources, store in one directory) moved whole still opens."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pystac
import pytest

from faulty_servers import QUICK, FaultyServer
from virtualstac.errors import UnregisteredURLError
from virtualstac.stac import SCHEMA_URI, open_stac, publish
from virtualstac.stac.relocation import relocation
from virtualstac.stac.stac_io import reading_with

if TYPE_CHECKING:
    from conftest import Scenes

ReadBand = Callable[[Path], np.ndarray]
DAYS = ("S2_0", "S2_1")
TARGETS = {
    "icechunk": ("icechunk", "json", "scenes.icechunk"),
    "json": ("kerchunk", "json", "scenes.json"),
    "parquet": ("kerchunk", "parquet", "scenes.parq"),
}


def self_contained(scenes: Scenes, directory: Path) -> pystac.Collection:
    """The catalog saved as pystac's SELF_CONTAINED: relative links, items beside their COGs."""
    items = [next(i for i in scenes.items if i.id == day) for day in DAYS]
    collection = pystac.Collection("scenes", "two scenes", pystac.Extent.from_items(items))
    for item in items:
        item.assets = {"B02": item.assets["B02"]}
        collection.add_item(item)
    collection.normalize_hrefs(str(directory))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    return collection


@pytest.mark.parametrize("layout", list(TARGETS))
def test_a_moved_catalog_opens_with_the_same_values(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand, layout: str, validator: Any
) -> None:
    format, kerchunk_format, name = TARGETS[layout]
    collection = self_contained(scenes, tmp_path)
    publish(collection, tmp_path / name, format=format, kerchunk_format=kerchunk_format)
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    saved = json.loads((tmp_path / "collection.json").read_text())
    asset = saved["assets"][format]
    assert asset["href"] == f"./{name}"
    assert asset["vrt:hrefs"][0] == {"key": "B02", "href": "./S2_0/S2_0.json#/assets/B02"}
    assert [link["href"] for link in saved["links"] if link["rel"] == "store"] == [f"./{name}"]
    assert asset["virtual:root"] == tmp_path.as_uri() + "/"
    assert SCHEMA_URI in collection.validate(validator=validator)
    before = open_stac(pystac.Collection.from_file(str(tmp_path / "collection.json"))).load()

    elsewhere = tmp_path.parent / f"{tmp_path.name}-moved"
    shutil.move(tmp_path, elsewhere)
    moved = pystac.Collection.from_file(str(elsewhere / "collection.json"))
    after = open_stac(moved)
    assert after["B02"].chunks is not None  # read from the store, not parsed from sources
    after = after.load()
    for step, day in enumerate(DAYS):
        expected = read_band(elsewhere / day / "B02.tif")
        np.testing.assert_array_equal(after["B02"].isel(time=step).values, expected)
    np.testing.assert_array_equal(after["B02"].values, before["B02"].values)


@pytest.mark.parametrize("layout", ["icechunk", "json"])
def test_a_store_appended_to_before_the_move_reads_every_item_after_it(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand, layout: str
) -> None:
    format, kerchunk_format, name = TARGETS[layout]
    collection = self_contained(scenes, tmp_path)
    late = collection.get_item("S2_1")
    assert late is not None
    collection.remove_item("S2_1")
    publish(collection, tmp_path / name, format=format, kerchunk_format=kerchunk_format)
    collection.add_item(late)
    collection.normalize_hrefs(str(tmp_path))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    publish(collection, tmp_path / name, format=format, kerchunk_format=kerchunk_format)
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    assert collection.assets[format].extra_fields["virtual:items"] == list(DAYS)

    elsewhere = tmp_path.parent / f"{tmp_path.name}-moved"
    shutil.move(tmp_path, elsewhere)
    after = open_stac(pystac.Collection.from_file(str(elsewhere / "collection.json"))).load()
    for step, day in enumerate(DAYS):
        expected = read_band(elsewhere / day / "B02.tif")
        np.testing.assert_array_equal(after["B02"].isel(time=step).values, expected)


@pytest.mark.parametrize("layout", list(TARGETS))
def test_items_appended_after_the_move_read_with_the_moved_ones(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand, layout: str
) -> None:
    """A republish where the catalog now is writes every reference below its new directory,
    so the store moves again with it."""
    format, kerchunk_format, name = TARGETS[layout]
    collection = self_contained(scenes, tmp_path)
    collection.remove_item("S2_1")  # its JSON stays beside its COG, to be added later
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    publish(collection, tmp_path / name, format=format, kerchunk_format=kerchunk_format)
    collection.save(pystac.CatalogType.SELF_CONTAINED)

    moved = tmp_path.parent / f"{tmp_path.name}-moved"
    shutil.move(tmp_path, moved)
    collection = pystac.Collection.from_file(str(moved / "collection.json"))
    collection.add_item(pystac.Item.from_file(str(moved / "S2_1" / "S2_1.json")))
    collection.normalize_hrefs(str(moved))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    publish(collection, moved / name, format=format, kerchunk_format=kerchunk_format)
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    asset = collection.assets[format]
    assert asset.extra_fields["virtual:items"] == list(DAYS)
    assert asset.extra_fields["virtual:root"] == moved.as_uri() + "/"
    assert all(
        prefix.startswith(moved.as_uri()) for prefix in asset.extra_fields["virtual:containers"]
    )

    again = tmp_path.parent / f"{tmp_path.name}-again"
    shutil.move(moved, again)
    after = open_stac(pystac.Collection.from_file(str(again / "collection.json"))).load()
    for step, day in enumerate(DAYS):
        expected = read_band(again / day / "B02.tif")
        np.testing.assert_array_equal(after["B02"].isel(time=step).values, expected)


def side_by_side(scenes: Scenes, root: Path) -> pystac.Catalog:
    """``root/stac/`` (catalog, collection, items) beside ``root/data/`` (the COGs they name
    relatively); the third scene stays outside ``root``, named by an absolute href."""
    catalog = pystac.Catalog("root", "catalog beside its data")
    items = sorted(scenes.items, key=lambda item: item.id)
    collection = pystac.Collection("scenes", "three scenes", pystac.Extent.from_items(items))
    catalog.add_child(collection)
    for item in items:
        item.assets = {"B02": item.assets["B02"]}
        collection.add_item(item)
    catalog.normalize_hrefs(str(root / "stac"))
    for item in items[:2]:
        data = root / "data" / item.id / "B02.tif"
        data.parent.mkdir(parents=True)
        shutil.copy(scenes.files[item.id]["B02"], data)
        item.assets["B02"].href = f"../../../data/{item.id}/B02.tif"
    outside = scenes.files[items[2].id]["B02"]
    items[2].assets["B02"].href = str(outside)
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    return catalog


@pytest.mark.parametrize("layout", ["icechunk", "json"])
def test_a_catalog_beside_its_data_and_stores_moves_with_them(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand, layout: str, validator: Any
) -> None:
    format, kerchunk_format, name = TARGETS[layout]
    root = tmp_path / "root"
    catalog = side_by_side(scenes, root)
    collection = catalog.get_child("scenes")
    assert isinstance(collection, pystac.Collection)
    publish(collection, root / "stores" / name, format=format, kerchunk_format=kerchunk_format)
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    saved = json.loads((root / "stac" / "scenes" / "collection.json").read_text())
    asset = saved["assets"][format]
    assert asset["href"] == f"../../stores/{name}"
    # The directory holding the catalog, the store and the relatively named COGs, not the
    # third scene's: its absolute href does not move with the catalog.
    assert asset["virtual:root"] == root.as_uri() + "/"
    assert asset["virtual:root_levels"] == 1
    assert SCHEMA_URI in collection.validate(validator=validator)

    elsewhere = tmp_path / "elsewhere" / "moved"
    elsewhere.parent.mkdir()
    shutil.move(root, elsewhere)
    outside = scenes.files["S2_2"]["B02"].parent.as_uri() + "/"
    moved = pystac.Collection.from_file(str(elsewhere / "stac" / "scenes" / "collection.json"))
    after = open_stac(moved, authorize=[outside])
    assert after["B02"].chunks is not None  # read from the store, not parsed from sources
    after = after.load()
    for step, day in enumerate(("S2_0", "S2_1")):
        expected = read_band(elsewhere / "data" / day / "B02.tif")
        np.testing.assert_array_equal(after["B02"].isel(time=step).values, expected)
    np.testing.assert_array_equal(
        after["B02"].isel(time=2).values, read_band(scenes.files["S2_2"]["B02"])
    )


def test_a_catalog_cannot_claim_the_filesystem_root_as_its_moving_directory(
    scenes: Scenes, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    catalog = side_by_side(scenes, root)
    collection = catalog.get_child("scenes")
    assert isinstance(collection, pystac.Collection)
    publish(collection, root / "stores" / "scenes.json", format="kerchunk")
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    path = root / "stac" / "scenes" / "collection.json"
    saved = json.loads(path.read_text())
    saved["assets"]["kerchunk"]["virtual:root_levels"] = len(root.parts) + 5
    path.write_text(json.dumps(saved))

    with pytest.raises(UnregisteredURLError, match="virtual chunk container"):
        open_stac(pystac.Collection.from_file(str(path)), authorize=[tmp_path.as_uri() + "/S2_2/"])


def test_the_root_catalog_of_a_remote_item_is_read_within_the_timeouts() -> None:
    """Where a relocatable catalog is now is read from its root catalog's link, over HTTP
    with the open's timeouts (pystac's own reader would wait for ever); an unreachable root
    counts as none: the Item's own directory is taken."""
    item = pystac.Item("remote", None, None, dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {})
    item.add_asset("store", pystac.Asset("https://stac.example.org/stores/s.icechunk"))
    item.assets["store"].extra_fields["virtual:root"] = "https://stac.example.org/"
    item.set_self_href("https://stac.example.org/items/remote.json")
    with FaultyServer({"catalog.json": b"{}"}, "hang") as server:
        item.add_link(pystac.Link("root", server.url_for("catalog.json")))
        started = time.monotonic()
        with reading_with(QUICK):
            moved_to = relocation(item.assets["store"])
    assert moved_to == {"https://stac.example.org/": "https://stac.example.org/items/"}
    assert time.monotonic() - started < 10
