"""Reading a published Icechunk store whose sources are served over HTTP: timeouts and retries.

virtualstac reads the virtual chunks with its own HTTP client, bounded by the registry's
:class:`~virtualstac.NetworkOptions`; what Icechunk still fetches with clients of its own gets
them for the read only, never saved in the repository.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import icechunk
import numpy as np
import pystac
import pytest

from faulty_servers import FaultyServer
from virtualstac import NetworkOptions, ObjectStoreRegistry
from virtualstac.errors import NetworkError, NetworkTimeoutError
from virtualstac.stac import open_stac, publish
from virtualstac.stac.icechunk_reads import reading_config

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
WHEN = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)
QUICK = NetworkOptions(connect_timeout=1, timeout=0.5, max_retries=1, backoff=0.02)
MakeItem = Callable[..., pystac.Item]
ReadBand = Callable[[Path], np.ndarray]
WriteBand = Callable[..., Path]


def served_item(
    server: FaultyServer, make_item: MakeItem, directory: Path, day: int
) -> pystac.Item:
    """The item of ``day``, whose ``B02`` COG (``B02_{day}.tif``) ``server`` serves."""
    url = server.url_for(f"B02_{day}.tif")
    item = make_item(f"day{day}", WHEN + dt.timedelta(days=day), {"B02": (url, COG)})
    item.set_self_href(str(directory / f"day{day}.json"))
    return item


def saved_config(store: Path) -> str:
    """What the repository at ``store`` has saved as its configuration."""
    return repr(icechunk.Repository.fetch_config(icechunk.local_filesystem_storage(str(store))))


@pytest.fixture
def bands(tmp_path: Path, write_band: WriteBand) -> list[Path]:
    return [write_band(tmp_path / f"B02_{day}.tif", size=300, seed=day) for day in range(2)]


def test_a_source_that_never_answers_fails_within_the_registrys_timeouts(
    bands: list[Path], tmp_path: Path, make_item: MakeItem, read_band: ReadBand
) -> None:
    files = {path.name: path.read_bytes() for path in bands}
    store = tmp_path / "served.icechunk"
    with FaultyServer(files, "serve") as server:
        registry = ObjectStoreRegistry(network=QUICK)
        registry.register(f"{server.url}/")
        first = served_item(server, make_item, tmp_path, 0)
        collection = pystac.Collection(
            "served", "COGs over HTTP", pystac.Extent.from_items([first])
        )
        collection.add_item(first, set_parent=False)
        publish(collection, store, assets=["B02"], registry=registry)
        saved = saved_config(store)

        dataset = open_stac(collection, registry=registry)
        np.testing.assert_array_equal(dataset["B02"].isel(time=0).values, read_band(bands[0]))

        server.behave("hang")
        stalled = open_stac(collection, registry=registry)
        before = server.connections
        with pytest.raises(NetworkTimeoutError, match=r"B02_0\.tif.*2 attempts") as raised:
            stalled["B02"].isel(time=0, x=0, y=0).values  # noqa: B018 (the read is the point)
        assert "did not answer within the timeout" in str(raised.value)
        assert server.connections - before == 2  # one attempt and QUICK's one retry
        assert saved_config(store) == saved  # the timeouts were never saved

        server.behave("drop")
        with pytest.raises(NetworkError, match="closed the connection"):
            open_stac(collection, registry=registry)["B02"].isel(time=0, x=0, y=0).values  # noqa: B018

        server.behave("serve")
        collection.add_item(served_item(server, make_item, tmp_path, 1), set_parent=False)
        publish(collection, store, assets=["B02"], registry=registry)  # an append
        assert saved_config(store) == saved
        both = open_stac(collection, registry=registry)
        np.testing.assert_array_equal(both["B02"].isel(time=1).values, read_band(bands[1]))


def test_s3_containers_keep_their_store_and_get_a_stream_timeout() -> None:
    config = icechunk.RepositoryConfig.default()
    saved = icechunk.s3_store(
        region="eu-west-1",
        endpoint_url="http://127.0.0.1:9000",
        allow_http=True,
        s3_compatible=True,
        requester_pays=True,
    )
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer("s3://archive/", saved))
    bounded = reading_config(config, NetworkOptions(timeout=2.5))
    options = bounded.virtual_chunk_containers["s3://archive/"].store._0
    assert options.network_stream_timeout_seconds == 3
    assert (options.region, options.endpoint_url, options.requester_pays) == (
        "eu-west-1",
        "http://127.0.0.1:9000",
        True,
    )


@pytest.mark.parametrize(
    ("saved_region", "region"),
    [("eu-west-1", "eu-west-1"), ("s3.attacker.example/#", None), (None, None)],
)
def test_s3_containers_are_reached_as_the_reader_chose_in_the_saved_region(
    saved_region: str | None, region: str | None
) -> None:
    """The endpoint the repository saved is its author's choice and is dropped for the reader's
    store; its region is kept where the reader names none, if it is a region's name (it becomes
    part of AWS's host name)."""
    config = icechunk.RepositoryConfig.default()
    saved = icechunk.s3_store(
        region=saved_region, endpoint_url="http://attacker.example", s3_compatible=True
    )
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer("s3://archive/", saved))
    chosen = {"s3://archive/": icechunk.s3_store(region=None)}
    bounded = reading_config(config, NetworkOptions(timeout=2.5), stores=chosen)
    store = bounded.virtual_chunk_containers["s3://archive/"].store
    assert isinstance(store, icechunk.ObjectStoreConfig.S3)
    assert (store._0.endpoint_url, store._0.region) == (None, region)
    assert store._0.network_stream_timeout_seconds == 3
