"""Storage schemes (STAC storage extension v2.0.0) configure the stores assets are read with.

COGs live in buckets of the moto S3 server; items reach them through ``custom-s3`` schemes
whose platform is the server's endpoint, as a catalog of a MinIO or Ceph archive would.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pystac
import pytest
import xarray as xr

from faulty_servers import QUICK, FaultyServer
from servers import RequesterPaysGateway, S3Server
from virtualstac import NetworkOptions
from virtualstac.errors import ChunkReadError, NetworkTimeoutError, UnregisteredURLError
from virtualstac.stac import (
    StorageScheme,
    StorageSchemeError,
    VirtualExtension,
    open_stac,
    stac_registry,
    storage_schemes,
)
from virtualstac.stac.collection_assets import collection_assets
from virtualstac.stac.stac_io import reading_with

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
STORAGE = "https://stac-extensions.github.io/storage/v2.0.0/schema.json"
MakeItem = Callable[..., pystac.Item]
ReadBand = Callable[[Path], np.ndarray]
WriteBand = Callable[..., Path]
WHEN = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)


def stored_item(
    make_item: MakeItem, url: str, schemes: dict[str, dict[str, Any]], refs: list[str]
) -> pystac.Item:
    """An item whose ``B02`` asset at ``url`` is read through the ``refs`` schemes."""
    item = make_item("stored", WHEN, {"B02": (url, COG)})
    item.stac_extensions.append(STORAGE)
    item.properties["storage:schemes"] = schemes
    item.assets["B02"].extra_fields["storage:refs"] = refs
    return item


def read(item: pystac.Item | list[pystac.Item], virtual: xr.Dataset, **trust: Any) -> xr.Dataset:
    registry = stac_registry(item, **trust)
    return xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False)


def moto_scheme(s3_server: S3Server, **fields: Any) -> dict[str, Any]:
    return {"type": "custom-s3", "platform": s3_server.endpoint, "region": "us-east-1", **fields}


@pytest.fixture
def cog(tmp_path: Path, write_band: WriteBand) -> Path:
    return write_band(tmp_path / "B02.tif", size=300, seed=2)


def test_custom_s3_anonymous_scheme_reads_a_public_bucket(
    s3_server: S3Server, cog: Path, make_item: MakeItem, read_band: ReadBand
) -> None:
    bucket = s3_server.create_bucket("archive")
    url = s3_server.upload(bucket, "tiles/B02.tif", cog, public=True)
    item = stored_item(make_item, url, {"moto": moto_scheme(s3_server, anonymous=True)}, ["moto"])
    virtual = open_stac(item, references=True)
    np.testing.assert_array_equal(read(item, virtual)["B02"].values, read_band(cog))

    store, _ = stac_registry(item).resolve(url)
    assert store.config["endpoint"] == s3_server.endpoint
    assert store.config["skip_signature"] == "true"


def test_private_buckets_need_credentials_from_the_environment_and_a_trusted_endpoint(
    s3_server: S3Server,
    cog: Path,
    make_item: MakeItem,
    read_band: ReadBand,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket = s3_server.create_bucket("private")
    url = s3_server.upload(bucket, "B02.tif", cog)
    anonymous = stored_item(
        make_item, url, {"moto": moto_scheme(s3_server, anonymous=True)}, ["moto"]
    )
    with pytest.raises(ChunkReadError, match="403 Forbidden"):
        open_stac(anonymous, references=True)

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_access_key)
    signed = stored_item(make_item, url, {"moto": moto_scheme(s3_server)}, ["moto"])
    # The endpoint is the catalog's choice: the credentials go there only if the user says so.
    with pytest.raises(ChunkReadError, match="403 Forbidden"):
        open_stac(signed, references=True)
    trusted = open_stac(signed, trust_catalog_endpoints=True, references=True)
    values = read(signed, trusted, trust_catalog_endpoints=True)["B02"].values
    np.testing.assert_array_equal(values, read_band(cog))


def test_requester_pays_sends_the_header(
    s3_server: S3Server,
    requester_pays_gateway: RequesterPaysGateway,
    cog: Path,
    make_item: MakeItem,
    read_band: ReadBand,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # AWS serves requester-pays buckets only to signed requests, and so does obstore.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_access_key)
    bucket = s3_server.create_bucket("pays")
    url = s3_server.upload(bucket, "B02.tif", cog)
    gateway = {"type": "custom-s3", "platform": requester_pays_gateway.url, "region": "us-east-1"}
    refused = stored_item(make_item, url, {"gw": gateway}, ["gw"])
    with pytest.raises(ChunkReadError, match="403 Forbidden"):
        open_stac(refused, references=True)

    paying = stored_item(make_item, url, {"gw": {**gateway, "requester_pays": True}}, ["gw"])
    trusted = open_stac(paying, trust_catalog_endpoints=True, references=True)
    values = read(paying, trusted, trust_catalog_endpoints=True)["B02"].values
    np.testing.assert_array_equal(values, read_band(cog))


def test_each_scheme_may_have_its_own_timeouts_and_retries(make_item: MakeItem) -> None:
    quick = NetworkOptions(
        connect_timeout=1, timeout=0.5, max_retries=1, backoff=0.02, retry_timeout=5
    )
    with FaultyServer({}, "hang") as stalled:
        scheme = {"type": "custom-s3", "platform": stalled.url, "anonymous": True}
        item = stored_item(make_item, "s3://stalled/B02.tif", {"stalled": scheme}, ["stalled"])
        registry = stac_registry(item, scheme_network={"stalled": quick})
        with pytest.raises(NetworkTimeoutError, match=r"s3://stalled/B02\.tif.*2 attempts"):
            open_stac(item, registry=registry)
        assert stalled.connections == 2
    store, _ = stac_registry(item).resolve("s3://stalled/B02.tif")
    assert store.client_options["timeout"] == "30s"


def test_schemes_declared_on_the_collection_apply_to_its_items(
    s3_server: S3Server,
    cog: Path,
    tmp_path: Path,
    make_item: MakeItem,
    read_band: ReadBand,
) -> None:
    bucket = s3_server.create_bucket("collection")
    url = s3_server.upload(bucket, "B02.tif", cog, public=True)
    extent = pystac.Extent(
        pystac.SpatialExtent([[14.99, 36.1, 15.03, 36.15]]), pystac.TemporalExtent([[WHEN, None]])
    )
    collection = pystac.Collection("archive", "COGs in a bucket", extent)
    collection.stac_extensions.append(STORAGE)
    collection.extra_fields["storage:schemes"] = {"moto": moto_scheme(s3_server, anonymous=True)}
    item = make_item("stored", WHEN, {"B02": (url, COG)})
    item.assets["B02"].extra_fields["storage:refs"] = ["moto"]
    collection.add_item(item)
    collection.normalize_and_save(str(tmp_path / "catalog"), pystac.CatalogType.SELF_CONTAINED)

    saved = pystac.Item.from_file(str(tmp_path / "catalog" / "stored" / "stored.json"))
    assert "storage:schemes" not in saved.properties
    (scheme,) = storage_schemes(saved.assets["B02"])
    assert scheme == StorageScheme(
        "moto", s3_server.endpoint, "custom-s3", "us-east-1", anonymous=True
    )
    np.testing.assert_array_equal(
        read(saved, open_stac(saved, references=True))["B02"].values, read_band(cog)
    )


def test_kerchunk_references_into_a_bucket_a_scheme_names_need_the_users_authorization(
    s3_server: S3Server,
    netcdf_items: tuple[list[pystac.Item], list[Path]],
    tmp_path: Path,
    make_item: MakeItem,
) -> None:
    _, (path, *_) = netcdf_items
    sources, references = s3_server.create_bucket("sources"), s3_server.create_bucket("refs")
    source_url = s3_server.upload(sources, path.name, path, public=True)
    moved = make_item("moved", WHEN, {"data": (source_url, "application/x-netcdf")})
    schemes = {
        "sources": moto_scheme(s3_server, anonymous=True, bucket=sources),
        "refs": moto_scheme(s3_server, anonymous=True),
    }
    moved.properties["storage:schemes"] = schemes
    moved.assets["data"].extra_fields["storage:refs"] = ["sources"]
    open_stac(moved, references=True).virtual.to_kerchunk(tmp_path / "refs.json", format="json")
    refs_url = s3_server.upload(references, "refs.json", tmp_path / "refs.json", public=True)

    index = make_item("index", WHEN, {"refs": (refs_url, "application/json")})
    index.assets["refs"].roles = ["data", "references"]
    index.assets["refs"].extra_fields["storage:refs"] = ["refs"]
    index.properties["storage:schemes"] = {"refs": schemes["refs"]}
    with pytest.raises(UnregisteredURLError, match=f"s3://{sources}/"):
        open_stac(index, references=True)

    # A scheme naming the bucket says how to reach it, not that the catalog may read there.
    index.assets["refs"].extra_fields["storage:refs"] = ["refs", "sources"]
    index.properties["storage:schemes"] = schemes
    with pytest.raises(UnregisteredURLError, match=rf"authorize=\['s3://{sources}/'\]"):
        open_stac(index, references=True)

    through = open_stac(index, authorize=[f"s3://{sources}/"], references=True)
    with xr.open_dataset(path, engine="netcdf4") as direct:
        values = read(index, through, authorize=[f"s3://{sources}/"])["t2m"].load()
        xr.testing.assert_equal(values, direct["t2m"].load())


def test_aws_and_azure_schemes_set_region_payer_and_account() -> None:
    aws = StorageScheme.from_dict(
        "aws",
        {
            "platform": "https://{bucket}.s3.{region}.amazonaws.com",
            "bucket": "sentinel-cogs",
            "region": "us-west-2",
            "requester_pays": True,
        },
    )
    assert aws.type == "aws-s3"
    assert aws.endpoint() == "https://sentinel-cogs.s3.us-west-2.amazonaws.com"
    assert aws.store_options("s3://sentinel-cogs/tiles/B04.tif") == {
        "region": "us-west-2",
        "request_payer": True,
    }
    assert aws.store_options("https://sentinel-cogs.s3.amazonaws.com/B04.tif") == {}
    azure = StorageScheme.from_dict(
        "az",
        {
            "type": "ms-azure",
            "platform": "https://{account}.blob.core.windows.net",
            "account": "naipeuwest",
            "anonymous": True,
        },
    )
    assert azure.store_options("az://naip/v002/tile.tif") == {
        "account_name": "naipeuwest",
        "skip_signature": True,
    }
    hosted = StorageScheme.from_dict(
        "minio", {"type": "custom-s3", "platform": "https://{bucket}.minio.example.org"}
    )
    # The catalog chose the endpoint: no credentials are sent there unless it is trusted.
    assert hosted.store_options("s3://scenes/B04.tif") == {
        "endpoint": "https://scenes.minio.example.org",
        "virtual_hosted_style_request": True,
        "skip_signature": True,
    }
    assert hosted.store_options("s3://scenes/B04.tif", trust_endpoint=True) == {
        "endpoint": "https://scenes.minio.example.org",
        "virtual_hosted_style_request": True,
    }

    declared = {"platform": aws.platform, "bucket": "sentinel-cogs", "region": "us-west-2"}
    item = pystac.Item("x", None, None, WHEN, {"storage:schemes": {"aws": declared}})
    item.add_asset("B04", pystac.Asset("s3://sentinel-cogs/tiles/B04.tif", roles=["data"]))
    item.assets["B04"].extra_fields["storage:refs"] = ["aws"]
    store, path = stac_registry(item).resolve("s3://sentinel-cogs/tiles/B04.tif")
    assert path == "tiles/B04.tif"
    assert store.config["region"] == "us-west-2"
    assert "request_payer" not in store.config


def planetary_computer_zarr(**fields: Any) -> pystac.Item:
    """An ERA5 Item of the Planetary Computer: a Zarr store in an Azure container, its account
    given only by the xarray-assets fields (or ``msft:``), no storage scheme."""
    item = pystac.Item("era5-pds-2020-01-fc", None, None, WHEN, {})
    href = "abfs://era5/ERA5/2020/01/air_temperature_at_2_metres.zarr"
    item.add_asset(
        "air_temperature_at_2_metres",
        pystac.Asset(href, media_type="application/vnd+zarr", roles=["data"], extra_fields=fields),
    )
    return item


@pytest.mark.parametrize(
    "fields",
    [
        {"xarray:open_kwargs": {"engine": "zarr", "storage_options": {"account_name": "era5"}}},
        {"xarray:storage_options": {"account_name": "era5"}},
        {"msft:storage_account": "era5"},
    ],
)
def test_azure_assets_take_their_account_from_the_planetary_computers_fields(
    fields: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_NAME", raising=False)
    item = planetary_computer_zarr(**fields)
    store, path = stac_registry(item).resolve(item.assets["air_temperature_at_2_metres"].href)
    assert store.config == {"account_name": "era5", "container_name": "era5"}
    assert path == "ERA5/2020/01/air_temperature_at_2_metres.zarr"


def test_an_azure_asset_without_an_account_is_refused_saying_how_to_give_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_NAME", raising=False)
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT", raising=False)
    with pytest.raises(StorageSchemeError, match=r"air_temperature_at_2_metres.*account_name"):
        open_stac(planetary_computer_zarr())
    # A Collection's own Zarr asset (Daymet's), opened alone.
    daymet = pystac.Collection(
        "daymet-daily-hi",
        "Daymet daily Hawaii",
        pystac.Extent(
            pystac.SpatialExtent([[-160, 18, -154, 23]]), pystac.TemporalExtent([[WHEN, None]])
        ),
    )
    daymet.add_asset(
        "zarr-abfs",
        pystac.Asset(
            "abfs://daymet-zarr/daily/hi.zarr", media_type="application/vnd+zarr", roles=["data"]
        ),
    )
    with pytest.raises(StorageSchemeError, match=r"'zarr-abfs' of collection 'daymet-daily-hi'"):
        VirtualExtension.ext(daymet.assets["zarr-abfs"], add_if_missing=True).to_xarray()
    alone = pystac.Asset("abfs://daymet-zarr/daily/hi.zarr", media_type="application/vnd+zarr")
    with pytest.raises(StorageSchemeError, match=r"'data' \(abfs://daymet-zarr/daily/hi\.zarr\)"):
        VirtualExtension.ext(alone).to_xarray()  # an asset of no Item or Collection
    daymet.extra_fields["msft:storage_account"] = "daymeteuwest"
    stand_in = collection_assets(daymet)
    assert stand_in is not None
    store, _ = stac_registry(stand_in).resolve("abfs://daymet-zarr/daily/hi.zarr")
    assert store.config["account_name"] == "daymeteuwest"
    # Kerchunk references into a container the user authorizes, the account unknown.
    item = planetary_computer_zarr(**{"xarray:storage_options": {"account_name": "era5"}})
    with pytest.raises(StorageSchemeError, match=r"authorize=\['abfs://nex-gddp-cmip6/'\]"):
        stac_registry(item, authorize=["abfs://nex-gddp-cmip6/"])


def test_unusable_schemes_are_refused_with_what_is_declared(make_item: MakeItem) -> None:
    item = stored_item(
        make_item,
        "s3://scenes/B02.tif",
        {"minio": {"type": "custom-s3", "platform": "https://{host}:9000"}},
        ["aws"],
    )
    with pytest.raises(StorageSchemeError, match=r"scheme 'aws'.*\(declared: minio\)"):
        open_stac(item)
    item.assets["B02"].extra_fields["storage:refs"] = ["minio"]
    with pytest.raises(StorageSchemeError, match=r"needs \{host\}, which the scheme does not"):
        open_stac(item)


def test_a_root_catalog_read_for_its_schemes_is_read_within_the_timeouts(
    make_item: MakeItem,
) -> None:
    """Schemes an Item does not declare are looked up on its root catalog, which is read
    with the timeouts of the open (``reading_with``; pystac's own reader would wait for
    ever)."""
    item = stored_item(make_item, "s3://scenes/B02.tif", {}, ["aws"])
    with FaultyServer({"catalog.json": b"{}"}, "hang") as server:
        item.add_link(pystac.Link("root", server.url_for("catalog.json")))
        item.set_self_href("https://stac.example.org/items/stored.json")
        started = time.monotonic()
        with reading_with(QUICK), pytest.raises(StorageSchemeError, match="within the timeout"):
            storage_schemes(item.assets["B02"], item)
    assert time.monotonic() - started < 10
