"""Hostile catalogs: what a catalog may make us read, and what needs the user's authorization.

Every catalog here is written to disk with pystac and read back, as a user would receive it. By
default a catalog may make us read only the assets it names, at their exact location; Kerchunk
references may point at other assets of their Item; a published store's containers must lie in
its home; the user's credentials go only to endpoints the user chose. See docs/security.md.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import icechunk
import numpy as np
import pystac
import pytest
import xarray as xr
import zarr

from faulty_servers import QUICK, FaultyServer
from servers import S3Server
from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.cli import main
from virtualstac.demo import write_sample_archive
from virtualstac.errors import SourceNotFoundError, UnregisteredURLError
from virtualstac.stac import open_published, open_stac, publish, stac_registry
from virtualstac.stac.documents import read_stac
from virtualstac.stac.invalid import collection_of
from virtualstac.stac.published import scheme_options
from virtualstac.stac.storage import StorageSchemeError

NETCDF = "application/x-netcdf"
WHEN = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
MakeItem = Callable[..., pystac.Item]


def authorize_message(prefix: str) -> str:
    """The part of a refusal that tells the user what to authorize."""
    return re.escape(f"authorize=['{prefix}']")


def saved(item: pystac.Item, directory: Path) -> pystac.Item:
    """``item`` as a user receives it: written to ``directory`` and read back."""
    item.set_self_href(str(directory / f"{item.id}.json"))
    item.save_object(include_self_link=True)
    return pystac.Item.from_file(str(directory / f"{item.id}.json"))


def references_to(source: Path, refs: Path) -> Path:
    """Kerchunk JSON references to every chunk of the netCDF file ``source``."""
    open_virtual_dataset(str(source)).virtual.to_kerchunk(refs, format="json")
    return refs


def with_references(item: pystac.Item, refs: Path) -> pystac.Item:
    item.add_asset(
        "refs", pystac.Asset(str(refs), media_type="application/json", roles=["references"])
    )
    return item


def assert_same_values(opened: xr.Dataset, path: Path) -> None:
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_equal(opened["t2m"].load(), direct["t2m"].load())


# -- Kerchunk assets ----------------------------------------------------------------------------


def test_a_kerchunk_asset_cannot_read_a_secret_next_to_a_decoy_asset(
    tmp_path: Path, make_item: MakeItem
) -> None:
    data = tmp_path / "data"
    decoy, secret = write_sample_archive(data, days=2)
    refs = references_to(secret, data / "refs.json")
    hostile = with_references(make_item("hostile", WHEN, {"decoy": (str(decoy), NETCDF)}), refs)
    item = saved(hostile, tmp_path / "catalog")

    with pytest.raises(UnregisteredURLError, match=authorize_message(data.as_uri() + "/")):
        open_stac(item, ["refs"]).load()
    assert secret.as_uri() not in stac_registry(item)

    trusted = open_stac(item, ["refs"], authorize=[secret.as_uri()])
    assert_same_values(trusted, secret)


def test_kerchunk_references_may_read_the_other_assets_of_their_item(
    tmp_path: Path, make_item: MakeItem
) -> None:
    (source,) = write_sample_archive(tmp_path / "data", days=1)
    refs = references_to(source, tmp_path / "data" / "refs.json")
    item = make_item("index", WHEN, {"source": (str(source), NETCDF)})
    item = saved(with_references(item, refs), tmp_path / "catalog")

    assert_same_values(open_stac(item, ["refs"]), source)


def test_a_zarr_asset_allows_its_own_directory_and_not_its_parent(
    tmp_path: Path, make_item: MakeItem
) -> None:
    (source,) = write_sample_archive(tmp_path / "data", days=1)
    store = tmp_path / "data" / "store.zarr"
    with xr.open_dataset(source, engine="netcdf4") as dataset:
        dataset.to_zarr(store, zarr_format=3, consolidated=False)
    for href in (str(store), str(store) + "/"):
        item = make_item("zarr", WHEN, {"store": (href, "application/vnd.zarr")})
        registry = stac_registry(saved(item, tmp_path / "catalog"))

        assert (store / "zarr.json").as_uri() in registry
        assert (store / "t2m" / "zarr.json").as_uri() in registry
        assert source.as_uri() not in registry
        assert (tmp_path / "data" / "store.zarr.bak").as_uri() not in registry


def test_a_remote_catalog_may_not_name_local_files(tmp_path: Path, make_item: MakeItem) -> None:
    (source,) = write_sample_archive(tmp_path / "data", days=1)
    item = make_item("remote", WHEN, {"data": (source.as_uri(), NETCDF)})
    item.set_self_href("https://stac.example.org/items/remote.json")

    assert source.as_uri() not in stac_registry(item)
    with pytest.raises(UnregisteredURLError, match=authorize_message(source.parent.as_uri() + "/")):
        open_stac(item)
    assert_same_values(open_stac(item, authorize=[source.as_uri()]), source)


def test_search_results_without_self_links_may_not_name_local_files(tmp_path: Path) -> None:
    """A STAC API need not give its Items self links: one that omits them must not pass them
    off as Items the user built, whose local files (named as assets, and read through the
    Kerchunk references next to them) would open without authorization."""
    secret = tmp_path / "id_rsa"
    secret.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----")
    array = {"zarr_format": 2, "shape": [8], "chunks": [8], "dtype": "|u1", "compressor": None,
             "filters": None, "fill_value": None, "order": "C"}  # fmt: skip
    refs = {".zgroup": '{"zarr_format": 2}', "key/.zarray": json.dumps(array),
            "key/.zattrs": '{"_ARRAY_DIMENSIONS": ["x"]}',
            "key/0": [str(secret), 0, 8]}  # fmt: skip
    with FaultyServer({"refs.json": json.dumps(refs).encode()}, "serve") as server:
        landing = {"type": "Catalog", "stac_version": "1.1.0", "id": "api", "description": "api",
                   "conformsTo": ["https://api.stacspec.org/v1.0.0/core",
                                  "https://api.stacspec.org/v1.0.0/item-search"],
                   "links": [{"rel": "self", "href": server.url_for("api")},
                             {"rel": "search", "href": server.url_for("search"),
                              "type": "application/geo+json", "method": "POST"}]}  # fmt: skip
        assets = {
            "key": {"href": str(secret), "type": "application/octet-stream"},
            "refs": {"href": server.url_for("refs.json"), "type": "application/json",
                     "roles": ["references"]},
        }  # fmt: skip
        lure = {"type": "Feature", "stac_version": "1.1.0", "id": "lure", "geometry": None,
                "properties": {"datetime": "2024-01-01T00:00:00Z"}, "links": [],
                "assets": assets}  # fmt: skip
        page = {"type": "FeatureCollection", "features": [lure], "links": []}
        server.put("api", json.dumps(landing).encode())
        server.put("search", json.dumps(page).encode())
        search = read_stac(server.url_for("api"), QUICK)

        assert secret.as_uri() not in stac_registry(list(search.items()))
        with pytest.raises(UnregisteredURLError, match=re.escape(secret.as_uri())):
            open_stac(search, ["refs"])["key"].load()


def private_catalog(tmp_path: Path, make_item: MakeItem) -> tuple[Path, Path]:
    """A local catalog of the user's own, its Item naming a local file; returns both."""
    (source,) = write_sample_archive(tmp_path / "private", days=1)
    catalog = pystac.Catalog("private", "the user's own archive")
    catalog.add_item(make_item("mine", WHEN, {"data": (source.as_uri(), NETCDF)}))
    catalog.normalize_hrefs(str(tmp_path / "private"))
    catalog.save(pystac.CatalogType.ABSOLUTE_PUBLISHED)
    return tmp_path / "private" / "catalog.json", source


@pytest.mark.parametrize("rel", ["child", "item", "root"])
def test_a_remote_catalog_may_not_link_to_local_documents(
    tmp_path: Path, make_item: MakeItem, rel: str
) -> None:
    """A local document linked from a served catalog would be read as if the user had opened
    it: its Items are local, so their local files would open without authorization."""
    private, _ = private_catalog(tmp_path, make_item)
    target = private.parent / "mine" / "mine.json" if rel == "item" else private
    links = [{"rel": rel, "href": target.as_uri()}]
    if rel == "root":  # read on the way to the catalog's items
        links.append({"rel": "item", "href": "./scene.json"})
    lure = {"type": "Catalog", "stac_version": "1.1.0", "id": "lure", "description": "lure",
            "links": links}  # fmt: skip
    with FaultyServer({"catalog.json": json.dumps(lure).encode()}, "serve") as server:
        url = server.url_for("catalog.json")
        with pytest.raises(UnregisteredURLError, match=re.escape(target.as_uri())) as caught:
            open_stac(read_stac(url, QUICK))
    assert url in str(caught.value)


def test_a_remote_item_may_not_link_to_a_local_collection(
    tmp_path: Path, make_item: MakeItem
) -> None:
    private, _ = private_catalog(tmp_path, make_item)
    item = make_item("remote", WHEN, {})
    item.add_link(pystac.Link("collection", private.as_uri()))
    item.set_self_href("https://stac.example.org/items/remote.json")
    with pytest.raises(UnregisteredURLError, match=re.escape(private.as_uri())):
        collection_of(item)


def test_links_below_an_authorized_directory_are_judged_by_their_target(
    tmp_path: Path, make_item: MakeItem
) -> None:
    secret_dir, data = tmp_path / "private", tmp_path / "data"
    (secret,) = write_sample_archive(secret_dir, days=1)
    data.mkdir()
    (data / "innocent.nc").symlink_to(secret)
    refs = references_to(data / "innocent.nc", data / "refs.json")
    item = saved(with_references(make_item("linked", WHEN, {}), refs), tmp_path / "catalog")

    with pytest.raises(UnregisteredURLError, match=authorize_message(secret_dir.as_uri() + "/")):
        open_stac(item, ["refs"], authorize=[data.as_uri() + "/"]).load()
    trusted = open_stac(item, ["refs"], authorize=[secret_dir.as_uri() + "/"])
    assert_same_values(trusted, secret)


# -- published stores ---------------------------------------------------------------------------


def published_catalog(
    items: list[pystac.Item], root: Path, store: Path, format: str = "icechunk"
) -> Path:
    """A collection of ``items`` published to ``store`` and saved below ``root``."""
    extent = pystac.Extent(
        pystac.SpatialExtent([[14.99, 36.1, 15.03, 36.15]]), pystac.TemporalExtent([[WHEN, None]])
    )
    collection = pystac.Collection("archive", "daily temperature", extent)
    for item in items:
        collection.add_item(item.clone())
    collection.normalize_hrefs(str(root))
    publish(collection, store, format=format)  # type: ignore[arg-type]
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    return root / "collection.json"


@pytest.mark.parametrize("format", ["icechunk", "kerchunk"])
def test_containers_outside_the_stores_home_need_authorization(
    tmp_path: Path,
    netcdf_items: tuple[list[pystac.Item], list[Path]],
    format: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A downloaded catalog whose store reads the user's files elsewhere on the disk.
    items, paths = netcdf_items
    downloaded = tmp_path / "downloads" / "catalog"
    store = downloaded / ("store.icechunk" if format == "icechunk" else "store.json")
    path = published_catalog(items, downloaded, store, format)
    container = paths[0].parent.as_uri() + "/"
    collection = pystac.Collection.from_file(str(path))

    with pytest.raises(UnregisteredURLError, match=authorize_message(container)):
        open_stac(collection)
    assert main(["info", str(path)]) == 1
    assert f"authorize=['{container}']" in capsys.readouterr().err

    opened = open_stac(collection, authorize=[container])
    with xr.open_dataset(paths[0], engine="netcdf4") as direct:
        xr.testing.assert_equal(opened["t2m"].isel(time=slice(0, 24)).load(), direct["t2m"])
    assert main(["info", str(path), "--authorize", container]) == 0


def test_a_store_published_next_to_its_sources_and_catalog_opens_without_authorization(
    tmp_path: Path, make_item: MakeItem
) -> None:
    # The layout of the demo: data/, stac/ and stores/ below one project directory.
    paths = write_sample_archive(tmp_path / "project" / "data", days=2)
    items = [
        make_item(p.stem, dt.datetime(2024, 1, i + 1, tzinfo=dt.UTC), {"data": (str(p), NETCDF)})
        for i, p in enumerate(paths)
    ]
    store = tmp_path / "project" / "stores" / "archive.icechunk"
    path = published_catalog(items, tmp_path / "project" / "stac", store)

    opened = open_stac(pystac.Collection.from_file(str(path)))
    assert opened.sizes["time"] == 48


def test_a_linked_source_in_a_published_store_is_refused(
    tmp_path: Path, make_item: MakeItem
) -> None:
    (secret,) = write_sample_archive(tmp_path / "private", days=1)
    downloaded = tmp_path / "downloads" / "catalog"
    (downloaded / "data").mkdir(parents=True)
    link = downloaded / "data" / "day.nc"
    link.symlink_to(secret)
    item = make_item("day", WHEN, {"data": (str(link), NETCDF)})
    path = published_catalog([item], downloaded, downloaded / "store.icechunk")
    collection = pystac.Collection.from_file(str(path))
    assert collection.assets["icechunk"].extra_fields["virtual:containers"] == [
        (downloaded / "data").as_uri() + "/"
    ]

    with pytest.raises(UnregisteredURLError, match=re.escape(f"resolves to '{secret}'")):
        open_stac(collection)


# -- credentials --------------------------------------------------------------------------------


class _RecordingHandler(BaseHTTPRequestHandler):
    """Answers every request with 404 and keeps its headers, as an attacker's endpoint would."""

    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        """Record the request's headers; answer 404."""
        self.seen.append({name.lower(): value for name, value in self.headers.items()})
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        """As GET."""
        self.do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""


@pytest.fixture
def recording_endpoint() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A loopback HTTP server recording the headers of every request it receives."""
    seen: list[dict[str, str]] = []
    handler = type("Handler", (_RecordingHandler,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_catalog_chosen_endpoint_gets_no_credentials(
    tmp_path: Path,
    make_item: MakeItem,
    recording_endpoint: tuple[str, list[dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint, seen = recording_endpoint
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUSERSOWNKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "users-own-secret")
    item = make_item("lure", WHEN, {"data": ("s3://bucket/data.nc", NETCDF)})
    item.properties["storage:schemes"] = {
        "theirs": {"type": "custom-s3", "platform": endpoint, "region": "us-east-1"}
    }
    item.assets["data"].extra_fields["storage:refs"] = ["theirs"]
    item = saved(item, tmp_path / "catalog")

    with pytest.raises(SourceNotFoundError):
        open_stac(item)
    assert seen
    assert not [headers for headers in seen if "authorization" in headers]

    seen.clear()
    with pytest.raises(SourceNotFoundError):
        open_stac(item, trust_catalog_endpoints=True)
    assert all("AKIAUSERSOWNKEY" in headers.get("authorization", "") for headers in seen)


def hostile_icechunk_store(
    path: Path, container: str, endpoint: str, etag: str
) -> pystac.Collection:
    """A published Icechunk store whose saved container ``container`` names ``endpoint`` (the
    repository's author's choice), with two chunks of its source ``values.bin`` (whose ETag is
    ``etag``) recorded with two different checksums: virtualstac leaves the second to
    Icechunk's own clients, built from the saved containers."""
    storage = icechunk.local_filesystem_storage(str(path / "store.icechunk"))
    config = icechunk.RepositoryConfig.default()
    s3 = icechunk.s3_store(
        region="us-east-1", endpoint_url=endpoint, allow_http=True, s3_compatible=True
    )
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(container, s3))
    anonymous = icechunk.containers_credentials({container: icechunk.s3_anonymous_credentials()})
    repository = icechunk.Repository.create(
        storage, config, authorize_virtual_chunk_access=anonymous
    )
    session = repository.writable_session("main")
    array = zarr.group(session.store).create_array(
        "v", shape=(2,), chunks=(1,), dtype="<i8", dimension_names=["x"], compressors=None
    )
    assert array.path == "v"
    for index, checksum in enumerate([etag, dt.datetime(2100, 1, 1, tzinfo=dt.UTC)]):
        session.store.set_virtual_ref(
            f"v/c/{index}",
            container + "values.bin",
            offset=8 * index,
            length=8,
            checksum=checksum,
        )
    session.commit("values")
    collection = pystac.Collection(
        "hostile",
        "a published store",
        pystac.Extent(
            pystac.SpatialExtent([[-180, -90, 180, 90]]), pystac.TemporalExtent([[WHEN, None]])
        ),
    )
    fields = {"virtual:format": "icechunk", "virtual:containers": [container]}
    collection.add_asset(
        "icechunk",
        pystac.Asset(str(path / "store.icechunk"), roles=["data"], extra_fields=fields),
    )
    collection.set_self_href(str(path / "collection.json"))
    collection.save_object(include_self_link=True)
    return pystac.Collection.from_file(str(path / "collection.json"))


def test_a_published_stores_saved_endpoint_gets_no_credentials(
    tmp_path: Path,
    s3_server: S3Server,
    recording_endpoint: tuple[str, list[dict[str, str]]],
) -> None:
    """The repository's config names where a container is; the reader's registry says where
    its bucket really is, and only there do the reader's credentials go."""
    endpoint, seen = recording_endpoint
    bucket = s3_server.create_bucket("sources")
    s3_server.upload(bucket, "data/values.bin", np.array([7, 9], dtype="<i8").tobytes())
    etag = s3_server.client().head_object(Bucket=bucket, Key="data/values.bin")["ETag"]
    container = f"s3://{bucket}/data/"
    collection = hostile_icechunk_store(tmp_path, container, endpoint, etag)
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}/", **s3_server.store_options)

    opened = open_published(collection.assets["icechunk"], registry=registry)

    np.testing.assert_array_equal(opened["v"].values, [7, 9])
    assert not seen


@pytest.mark.parametrize("region", ["attacker.example/x", "x@127.0.0.1:9/", "US East"])
def test_an_aws_region_that_names_another_host_is_refused(make_item: MakeItem, region: str) -> None:
    """AWS's host name is made of the region (s3.REGION.amazonaws.com): a catalog's region
    'attacker.example/x' would send requests signed with the reader's credentials to
    s3.attacker.example."""
    item = make_item("lure", WHEN, {"data": ("s3://bucket/data.nc", NETCDF)})
    platform = "https://{bucket}.s3.{region}.amazonaws.com"
    item.properties["storage:schemes"] = {
        "aws": {"type": "aws-s3", "platform": platform, "region": region, "bucket": "bucket"}
    }
    item.assets["data"].extra_fields["storage:refs"] = ["aws"]
    refused = f"storage scheme 'aws' has region {re.escape(repr(region))}, which is no AWS region"

    with pytest.raises(StorageSchemeError, match=refused):
        stac_registry(item)
    with pytest.raises(StorageSchemeError, match=refused):
        scheme_options(item.assets["data"])
    # A custom endpoint names its host: its region only scopes the signature.
    item.properties["storage:schemes"]["aws"].update(type="custom-s3", platform="https://s3.lan")
    assert "s3://bucket/data.nc" in stac_registry(item)


@pytest.mark.parametrize("spelling", ["scheme", "msft:storage_account"])
def test_an_azure_account_that_names_another_host_is_refused(
    make_item: MakeItem, spelling: str
) -> None:
    """An account's host name is made of its name (ACCOUNT.blob.core.windows.net): a catalog's
    account 'attacker.example/x' would send the reader's Azure credentials there."""
    item = make_item("lure", WHEN, {"data": ("az://container/data.nc", NETCDF)})
    asset = item.assets["data"]

    def name(account: str) -> None:
        if spelling == "scheme":
            platform = "https://{account}.blob.core.windows.net"
            scheme = {"type": "ms-azure", "platform": platform, "account": account}
            item.properties["storage:schemes"] = {"azure": scheme}
            asset.extra_fields["storage:refs"] = ["azure"]
        else:
            asset.extra_fields["msft:storage_account"] = account

    name("attacker.example/x")
    with pytest.raises(StorageSchemeError, match=r"Azure storage account 'attacker\.example/x'"):
        stac_registry(item)
    name("pcstacitems")
    assert "az://container/data.nc" in stac_registry(item)


def test_a_scheme_naming_a_bucket_does_not_allow_reading_it(make_item: MakeItem) -> None:
    item = make_item("lure", WHEN, {"data": ("s3://public/data.nc", NETCDF)})
    item.properties["storage:schemes"] = {
        "aws": {
            "type": "aws-s3",
            "platform": "https://{bucket}.s3.{region}.amazonaws.com",
            "bucket": "users-private-bucket",
            "region": "us-west-2",
        }
    }
    item.assets["data"].extra_fields["storage:refs"] = ["aws"]
    registry = stac_registry(item)

    assert "s3://public/data.nc" in registry
    assert "s3://public/other.nc" not in registry
    assert "s3://users-private-bucket/secrets.nc" not in registry
    with pytest.raises(UnregisteredURLError, match=authorize_message("s3://users-private-bucket/")):
        registry.resolve("s3://users-private-bucket/secrets.nc")
    authorized = stac_registry(item, authorize=["s3://users-private-bucket/"])
    store, path = authorized.resolve("s3://users-private-bucket/secrets.nc")
    assert (path, store.config["region"]) == ("secrets.nc", "us-west-2")
