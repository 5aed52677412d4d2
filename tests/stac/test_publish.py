"""Publishing STAC items over GDAL COGs and netCDF4 files as Icechunk and Kerchunk stores.

Every published store is read back without virtualstac (plain icechunk + xarray, fsspec's
reference file system) and compared with rasterio or netCDF4 reading the sources.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fsspec
import icechunk
import netCDF4
import numpy as np
import obstore
import pystac
import pytest
import xarray as xr
from rasterio.transform import from_origin
from tiff_files import write_gdal

from virtualstac import ObjectStoreRegistry
from virtualstac.demo import write_sample_archive
from virtualstac.errors import ChunkReadError, IncompatibleArraysError, SourceNotFoundError
from virtualstac.stac import SCHEMA_URI, PublishError, open_published, publish
from virtualstac.stac.published import PublishedStoreUnreadableError
from virtualstac.stac.published_asset import storage_scheme

if TYPE_CHECKING:
    from conftest import Scenes
    from servers import S3Server

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
ReadBand = Callable[[Path], np.ndarray]
EXTENSIONS = {
    SCHEMA_URI,
    "https://stac-extensions.github.io/virtual-assets/v1.0.0/schema.json",
    "https://stac-extensions.github.io/version/v1.2.0/schema.json",
    "https://stac-extensions.github.io/datacube/v2.2.0/schema.json",
    "https://stac-extensions.github.io/zarr/v1.1.0/schema.json",
}
FILE_SCHEMA = "https://stac-extensions.github.io/file/v2.1.0/schema.json"


def collection_of(items: list[pystac.Item]) -> pystac.Collection:
    """A Collection holding ``items``, which keep the self hrefs of their saved files."""
    collection = pystac.Collection(
        "scenes", "Sentinel-2-like scenes", pystac.Extent.from_items(items)
    )
    for item in items:
        collection.add_item(item, set_parent=False)
    return collection


def by_id(scenes: Scenes, *ids: str) -> list[pystac.Item]:
    return [next(i for i in scenes.items if i.id == wanted) for wanted in ids]


def open_repository(asset: pystac.Asset) -> xr.Dataset:
    """The published repository read with plain icechunk and xarray, from the asset alone."""
    credentials = icechunk.containers_credentials(
        {
            prefix: icechunk.credentials.LocalFileSystemAccess
            for prefix in asset.extra_fields["virtual:containers"]
        }
    )
    repository = icechunk.Repository.open(
        icechunk.local_filesystem_storage(asset.href), authorize_virtual_chunk_access=credentials
    )
    session = repository.readonly_session(snapshot_id=asset.extra_fields["version"])
    return xr.open_zarr(session.store, consolidated=False)


def open_references(href: str) -> xr.Dataset:
    """Kerchunk references (JSON file or parquet directory) read with fsspec and xarray."""
    fs = fsspec.filesystem("reference", fo=href, remote_protocol="file")
    return xr.open_dataset(fs.get_mapper(), engine="zarr", consolidated=False, zarr_format=2)


def assert_bands(dataset: xr.Dataset, scenes: Scenes, ids: list[str], read_band: ReadBand) -> None:
    for index, item_id in enumerate(ids):
        for band in ("B02", "B03"):
            expected = read_band(scenes.files[item_id][band])
            np.testing.assert_array_equal(dataset[band].isel(time=index).values, expected)


def test_icechunk_asset_follows_the_conventions_and_validates(
    scenes: Scenes, tmp_path: Path, validator: Any
) -> None:
    collection = collection_of(by_id(scenes, "S2_0", "S2_1"))
    repository = tmp_path / "scenes.icechunk"
    assert publish(collection, repository, assets=["B02", "B03"]) is collection
    asset = collection.assets["icechunk"]
    fields = asset.extra_fields
    assert asset.href == str(repository)
    assert asset.media_type == "application/vnd.zarr+icechunk"
    assert asset.roles == ["data", "references", "virtual"]
    item_href = str(tmp_path / "S2_0" / "S2_0.json")
    assert fields["vrt:hrefs"][:2] == [
        {"key": "B02", "href": f"{item_href}#/assets/B02"},
        {"key": "B03", "href": f"{item_href}#/assets/B03"},
    ]
    assert len(fields["vrt:hrefs"]) == 4
    snapshot = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repository)))
    assert fields["version"] == fields["virtual:version"] == snapshot.lookup_branch("main")
    assert fields["virtual:format"] == "icechunk"
    assert fields["virtual:items"] == ["S2_0", "S2_1"]
    assert fields["virtual:containers"] == [f"file://{tmp_path}/"]
    assert (fields["zarr:zarr_format"], fields["zarr:node_type"], fields["zarr:consolidated"]) == (
        3,
        "group",
        False,
    )
    dimensions = fields["cube:dimensions"]
    assert dimensions["time"] == {
        "type": "temporal",
        "extent": ["2024-05-01T10:00:00Z", "2024-05-02T10:00:00Z"],
        "step": "P1D",
    }
    assert dimensions["x"] == {
        "type": "spatial",
        "axis": "x",
        "extent": [500005.0, 502995.0],
        "step": 10.0,
        "reference_system": 32633,
    }
    assert dimensions["y"]["step"] == -10.0
    assert fields["cube:variables"]["B02"] == {"dimensions": ["time", "y", "x"], "type": "data"}
    assert fields["cube:variables"]["spatial_ref"]["type"] == "auxiliary"
    assert "storage:refs" not in fields  # local store, local sources: no object storage
    [link] = collection.get_links("store")
    assert (link.href, link.media_type) == (str(repository), asset.media_type)
    assert EXTENSIONS <= set(collection.stac_extensions)
    assert EXTENSIONS <= set(collection.validate(validator=validator))


def test_published_repository_reads_like_the_sources_without_virtualstac(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    collection = collection_of(by_id(scenes, "S2_1", "S2_0"))
    publish(collection, tmp_path / "scenes.icechunk", assets=["B02", "B03"])
    dataset = open_repository(collection.assets["icechunk"])
    assert [str(t)[:10] for t in dataset["time"].values] == ["2024-05-01", "2024-05-02"]
    assert_bands(dataset, scenes, ["S2_0", "S2_1"], read_band)
    assert "32633" in dataset["spatial_ref"].attrs["crs_wkt"]


def test_republishing_appends_only_new_items_and_does_nothing_without_them(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    collection = collection_of(by_id(scenes, "S2_0", "S2_1"))
    repository = tmp_path / "scenes.icechunk"
    publish(collection, repository, assets=["B02", "B03"])
    first = collection.assets["icechunk"].extra_fields["version"]
    collection.add_item(by_id(scenes, "S2_2")[0], set_parent=False)
    publish(collection, repository, assets=["B02", "B03"], progress=True)
    asset = collection.assets["icechunk"]
    second = asset.extra_fields["version"]
    assert second != first
    assert asset.extra_fields["virtual:items"] == ["S2_0", "S2_1", "S2_2"]
    assert len(asset.extra_fields["vrt:hrefs"]) == 6
    assert asset.extra_fields["cube:dimensions"]["time"]["extent"][1] == "2024-05-03T10:00:00Z"
    assert len(collection.get_links("store")) == 1
    history = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repository)))
    commits = [snapshot.id for snapshot in history.ancestry(branch="main")]
    assert commits[:2] == [second, first]
    assert "1 items: S2_2 .. S2_2" in next(history.ancestry(branch="main")).message
    assert_bands(open_repository(asset), scenes, ["S2_0", "S2_1", "S2_2"], read_band)

    before = collection.to_dict()
    publish(collection, repository, assets=["B02", "B03"])
    assert collection.to_dict() == before
    assert history.lookup_branch("main") == second


def test_items_and_searches_publish_into_a_collection_built_from_their_extent(
    scenes: Scenes, tmp_path: Path
) -> None:
    class Search:
        """What publish needs of a pystac-client ItemSearch: ``items()``."""

        def items(self) -> list[pystac.Item]:
            return by_id(scenes, "S2_0", "S2_2")

    built = publish(Search(), tmp_path / "found.icechunk", assets=["B03"])
    assert built.id == "virtual-store"
    assert built.extent.temporal.intervals == [
        [dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC), dt.datetime(2024, 5, 3, 10, tzinfo=dt.UTC)]
    ]
    assert built.assets["icechunk"].extra_fields["virtual:items"] == ["S2_0", "S2_2"]
    given = collection_of([])
    with ThreadPoolExecutor(2) as pool:
        result = publish(
            pystac.ItemCollection(by_id(scenes, "S2_1")),
            tmp_path / "one.icechunk",
            collection=given,
            assets=["B03"],
            asset_key="scenes@latest",
            parallel=pool,
        )
    assert result is given
    assert given.assets["scenes@latest"].extra_fields["virtual:items"] == ["S2_1"]


@pytest.mark.parametrize("layout", ["json", "parquet"])
def test_kerchunk_references_read_like_the_sources_with_fsspec(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand, validator: Any, layout: str
) -> None:
    collection = collection_of(by_id(scenes, "S2_0", "S2_1"))
    target = tmp_path / ("scenes.json" if layout == "json" else "scenes.parq")
    publish(collection, target, format="kerchunk", kerchunk_format=layout, assets=["B02", "B03"])
    collection.add_item(by_id(scenes, "S2_2")[0], set_parent=False)
    publish(collection, target, format="kerchunk", kerchunk_format=layout, assets=["B02", "B03"])
    asset = collection.assets["kerchunk"]
    fields = asset.extra_fields
    assert asset.media_type == "application/vnd.zarr+kerchunk"
    assert (fields["virtual:format"], fields["virtual:parser"]) == (
        "kerchunk",
        f"kerchunk-{layout}",
    )
    assert fields["virtual:items"] == ["S2_0", "S2_1", "S2_2"]
    assert fields["zarr:zarr_format"] == 2
    assert "version" not in fields
    if layout == "json":
        data = target.read_bytes()
        assert fields["file:size"] == len(data)
        assert fields["file:checksum"] == "1220" + hashlib.sha256(data).hexdigest()
        assert FILE_SCHEMA in collection.stac_extensions
    else:
        assert "file:size" not in fields
        assert not list(tmp_path.glob("scenes.parq.tmp-*"))
    assert_bands(open_references(str(target)), scenes, ["S2_0", "S2_1", "S2_2"], read_band)
    assert EXTENSIONS - {"https://stac-extensions.github.io/version/v1.2.0/schema.json"} <= set(
        collection.validate(validator=validator)
    )


@pytest.mark.parametrize("format", ["icechunk", "kerchunk"])
def test_netcdf_items_publish_and_append_along_their_time_axis(
    tmp_path: Path, format: str, make_item: Callable[..., pystac.Item]
) -> None:
    paths = write_sample_archive(tmp_path / "archive", days=3)
    items = []
    for day, path in enumerate(paths):
        item = make_item(
            path.stem,
            dt.datetime(2024, 1, day + 1, tzinfo=dt.UTC),
            {"data": (str(path), "application/x-netcdf")},
        )
        item.set_self_href(str(tmp_path / f"{path.stem}.json"))
        items.append(item)
    collection = collection_of(items[:2])
    target = tmp_path / ("era.icechunk" if format == "icechunk" else "era.json")
    publish(collection, target, format=format)
    collection.add_item(items[2], set_parent=False)
    publish(collection, target, format=format)
    asset = collection.assets[format]
    dataset = open_repository(asset) if format == "icechunk" else open_references(str(target))
    assert dataset.sizes["time"] == 72
    with netCDF4.Dataset(paths[2]) as nc:
        expected = nc["t2m"][:]
    np.testing.assert_allclose(dataset["t2m"].isel(time=slice(48, 72)).values, expected)
    cube = asset.extra_fields["cube:dimensions"]
    assert cube["time"]["step"] == "PT1H"
    assert cube["lat"]["reference_system"] == 4326
    assert asset.extra_fields["cube:variables"]["t2m"]["unit"] == "K"


def snapshot_of(collection: pystac.Collection) -> str:
    return str(collection.assets["icechunk"].extra_fields["version"])


def test_a_source_failing_midway_changes_neither_store_nor_collection(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    collection = collection_of(by_id(scenes, "S2_0", "S2_1"))
    repository = tmp_path / "scenes.icechunk"
    publish(collection, repository, assets=["B02", "B03"])
    before = collection.to_dict()
    collection.add_item(by_id(scenes, "S2_2")[0], set_parent=False)
    with_new_item = collection.to_dict()
    scenes.files["S2_2"]["B03"].unlink()  # the last source of the new item disappears
    with ThreadPoolExecutor(2) as pool, pytest.raises(SourceNotFoundError, match=r"B03\.tif"):
        publish(collection, repository, assets=["B02", "B03"], parallel=pool)
    assert collection.to_dict() == with_new_item
    assert collection.assets["icechunk"].to_dict() == before["assets"]["icechunk"]
    history = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repository)))
    assert history.lookup_branch("main") == snapshot_of(collection)
    assert_bands(
        open_repository(collection.assets["icechunk"]), scenes, ["S2_0", "S2_1"], read_band
    )


@pytest.mark.parametrize("format", ["icechunk", "kerchunk"])
def test_an_item_on_another_grid_is_refused_and_nothing_changes(
    scenes: Scenes,
    tmp_path: Path,
    format: str,
    make_item: Callable[..., pystac.Item],
) -> None:
    collection = collection_of(by_id(scenes, "S2_0", "S2_1"))
    target = tmp_path / ("scenes.icechunk" if format == "icechunk" else "scenes.json")
    publish(collection, target, format=format, assets=["B02"])
    stored = target.read_bytes() if format == "kerchunk" else None
    shifted = tmp_path / "shifted"
    shifted.mkdir()
    write_gdal(  # the same shape, 1 km further east
        shifted / "B02.tif",
        driver="COG",
        transform=from_origin(501000.0, 4000000.0, 10.0, 10.0),
        blocksize=128,
        compress="DEFLATE",
    )
    item = make_item("shifted", dt.datetime(2024, 5, 9, tzinfo=dt.UTC), {"B02": ("./B02.tif", COG)})
    item.set_self_href(str(shifted / "shifted.json"))
    collection.add_item(item, set_parent=False)
    before = collection.to_dict()
    with pytest.raises(IncompatibleArraysError, match="'x' coordinate differs"):
        publish(collection, target, format=format, assets=["B02"])
    assert collection.to_dict() == before
    if format == "kerchunk":
        assert target.read_bytes() == stored
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("scenes")) == [
            "scenes.json"
        ]
    else:
        history = icechunk.Repository.open(icechunk.local_filesystem_storage(str(target)))
        assert history.lookup_branch("main") == snapshot_of(collection)


def test_items_before_the_end_of_the_store_are_refused(scenes: Scenes, tmp_path: Path) -> None:
    collection = collection_of(by_id(scenes, "S2_1", "S2_2"))
    publish(collection, tmp_path / "scenes.icechunk", assets=["B02"])
    collection.add_item(by_id(scenes, "S2_0")[0], set_parent=False)
    with pytest.raises(IncompatibleArraysError, match="can only be appended to"):
        publish(collection, tmp_path / "scenes.icechunk", assets=["B02"])


def test_targets_not_recorded_and_stale_collections_are_refused(
    scenes: Scenes, tmp_path: Path
) -> None:
    items = by_id(scenes, "S2_0", "S2_1")
    repository = tmp_path / "scenes.icechunk"
    publisher = collection_of(items[:1])
    publish(publisher, repository, assets=["B02"])
    with pytest.raises(PublishError, match="already holds an Icechunk repository"):
        publish(collection_of(items), repository, assets=["B02"])
    references = tmp_path / "refs.json"
    references.write_text("{}")
    with pytest.raises(PublishError, match="already exists"):
        publish(collection_of(items), references, format="kerchunk", assets=["B02"])

    stale = pystac.Collection.from_dict(publisher.to_dict())
    stale.add_item(items[1], set_parent=False)
    publisher.add_item(items[1], set_parent=False)
    publish(publisher, repository, assets=["B02"])
    with pytest.raises(PublishError, match="someone else published since"):
        publish(stale, repository, assets=["B02"])


def test_items_without_self_href_cannot_be_pointed_to(scenes: Scenes, tmp_path: Path) -> None:
    item = by_id(scenes, "S2_0")[0].clone()
    item.make_asset_hrefs_absolute()
    item.set_self_href(None)
    with pytest.raises(PublishError, match="no self href"):
        publish([item], tmp_path / "x.icechunk", assets=["B02"])
    assert not (tmp_path / "x.icechunk").exists()


def test_the_published_collection_round_trips_through_json(scenes: Scenes, tmp_path: Path) -> None:
    collection = collection_of(by_id(scenes, "S2_0"))
    publish(collection, tmp_path / "scenes.icechunk", assets=["B02"])
    collection.normalize_hrefs(str(tmp_path / "catalog"))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    saved = json.loads((tmp_path / "catalog" / "collection.json").read_text())
    assert saved["assets"]["icechunk"]["virtual:items"] == ["S2_0"]
    read = pystac.Collection.from_file(str(tmp_path / "catalog" / "collection.json"))
    assert read.assets["icechunk"].get_absolute_href() == str(tmp_path / "scenes.icechunk")


def test_a_codec_mismatch_while_writing_commits_nothing(
    scenes: Scenes, tmp_path: Path, make_item: Callable[..., pystac.Item], read_band: ReadBand
) -> None:
    collection = collection_of(by_id(scenes, "S2_0", "S2_1"))
    repository = tmp_path / "scenes.icechunk"
    publish(collection, repository, assets=["B02", "B03"])
    late = tmp_path / "late"
    late.mkdir()
    options = {"driver": "COG", "blocksize": 128, "width": 300, "height": 200}
    write_gdal(late / "B02.tif", compress="DEFLATE", **options)
    write_gdal(late / "B03.tif", compress="ZSTD", **options)  # B02 appends, then B03 cannot
    item = make_item(
        "late",
        dt.datetime(2024, 5, 9, tzinfo=dt.UTC),
        {"B02": ("./B02.tif", COG), "B03": ("./B03.tif", COG)},
    )
    item.set_self_href(str(late / "late.json"))
    collection.add_item(item, set_parent=False)
    before = collection.to_dict()
    with pytest.raises(IncompatibleArraysError, match=r"append to 'B03'.*codecs"):
        publish(collection, repository, assets=["B02", "B03"])
    assert collection.to_dict() == before
    history = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repository)))
    assert history.lookup_branch("main") == snapshot_of(collection)
    published = open_repository(collection.assets["icechunk"])
    assert published.sizes["time"] == 2
    assert_bands(published, scenes, ["S2_0", "S2_1"], read_band)


def test_object_store_target_and_sources_record_their_storage_schemes(
    scenes: Scenes, tmp_path: Path, s3_server: S3Server, read_band: ReadBand, validator: Any
) -> None:
    bucket = s3_server.create_bucket()
    items = []
    for item in by_id(scenes, "S2_0", "S2_1"):
        copy = item.clone()
        for key, asset in copy.assets.items():
            asset.href = s3_server.upload(
                bucket, f"scenes/{item.id}/{key}.tif", scenes.files[item.id][key]
            )
        copy.set_self_href(str(tmp_path / f"{item.id}.json"))
        items.append(copy)
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    collection = collection_of(items)
    publish(
        collection, f"s3://{bucket}/published/scenes.icechunk", assets=["B02"], registry=registry
    )
    publish(
        collection,
        f"s3://{bucket}/published/scenes.json",
        format="kerchunk",
        assets=["B02"],
        registry=registry,
    )
    scheme = f"custom-s3-{bucket}"
    assert collection.extra_fields["storage:schemes"] == {
        scheme: {
            "type": "custom-s3",
            "platform": s3_server.endpoint + "/{bucket}",
            "bucket": bucket,
            "region": "us-east-1",
        }
    }
    icechunk_asset, kerchunk_asset = collection.assets["icechunk"], collection.assets["kerchunk"]
    assert icechunk_asset.href == f"s3://{bucket}/published/scenes.icechunk"
    assert icechunk_asset.extra_fields["storage:refs"] == [scheme]
    assert icechunk_asset.extra_fields["virtual:containers"] == [f"s3://{bucket}/scenes/"]
    assert "testing" not in json.dumps(collection.to_dict())  # no credentials are published
    assert "https://stac-extensions.github.io/storage/v2.0.0/schema.json" in collection.validate(
        validator=validator
    )
    # Plain icechunk, with what the asset and the storage scheme say plus the reader's keys.
    keys = {"access_key_id": "testing", "secret_access_key": "testing"}
    storage = icechunk.s3_storage(
        bucket=bucket,
        prefix="published/scenes.icechunk",
        region="us-east-1",
        endpoint_url=s3_server.endpoint,
        allow_http=True,
        force_path_style=True,
        **keys,
    )
    credentials = icechunk.containers_credentials(
        {f"s3://{bucket}/scenes/": icechunk.s3_static_credentials(**keys)}
    )
    repository = icechunk.Repository.open(storage, authorize_virtual_chunk_access=credentials)
    session = repository.readonly_session(snapshot_id=icechunk_asset.extra_fields["version"])
    plain = xr.open_zarr(session.store, consolidated=False)
    np.testing.assert_array_equal(
        plain["B02"].isel(time=1).values, read_band(scenes.files["S2_1"]["B02"])
    )
    data = bytes(
        obstore.get(registry.resolve(kerchunk_asset.href)[0], "published/scenes.json").bytes()
    )
    assert kerchunk_asset.extra_fields["file:checksum"] == "1220" + hashlib.sha256(data).hexdigest()
    assert json.loads(data)["refs"]["B02/1.0.0"][0].startswith(f"s3://{bucket}/scenes/S2_1/")
    for key in ("icechunk", "kerchunk"):
        opened = open_published(collection.assets[key], registry=registry)
        np.testing.assert_array_equal(
            opened["B02"].isel(time=0).values, read_band(scenes.files["S2_0"]["B02"])
        )


def test_without_a_registry_readers_use_the_storage_schemes_and_the_environment(
    scenes: Scenes,
    tmp_path: Path,
    s3_server: S3Server,
    read_band: ReadBand,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket = s3_server.create_bucket()
    item = by_id(scenes, "S2_0")[0].clone()
    item.assets = {"B02": item.assets["B02"]}
    item.assets["B02"].href = s3_server.upload(bucket, "S2_0/B02.tif", scenes.files["S2_0"]["B02"])
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    collection = collection_of([item])
    for format, name in (("icechunk", "scenes.icechunk"), ("kerchunk", "scenes.json")):
        publish(collection, f"s3://{bucket}/{name}", format=format, registry=registry)
    read = pystac.Collection.from_dict(collection.to_dict())
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_access_key)
    for format in ("icechunk", "kerchunk"):
        # The endpoint comes from the catalog: the credentials go there only when trusted.
        with pytest.raises((PublishedStoreUnreadableError, ChunkReadError)):
            open_published(read.assets[format])["B02"].isel(time=0).values  # noqa: B018
        opened = open_published(read.assets[format], trust_catalog_endpoints=True)
        expected = read_band(scenes.files["S2_0"]["B02"])
        np.testing.assert_array_equal(opened["B02"].isel(time=0).values, expected)


def test_storage_schemes_of_aws_buckets_and_of_other_urls() -> None:
    url = "s3://sentinel-cogs/sentinel-s2-l2a-cogs/"
    assert storage_scheme(url, {"region": "us-west-2", "skip_signature": "true"}) == (
        "aws-s3-sentinel-cogs",
        {
            "type": "aws-s3",
            "platform": "https://{bucket}.s3.{region}.amazonaws.com",
            "bucket": "sentinel-cogs",
            "region": "us-west-2",
            "anonymous": True,
        },
    )
    assert storage_scheme("s3://payers/x", {"request_payer": True})[1]["requester_pays"] is True
    assert storage_scheme("https://data.example.org/x/", {}) is None
    assert storage_scheme("file:///data/", {}) is None


def test_an_asset_key_holding_another_format_is_refused(scenes: Scenes, tmp_path: Path) -> None:
    collection = collection_of(by_id(scenes, "S2_0"))
    publish(collection, tmp_path / "scenes.icechunk", assets=["B02"], asset_key="store")
    with pytest.raises(PublishError, match="not a published kerchunk store"):
        publish(
            collection, tmp_path / "s.json", format="kerchunk", assets=["B02"], asset_key="store"
        )
