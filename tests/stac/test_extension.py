"""The virtual: STAC extension: pystac's extension API, the shipped schema, offline validation."""

from __future__ import annotations

import datetime as dt
import json
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pystac
import pytest
from pystac.errors import STACValidationError
from pystac.validation import JsonSchemaSTACValidator

from virtualstac.stac import (
    SCHEMA_URI,
    VIRTUAL_EXTENSION_HOOKS,
    AssetVirtualExtension,
    CollectionVirtualExtension,
    ItemVirtualExtension,
    VirtualExtension,
    load_schema,
    register_schema,
)

BBOX = [0.0, 0.0, 1.0, 1.0]
GEOMETRY = {
    "type": "Polygon",
    "coordinates": [[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]]],
}


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any schema fetched over the network fails the test: validation must use local copies."""

    read_text = pystac.stac_io.DefaultStacIO.read_text

    def local_only(self: Any, source: Any, *args: Any, **kwargs: Any) -> str:
        if str(source).startswith(("http://", "https://")):
            raise AssertionError(f"tried to fetch {source}")
        return read_text(self, source, *args, **kwargs)

    monkeypatch.setattr(pystac.stac_io.DefaultStacIO, "read_text", local_only)


def messages(error: STACValidationError) -> list[str]:
    """Every message of the jsonschema errors behind a validation failure, nested ones too."""
    found: list[str] = []
    pending = list(error.source or [])
    while pending:
        current = pending.pop()
        found.append(current.message)
        pending.extend(current.context or [])
    return found


def make_item() -> pystac.Item:
    item = pystac.Item("scene", GEOMETRY, BBOX, dt.datetime(2024, 5, 1, tzinfo=dt.UTC), {})
    item.add_asset(
        "B04",
        pystac.Asset("s3://bucket/B04.tif", media_type=pystac.MediaType.COG, roles=["data"]),
    )
    item.add_asset(
        "era5",
        pystac.Asset("s3://bucket/era5.nc", media_type="application/x-netcdf", roles=["data"]),
    )
    return item


def make_collection() -> pystac.Collection:
    extent = pystac.Extent(
        pystac.SpatialExtent([BBOX]),
        pystac.TemporalExtent([[dt.datetime(2024, 1, 1, tzinfo=dt.UTC), None]]),
    )
    return pystac.Collection("scenes", "Scenes", extent)


def test_ext_requires_the_extension_unless_asked_to_add_it() -> None:
    item = make_item()
    with pytest.raises(pystac.ExtensionNotImplemented, match=r"does not declare .*open_stac"):
        VirtualExtension.ext(item)
    asset = pystac.Asset("s3://bucket/a.nc")
    item.add_asset("data", asset)
    with pytest.raises(pystac.ExtensionNotImplemented, match="add_if_missing=True"):
        VirtualExtension.ext(asset)
    extension = VirtualExtension.ext(item, add_if_missing=True)
    assert isinstance(extension, ItemVirtualExtension)
    assert item.stac_extensions == [SCHEMA_URI]
    assert VirtualExtension.has_extension(item)
    VirtualExtension.remove_from(item)
    assert not VirtualExtension.has_extension(item)


def test_ext_dispatches_on_type_and_refuses_others() -> None:
    item = make_item()
    collection = make_collection()
    assert isinstance(VirtualExtension.ext(item.assets["B04"], True), AssetVirtualExtension)
    assert isinstance(VirtualExtension.ext(collection, True), CollectionVirtualExtension)
    catalog = pystac.Catalog("root", "A catalog")
    with pytest.raises(pystac.ExtensionTypeError, match="does not apply to type 'Catalog'"):
        VirtualExtension.ext(catalog)  # type: ignore[type-var]
    results = pystac.ItemCollection([item])  # what a search returns: open_stac opens it
    with pytest.raises(pystac.ExtensionTypeError, match=r"open_stac\(items\)"):
        VirtualExtension.ext(results)  # type: ignore[call-overload]
    with pytest.raises(pystac.STACError, match="no owner"):
        VirtualExtension.ext(pystac.Asset("x.tif"), add_if_missing=True)


def test_fields_round_trip_and_assets_fall_back_to_item_properties(tmp_path: Path) -> None:
    item = make_item()
    VirtualExtension.ext(item, add_if_missing=True).apply(concat_dim="time", group="/")
    era5 = VirtualExtension.ext(item.assets["era5"])
    era5.apply(
        parser="hdf",
        loadable_variables=["time", "lat", "lon"],
        drop_variables=["time_bnds"],
        group="surface",
    )
    VirtualExtension.ext(item.assets["B04"]).variable = "red"

    item.set_self_href(str(tmp_path / "scene.json"))
    item.save_object()
    read = pystac.Item.from_file(str(tmp_path / "scene.json"))
    era5_read = VirtualExtension.ext(read.assets["era5"])
    assert era5_read.parser == "hdf"
    assert era5_read.loadable_variables == ["time", "lat", "lon"]
    assert era5_read.drop_variables == ["time_bnds"]
    assert era5_read.group == "surface"  # the asset's own value wins over the item's
    assert era5_read.concat_dim == "time"  # from the item's properties
    red = VirtualExtension.ext(read.assets["B04"])
    assert (red.variable, red.parser, red.group) == ("red", None, "/")
    assert read.assets["B04"].extra_fields == {"virtual:variable": "red"}
    read.validate()


def test_setting_none_removes_a_field_and_setters_check_values() -> None:
    item = make_item()
    asset = VirtualExtension.ext(item.assets["B04"], add_if_missing=True)
    asset.parser = "tiff"
    asset.parser = None
    assert "virtual:parser" not in item.assets["B04"].extra_fields
    with pytest.raises(ValueError, match="virtual:parser must be one of tiff, hdf"):
        asset.parser = "grib"
    with pytest.raises(ValueError, match="virtual:format must be one of icechunk, kerchunk"):
        asset.format = "parquet"
    with pytest.raises(ValueError, match="without '/'"):
        asset.variable = "a/b"


def test_published_asset_on_a_collection_validates() -> None:
    collection = make_collection()
    asset = pystac.Asset(
        "s3://bucket/scenes.icechunk/",
        media_type="application/vnd.zarr+icechunk",
        roles=["data", "virtual"],
    )
    collection.add_asset("scenes@v1", asset)
    VirtualExtension.ext(asset, add_if_missing=True).apply(
        format="icechunk",
        version="1CECHNKREP0F1RSTCMT0",
        containers=["s3://bucket/scenes/", "https://data.example.org/scenes/"],
        items=["scene-1", "scene-2"],
    )
    summaries = VirtualExtension.summaries(collection)
    summaries.format = ["icechunk"]
    summaries.parser = ["tiff"]
    summaries.variable = ["B04", "B08"]
    assert summaries.format == ["icechunk"]
    assert summaries.parser == ["tiff"]
    assert summaries.variable == ["B04", "B08"]
    assert collection.summaries.to_dict()["virtual:format"] == ["icechunk"]
    read = pystac.Collection.from_dict(collection.to_dict())
    published = VirtualExtension.ext(read.assets["scenes@v1"])
    assert published.format == "icechunk"
    assert published.version == "1CECHNKREP0F1RSTCMT0"
    assert published.containers == ["s3://bucket/scenes/", "https://data.example.org/scenes/"]
    assert published.items == ["scene-1", "scene-2"]
    assert SCHEMA_URI in collection.validate()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"virtual:parser": "grib"}, "is not one of"),
        ({"virtual:parser": 3}, "is not of type 'string'"),
        ({"virtual:loadable_variables": "time"}, "is not of type 'array'"),
        ({"virtual:drop_variables": ["a", "a"]}, "non-unique elements"),
        ({"virtual:variable": "a/b"}, "does not match"),
        ({"virtual:format": "zip"}, "is not one of"),
        ({"virtual:version": "abc"}, "'virtual:format' is a dependency of 'virtual:version'"),
        ({"virtual:format": "kerchunk", "virtual:containers": ["bucket/x"]}, "does not match"),
        ({"virtual:items": [1]}, "is not of type 'string'"),
        ({"virtual:parsers": "tiff"}, "'virtual:parsers' does not match any of the regexes"),
        ({"virtual:format": "icechunk", "virtual:root": "data/"}, "does not match"),
        (
            {"virtual:format": "icechunk", "virtual:root_levels": 1},
            "'virtual:root' is a dependency of 'virtual:root_levels'",
        ),
        (
            {"virtual:format": "icechunk", "virtual:root": "file:///a/", "virtual:root_levels": -1},
            "is less than the minimum of 0",
        ),
        (
            {
                "virtual:format": "icechunk",
                "virtual:root": "file:///a/",
                "virtual:root_levels": "1",
            },
            "is not of type 'integer'",
        ),
    ],
)
def test_invalid_fields_fail_validation(fields: dict[str, Any], message: str) -> None:
    item = make_item()
    VirtualExtension.add_to(item)
    item.assets["B04"].extra_fields.update(fields)
    with pytest.raises(STACValidationError, match=SCHEMA_URI) as failure:
        item.validate()
    assert any(message in text for text in messages(failure.value)), messages(failure.value)


def test_invalid_item_properties_fail_validation() -> None:
    item = make_item()
    VirtualExtension.add_to(item)
    item.properties["virtual:concat_dim"] = ["time"]
    with pytest.raises(STACValidationError, match="is not of type 'string'"):
        item.validate()


def test_schema_is_draft_07_with_the_schema_uri_as_id() -> None:
    schema = load_schema()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["$id"] == SCHEMA_URI
    assert set(schema["definitions"]["fields"]["properties"]["virtual:parser"]["enum"]) == {
        "tiff",
        "hdf",
        "netcdf3",
        "zarr",
        "kerchunk-json",
        "kerchunk-parquet",
    }


def test_register_schema_fills_a_new_validator() -> None:
    validator = JsonSchemaSTACValidator()
    assert SCHEMA_URI not in validator.schema_cache
    register_schema(validator)
    assert validator.schema_cache[SCHEMA_URI] == load_schema()
    item = make_item()
    VirtualExtension.ext(item, add_if_missing=True).parser = "tiff"
    assert SCHEMA_URI in pystac.validation.validate(item, validator=validator)


def test_hooks_recognise_the_extension_in_dicts() -> None:
    assert VIRTUAL_EXTENSION_HOOKS.schema_uri == SCHEMA_URI
    assert VIRTUAL_EXTENSION_HOOKS.has_extension({"stac_extensions": [SCHEMA_URI]})
    assert not VIRTUAL_EXTENSION_HOOKS.has_extension({"stac_extensions": []})
    item = make_item()
    VirtualExtension.add_to(item)
    document = json.loads(json.dumps(item.to_dict()))
    assert pystac.Item.from_dict(document).stac_extensions == [SCHEMA_URI]


def test_hooks_are_advertised_through_the_pystac_entry_point() -> None:
    advertised = [e for e in entry_points(group="pystac.extensions") if e.name == "virtual"]
    if not advertised:
        pytest.skip("virtualstac is installed without its pystac.extensions entry point")
    assert advertised[0].load() is VIRTUAL_EXTENSION_HOOKS
    pystac.EXTENSION_HOOKS._discover()
    assert pystac.EXTENSION_HOOKS.hooks[SCHEMA_URI] is VIRTUAL_EXTENSION_HOOKS
