"""Malformed STAC catalogs: every way in raises a typed error naming the file and its linker.

The catalogs are saved by pystac, then one linked file is damaged the way hand-edited or
half-synced catalogs are: broken JSON, a bad datetime, an asset without ``href``, a link to a
file that is not there, a link to the wrong kind of object.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pystac
import pytest
import xarray as xr
from tiff_files import write_gdal

from virtualstac.cli import main
from virtualstac.errors import (
    CorruptFileError,
    InvalidCatalogError,
    LimitExceededError,
    SourceNotFoundError,
)
from virtualstac.limits import limits
from virtualstac.stac import VirtualExtension, open_stac, publish
from virtualstac.stac.invalid import catalog_items, reading_stac

GEOMETRY = {"type": "Point", "coordinates": [15.0, 36.1]}


def save_collection(root: Path) -> tuple[Path, Path]:
    """A Collection with one Item, saved self-contained; returns both files."""
    collection = pystac.Collection(
        id="scenes",
        description="scenes",
        extent=pystac.Extent(
            pystac.SpatialExtent([[14.9, 36.0, 15.1, 36.2]]),
            pystac.TemporalExtent([[dt.datetime(2024, 5, 1, tzinfo=dt.UTC), None]]),
        ),
    )
    item = pystac.Item(
        id="scene-1",
        geometry=GEOMETRY,
        bbox=[15.0, 36.1, 15.0, 36.1],
        datetime=dt.datetime(2024, 5, 1, tzinfo=dt.UTC),
        properties={},
    )
    item.add_asset("B02", pystac.Asset("./B02.tif", media_type=pystac.MediaType.COG))
    collection.add_item(item)
    collection.normalize_hrefs(str(root))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    return root / "collection.json", root / "scene-1" / "scene-1.json"


def edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def open_collection(path: Path) -> None:
    open_stac(pystac.Collection.from_file(str(path)))


def assert_one_line_naming(error: BaseException, *files: Path) -> None:
    message = str(error)
    assert "\n" not in message
    for file in files:
        assert str(file) in message


def test_broken_item_json_names_the_item_and_the_collection(tmp_path: Path) -> None:
    collection, item = save_collection(tmp_path)
    item.write_text('{"type": "Feature", "id": ')
    with pytest.raises(InvalidCatalogError, match="invalid STAC Item") as caught:
        open_collection(collection)
    assert_one_line_naming(caught.value, item, collection)
    assert isinstance(caught.value.__cause__, json.JSONDecodeError)
    assert isinstance(caught.value, ValueError)


def test_bad_datetime_says_which_text(tmp_path: Path) -> None:
    collection, item = save_collection(tmp_path)
    edit(item, lambda d: d["properties"].update(datetime="yesterday"))
    with pytest.raises(InvalidCatalogError, match="the datetime 'yesterday' is not RFC 3339") as c:
        open_collection(collection)
    assert_one_line_naming(c.value, item, collection)
    assert type(c.value.__cause__) is ValueError


def test_bad_start_datetime_of_a_time_range_says_which_text(tmp_path: Path) -> None:
    # pystac reads start_datetime only when asked, after the catalog was walked.
    collection, item = save_collection(tmp_path)
    edit(
        item,
        lambda d: d["properties"].update(
            datetime=None, start_datetime="yesterday", end_datetime="2024-05-02T00:00:00Z"
        ),
    )
    write_gdal(item.parent / "B02.tif")
    with pytest.raises(InvalidCatalogError, match="the datetime 'yesterday' is not RFC 3339") as c:
        open_stac(pystac.Collection.from_file(str(collection)), ["B02"])
    assert_one_line_naming(c.value, item)


def test_missing_datetime_is_pystacs_own_refusal(tmp_path: Path) -> None:
    collection, item = save_collection(tmp_path)
    edit(item, lambda d: d["properties"].pop("datetime"))
    with pytest.raises(InvalidCatalogError, match="start_datetime and end_datetime") as caught:
        open_collection(collection)
    assert_one_line_naming(caught.value, item)
    assert isinstance(caught.value.__cause__, pystac.STACError)


def test_asset_without_href_names_the_missing_field(tmp_path: Path) -> None:
    collection, item = save_collection(tmp_path)
    edit(item, lambda d: d["assets"]["B02"].pop("href"))
    with pytest.raises(InvalidCatalogError, match="the required field 'href' is missing") as c:
        open_collection(collection)
    assert_one_line_naming(c.value, item, collection)
    assert isinstance(c.value.__cause__, KeyError)


def test_dangling_item_link_is_a_missing_file(tmp_path: Path) -> None:
    collection, item = save_collection(tmp_path)
    item.unlink()
    with pytest.raises(SourceNotFoundError, match="does not exist") as caught:
        open_collection(collection)
    assert_one_line_naming(caught.value, item, collection)
    assert isinstance(caught.value.__cause__, FileNotFoundError)
    assert isinstance(caught.value, FileNotFoundError)


def test_dangling_child_link_names_the_child_catalog(tmp_path: Path) -> None:
    root = pystac.Catalog(id="root", description="root")
    collection_file, _ = save_collection(tmp_path / "child")
    root.add_child(pystac.Collection.from_file(str(collection_file)))
    root.normalize_hrefs(str(tmp_path))
    root.save(pystac.CatalogType.SELF_CONTAINED)
    child = tmp_path / "scenes" / "collection.json"
    child.unlink()
    with pytest.raises(SourceNotFoundError, match=r"STAC Catalog .* does not exist") as caught:
        open_stac(pystac.Catalog.from_file(str(tmp_path / "catalog.json")))
    assert_one_line_naming(caught.value, child, tmp_path / "catalog.json")


def test_item_link_to_a_collection_is_refused(tmp_path: Path) -> None:
    collection, item = save_collection(tmp_path)
    other, _ = save_collection(tmp_path / "other")
    item.write_text(other.read_text())
    with pytest.raises(InvalidCatalogError, match="it is a Collection") as caught:
        open_collection(collection)
    assert_one_line_naming(caught.value, item, collection)


def test_items_dangling_collection_link_names_the_collection(tmp_path: Path) -> None:
    collection, item = save_collection(tmp_path)
    collection.unlink()
    with pytest.raises(SourceNotFoundError, match=r"STAC Collection .* does not exist") as caught:
        open_stac(pystac.Item.from_file(str(item)))
    assert_one_line_naming(caught.value, collection, item)


def test_engine_extension_and_publish_raise_the_same(tmp_path: Path) -> None:
    collection, item = save_collection(tmp_path)
    item.write_text("not json")
    opened = pystac.Collection.from_file(str(collection))
    ways: list[Callable[[], object]] = [
        lambda: xr.open_dataset(opened, engine="virtualstac"),
        lambda: VirtualExtension.ext(opened, add_if_missing=True).to_xarray(),
        lambda: publish(opened, tmp_path / "store"),
    ]
    for way in ways:
        with pytest.raises(InvalidCatalogError) as caught:
            way()
        assert_one_line_naming(caught.value, item)
    assert not (tmp_path / "store").exists()


def test_our_own_errors_pass_through_unwrapped() -> None:
    ours = CorruptFileError("b.tif is damaged")
    with pytest.raises(CorruptFileError) as caught, reading_stac("catalog.json"):
        raise ours
    assert caught.value is ours


def test_the_cli_prints_the_error_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    collection, item = save_collection(tmp_path)
    edit(item, lambda d: d["assets"]["B02"].pop("href"))
    assert main(["publish", str(collection), str(tmp_path / "store"), "--no-progress"]) == 1
    printed = capsys.readouterr().err.strip()
    assert printed.startswith("virtualstac: error: invalid STAC Item ")
    assert "\n" not in printed and str(item) in printed and "'href' is missing" in printed


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["assets"]["B02"].update(type=5), "type must be a string, not 5"),
        # As text, "metadata" would contain the role "data".
        (lambda d: d["assets"]["B02"].update(roles="metadata"), "roles must be a list of strings"),
        (
            lambda d: d["assets"]["B02"].update({"proj:transform": "10 0 0 0 -10 0"}),
            "proj:transform must be a list of numbers, not '10 0 0 0 -10 0'",
        ),
        (
            lambda d: d["properties"].update({"proj:shape": {"rows": 2}}),
            "proj:shape must be a list of numbers",
        ),
        # Left out, a scale given as text would give raw counts as if they were reflectances.
        (
            lambda d: d["assets"]["B02"].update({"raster:bands": [{"scale": "0.0001"}]}),
            "raster:bands[0].scale must be a finite number, not '0.0001'",
        ),
        (
            lambda d: d["assets"]["B02"].update({"raster:bands": {"nodata": 0, "scale": 1e-4}}),
            "raster:bands must be a list of bands",
        ),
        (
            lambda d: d["assets"]["B02"].update({"bands": [{"raster:offset": "-0.1"}]}),
            "bands[0].raster:offset must be a finite number",
        ),
        (
            lambda d: d["assets"]["B02"].update({"raster:scale": 0}),
            "raster:scale is 0",
        ),
    ],
)
def test_asset_fields_of_the_wrong_type_name_the_asset_and_item(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    _, item = save_collection(tmp_path)
    edit(item, change)
    with pytest.raises(InvalidCatalogError, match="asset 'B02' of item 'scene-1': ") as caught:
        open_stac(pystac.Item.from_file(str(item)), ["B02"])
    assert expected in str(caught.value)


@pytest.mark.parametrize("command", ["info", "publish"])
@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([1, 2], "odd.json"),
        ({"type": "FeatureCollection", "features": []}, "FeatureCollection"),
        ({"type": "Feature", "stac_version": "1.0.0", "id": "x", "assets": []}, "odd.json"),
    ],
)
def test_the_cli_refuses_json_that_is_no_item_or_collection_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, document: Any, expected: str
) -> None:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(document))
    target = [str(tmp_path / "store")] if command == "publish" else []
    assert main([command, str(path), *target, "--no-progress"]) == 1
    printed = capsys.readouterr().err.strip()
    assert printed.startswith("virtualstac: error: ") and "\n" not in printed
    assert expected in printed and "odd.json" in printed


def test_catalogs_built_in_memory_walk_without_hrefs() -> None:
    catalog = pystac.Catalog(id="memory", description="never saved")
    child = pystac.Catalog(id="child", description="never saved")
    item = pystac.Item("a", GEOMETRY, None, dt.datetime(2024, 5, 1, tzinfo=dt.UTC), {})
    child.add_item(item)
    catalog.add_child(child)
    assert catalog_items(catalog) == [item]


def save_chain(root: Path, depth: int) -> list[Path]:
    """Catalogs ``c0`` to ``c{depth-1}``, each the child of the one before, as hand-written
    files (pystac's own saving recurses as deep as the chain)."""
    paths = [root / f"c{level}.json" for level in range(depth)]
    for level, path in enumerate(paths):
        links = [{"rel": "self", "href": path.as_uri()}]
        if level + 1 < depth:
            links.append({"rel": "child", "href": f"./c{level + 1}.json"})
        document = {"type": "Catalog", "stac_version": "1.1.0", "id": f"c{level}",
                    "description": "a link in a chain", "links": links}  # fmt: skip
        path.write_text(json.dumps(document))
    return paths


def test_catalogs_linked_in_a_loop_are_refused_naming_the_loop(tmp_path: Path) -> None:
    """``c0`` -> ``c1`` -> ``c2`` -> ``c0``: walking for items would never end."""
    paths = save_chain(tmp_path, 3)
    edit(paths[2], lambda doc: doc["links"].append({"rel": "child", "href": "./c0.json"}))
    with pytest.raises(InvalidCatalogError, match="loop") as caught:
        catalog_items(pystac.Catalog.from_file(str(paths[0])))
    assert "c0.json -> " in str(caught.value) and str(caught.value).endswith("c0.json")


def test_a_chain_of_catalogs_deeper_than_pythons_recursion_limit_is_walked(
    tmp_path: Path,
) -> None:
    paths = save_chain(tmp_path, 1500)
    edit(paths[-1], lambda doc: doc["links"].append({"rel": "item", "href": "./scene.json"}))
    item = pystac.Item(
        "deep", GEOMETRY, [15.0, 36.1, 15.0, 36.1], dt.datetime(2024, 5, 1, tzinfo=dt.UTC), {}
    )
    item.set_self_href(str(tmp_path / "scene.json"))
    item.save_object(include_self_link=False)
    found = catalog_items(pystac.Catalog.from_file(str(paths[0])))
    assert [found_item.id for found_item in found] == ["deep"]


def test_a_catalog_with_more_items_than_the_limit_is_refused_as_they_are_read(
    tmp_path: Path,
) -> None:
    (catalog,) = save_chain(tmp_path, 1)
    links = [{"rel": "item", "href": f"./scene-{n}.json"} for n in range(5)]
    edit(catalog, lambda doc: doc["links"].extend(links))
    for n in range(3):  # the fourth is never read
        item = pystac.Item(f"scene-{n}", GEOMETRY, None, dt.datetime(2024, 5, 1, tzinfo=dt.UTC), {})
        item.set_self_href(str(tmp_path / f"scene-{n}.json"))
        item.save_object(include_self_link=False)
    with limits(stac_items=2), pytest.raises(LimitExceededError, match="stac_items"):
        catalog_items(pystac.Catalog.from_file(str(catalog)))


def test_an_asset_whose_file_is_missing_is_a_missing_file(tmp_path: Path) -> None:
    # The COG the Item lists was never written (or was deleted): FileNotFoundError, as for a
    # file opened on its own, not an error reading a chunk.
    collection, _ = save_collection(tmp_path)
    with pytest.raises(SourceNotFoundError, match=r"B02\.tif' does not exist") as caught:
        open_stac(pystac.Collection.from_file(str(collection)), ["B02"])
    assert isinstance(caught.value, FileNotFoundError)


def test_a_chain_of_catalogs_without_items_stops_at_the_catalog_limit(tmp_path: Path) -> None:
    """Every catalog of a chain is a request, and none has an Item for ``stac_items`` to
    count: ``stac_catalogs`` bounds them, refusing the fourth before it is read."""
    paths = save_chain(tmp_path, 6)
    paths[3].unlink()  # read, it would be a SourceNotFoundError
    root = pystac.Catalog.from_file(str(paths[0]))
    with limits(stac_catalogs=3):
        with pytest.raises(LimitExceededError, match="stac_catalogs") as caught:
            catalog_items(root)
    assert "c2.json" in str(caught.value) and "4 is more than the limit of 3" in str(caught.value)
