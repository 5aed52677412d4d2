"""STAC JSON read over HTTP: every request bounded, every failure a typed error naming the URL.

Catalogs come from servers other people run. Each case serves STAC JSON from a
:class:`~faulty_servers.FaultyServer` on loopback that misbehaves on purpose, and opens it
as an Intake entry does (``StacVirtualSource``), through a registry with short timeouts.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pickle
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pystac
import pytest

from faulty_servers import QUICK, FaultyServer
from virtualstac import ObjectStoreRegistry
from virtualstac.errors import (
    InvalidCatalogError,
    InvalidPathError,
    LimitExceededError,
    NetworkError,
    NetworkTimeoutError,
    RedirectRefusedError,
    SourceNotFoundError,
    UnregisteredURLError,
)
from virtualstac.intake.stac import StacVirtualSource
from virtualstac.limits import limits
from virtualstac.stac.documents import read_stac
from virtualstac.stac.invalid import catalog_items
from virtualstac.stac.open import open_stac
from virtualstac.stac.stac_io import bounded_api_io, bounded_stac_io, reading_api

if TYPE_CHECKING:
    from conftest import Scenes

ReadBand = Callable[[Path], np.ndarray]

CATALOG = {
    "type": "Catalog",
    "stac_version": "1.1.0",
    "id": "archive",
    "description": "an archive of one item",
    "links": [{"rel": "item", "href": "./scene/scene.json", "type": "application/json"}],
}


def open_entry(url: str) -> object:
    """Open ``url`` as an Intake STAC entry would, with the quick timeouts."""
    return StacVirtualSource(url, registry=ObjectStoreRegistry(network=QUICK)).to_dask()


def test_a_catalog_server_that_never_answers_fails_within_the_timeouts() -> None:
    with FaultyServer({"catalog.json": json.dumps(CATALOG).encode()}, "hang") as server:
        started = time.monotonic()
        with pytest.raises(
            NetworkTimeoutError, match="did not answer within the timeout"
        ) as caught:
            open_entry(server.url_for("catalog.json"))
        assert time.monotonic() - started < 10
        assert server.connections == 3  # the first attempt and two retries
    assert server.url_for("catalog.json") in str(caught.value)


def test_a_link_to_a_server_that_stops_answering_fails_naming_the_link() -> None:
    """The catalog arrives; the item it links to never does. Links are read as the catalog."""
    with FaultyServer({"catalog.json": json.dumps(CATALOG).encode()}, "serve", "hang") as server:
        with pytest.raises(NetworkTimeoutError, match=r"scene/scene\.json"):
            open_entry(server.url_for("catalog.json"))


def test_a_server_that_keeps_answering_503_is_retried_then_named() -> None:
    with FaultyServer({"catalog.json": b"{}"}, "unavailable") as server:
        with pytest.raises(NetworkError, match="answered 503"):
            open_entry(server.url_for("catalog.json"))
        assert server.connections == 3


def test_a_missing_catalog_is_not_found() -> None:
    with FaultyServer({}, "serve") as server:
        with pytest.raises(SourceNotFoundError, match="answered 404") as caught:
            open_entry(server.url_for("catalog.json"))
    assert server.url_for("catalog.json") in str(caught.value)


def test_dropped_connections_are_a_network_error() -> None:
    with FaultyServer({"catalog.json": b"{}"}, "drop") as server:
        with pytest.raises(NetworkError, match="closed the connection"):
            open_entry(server.url_for("catalog.json"))


def test_a_refusal_without_retry_is_an_invalid_catalog() -> None:
    """A 4xx other than 404 is final: neither missing nor worth another attempt."""
    from pystac_client.exceptions import APIError

    refusal = APIError("query not supported")
    refusal.status_code = 400
    with pytest.raises(InvalidCatalogError, match=r"answered 400 \(query not supported\)"):
        with reading_api("https://stac.example.org/search"):
            raise refusal


def test_the_reader_reads_what_the_server_serves() -> None:
    with FaultyServer({"catalog.json": json.dumps(CATALOG).encode()}, "serve") as server:
        assert bounded_stac_io(QUICK).read_json(server.url_for("catalog.json")) == CATALOG


def test_a_document_beyond_the_metadata_limit_is_refused_before_it_is_read() -> None:
    document = json.dumps({**CATALOG, "description": "x" * 5000}).encode()
    with FaultyServer({"catalog.json": document}, "serve") as server:
        with limits(metadata_bytes=1000), pytest.raises(LimitExceededError, match="STAC JSON"):
            open_entry(server.url_for("catalog.json"))


def test_the_reader_travels_to_other_processes_with_its_bounds() -> None:
    reader = pickle.loads(pickle.dumps(bounded_stac_io(QUICK)))
    assert reader.network == QUICK
    with FaultyServer({"catalog.json": json.dumps(CATALOG).encode()}, "serve") as server:
        assert reader.read_json(server.url_for("catalog.json")) == CATALOG


def test_an_unreachable_collection_link_costs_the_registrys_timeouts_only(
    scenes: Scenes, read_band: ReadBand
) -> None:
    """The Collection an Item links to is read for the stores published there and for its
    ``item_assets``; a server that never answers costs the timeouts of the registry the open
    was given, and fails the open whether or not published stores are looked for: the Item's
    assets may leave their bands' scale and nodata to that Collection."""
    item = scenes.items[0]
    path = scenes.files[item.id]["B02"]
    with FaultyServer({"collection.json": b"{}"}, "hang") as server:
        url = server.url_for("collection.json")
        item.add_link(pystac.Link("collection", url))
        item.collection_id = "s2"
        registry = ObjectStoreRegistry.for_url(str(path), network=QUICK)
        started = time.monotonic()
        with pytest.raises(NetworkTimeoutError, match=re.escape(url)):
            open_stac(item, ["B02"], registry=registry)
        with pytest.raises(NetworkTimeoutError, match=re.escape(url) + ".*item_assets"):
            open_stac(item, ["B02"], registry=registry, use_published=False)
        assert time.monotonic() - started < 15
        assert server.connections == 6  # three attempts, twice
        item.remove_links(pystac.RelType.COLLECTION)  # the user's choice: open it as it is
        opened = open_stac(item, ["B02"], registry=registry)
        assert server.connections == 6
    np.testing.assert_array_equal(opened["B02"].values, read_band(path))


def test_links_of_a_catalog_read_by_pystac_itself_are_followed_with_timeouts() -> None:
    """A catalog the user read with pystac's own reader: its links are read by ours."""
    with FaultyServer({"catalog.json": json.dumps(CATALOG).encode()}, "serve", "hang") as server:
        catalog = pystac.Catalog.from_file(server.url_for("catalog.json"))
        started = time.monotonic()
        with pytest.raises(NetworkTimeoutError, match=r"scene/scene\.json"):
            open_stac(catalog, registry=ObjectStoreRegistry(network=QUICK))
        assert time.monotonic() - started < 10


def test_a_document_trickled_byte_by_byte_fails_within_the_timeout() -> None:
    """A server that sends one byte at a time, each within the read timeout, still cannot
    hold a read for longer than the whole-answer ``timeout`` (plus its retries)."""
    with FaultyServer({"catalog.json": json.dumps(CATALOG).encode()}, "trickle") as server:
        started = time.monotonic()
        with pytest.raises(NetworkTimeoutError, match=re.escape(server.url_for("catalog.json"))):
            bounded_stac_io(QUICK).read_json(server.url_for("catalog.json"))
    assert time.monotonic() - started < 3 * QUICK.timeout + QUICK.retry_timeout


def test_a_gzip_bomb_is_refused_once_it_inflates_past_the_metadata_limit() -> None:
    """Content-Encoding is decoded for STAC JSON, but never beyond ``metadata_bytes``."""
    bomb = b'{"type": "Catalog"' + b" " * 5_000_000 + b"}"
    with FaultyServer({"catalog.json": bomb}, "gzip") as server:
        with limits(metadata_bytes=100_000), pytest.raises(LimitExceededError, match="STAC JSON"):
            bounded_stac_io(QUICK).read_json(server.url_for("catalog.json"))


def test_a_local_document_is_read_no_further_than_the_metadata_limit(tmp_path: Path) -> None:
    """A catalog may link to a huge local file (or ``/dev/zero``): it is refused after
    ``metadata_bytes``, not read whole."""
    huge = tmp_path / "huge.json"
    with huge.open("wb") as file:
        file.truncate(50_000_000)  # sparse: no disk space taken
    catalog = {**CATALOG, "links": [{"rel": "child", "href": "./huge.json"}]}
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    with limits(metadata_bytes=1000), pytest.raises(LimitExceededError, match=r"huge\.json"):
        catalog_items(read_stac(str(tmp_path / "catalog.json"), QUICK))


@pytest.mark.parametrize("href", ["ftp://example.com/catalog.json", "s3://bucket/catalog.json"])
def test_a_link_of_a_scheme_catalogs_are_not_read_from_is_named(tmp_path: Path, href: str) -> None:
    catalog = {**CATALOG, "links": [{"rel": "child", "href": href}]}
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))

    with pytest.raises(InvalidPathError, match=rf"{re.escape(href)}.*URL scheme"):
        catalog_items(read_stac(str(tmp_path / "catalog.json"), QUICK))


def test_a_link_to_a_named_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A catalog unpacked from an archive may link to a named pipe: opening it for reading
    would wait for a writer for ever."""
    os.mkfifo(tmp_path / "child.json")
    catalog = {**CATALOG, "links": [{"rel": "child", "href": "./child.json"}]}
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    outcome: list[BaseException | None] = []

    def walk() -> None:
        try:
            catalog_items(read_stac(str(tmp_path / "catalog.json"), QUICK))
            outcome.append(None)
        except BaseException as err:  # handed to the test's thread
            outcome.append(err)

    thread = threading.Thread(target=walk, daemon=True)
    thread.start()
    thread.join(30)
    if thread.is_alive():
        os.close(os.open(tmp_path / "child.json", os.O_WRONLY | os.O_NONBLOCK))  # release it
        pytest.fail("reading the catalog waited on the named pipe")
    assert isinstance(outcome[0], UnregisteredURLError)
    assert "child.json' is not allowed: it is a named pipe" in str(outcome[0])


# -- STAC API pages: read by pystac-client through bounded_api_io ------------------------------

LANDING = {"type": "Catalog", "stac_version": "1.1.0", "id": "api", "description": "an API",
           "conformsTo": [], "links": []}  # fmt: skip


@pytest.mark.parametrize("behaviour", ["serve", "gzip"])
def test_an_api_page_beyond_the_metadata_limit_is_refused(behaviour: str) -> None:
    """Plain or compressed (requests asks for gzip), a page is read no further than
    ``metadata_bytes`` once decoded."""
    page = json.dumps({**LANDING, "description": " " * 2_000_000}).encode()
    with FaultyServer({"api": page}, behaviour) as server:
        with limits(metadata_bytes=100_000), pytest.raises(LimitExceededError, match="/api"):
            bounded_api_io(QUICK).read_json(server.url_for("api"))


def test_an_api_page_trickled_byte_by_byte_fails_within_the_timeout() -> None:
    with FaultyServer({"api": json.dumps(LANDING).encode()}, "trickle") as server:
        started = time.monotonic()
        with pytest.raises(NetworkTimeoutError, match=re.escape(server.url_for("api"))):
            bounded_api_io(QUICK).read_json(server.url_for("api"))
    assert time.monotonic() - started < 3 * QUICK.timeout + QUICK.retry_timeout


def test_the_api_reader_reads_what_the_server_serves() -> None:
    with FaultyServer({"api": json.dumps(LANDING).encode()}, "serve", "gzip") as server:
        assert bounded_api_io(QUICK).read_json(server.url_for("api")) == LANDING
        assert bounded_api_io(QUICK).read_json(server.url_for("api")) == LANDING


def serve_search(server: FaultyServer, page: dict[str, object] | bytes) -> str:
    """Serve a STAC API landing page whose search answers ``page``; returns the API's URL."""
    search = {"rel": "search", "href": server.url_for("search"),
              "type": "application/geo+json", "method": "GET"}  # fmt: skip
    conformance = ["https://api.stacspec.org/v1.0.0/core",
                   "https://api.stacspec.org/v1.0.0/item-search"]  # fmt: skip
    landing = {**LANDING, "conformsTo": conformance, "links": [search]}
    server.put("api", json.dumps(landing).encode())
    server.put("search", page if isinstance(page, bytes) else json.dumps(page).encode())
    return server.url_for("api")


def test_a_search_that_pages_for_ever_stops_at_the_item_limit() -> None:
    """Each page holds an Item and a ``next`` link back to itself: pystac-client would follow
    it for as long as the server answers, holding every Item."""
    item = pystac.Item("scene", None, None, dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {})
    with FaultyServer({}, "serve") as server:
        again = {"rel": "next", "href": server.url_for("search"), "method": "GET"}
        page = {"type": "FeatureCollection", "features": [item.to_dict()], "links": [again]}
        url = serve_search(server, page)
        with limits(stac_items=50), pytest.raises(LimitExceededError, match="stac_items"):
            open_stac(read_stac(url, QUICK))
        assert server.connections < 60


@pytest.mark.parametrize(
    "page",
    [
        b"<html>a proxy's error page</html>",
        b'{"type": "FeatureCollection", "features": [{"id": "x", "bbox": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}]}",
        b'{"type": "FeatureCollection", "features": [{"id": ' + b"7" * 5000 + b"}]}",
        b'{"type": "FeatureCollection", "features": [{"id": "no type"}]}',
    ],
    ids=["not-json", "nested-deeper-than-python-recurses", "a-5000-digit-number", "not-stac"],
)
def test_a_malformed_search_page_is_an_invalid_catalog_naming_the_search(page: bytes) -> None:
    with FaultyServer({}, "serve") as server:
        url = serve_search(server, page)
        with pytest.raises(InvalidCatalogError, match=re.escape(server.url_for("search"))):
            open_stac(read_stac(url, QUICK))


@pytest.mark.parametrize("reader", [bounded_stac_io, bounded_api_io])
def test_a_refused_connection_is_named_as_such_not_as_a_timeout(
    reader: Callable[..., Any],
) -> None:
    """urllib3 makes a refused connection a kind of connect timeout; it took no time."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/catalog.json"
    with pytest.raises(NetworkError, match="the connection was refused") as caught:
        reader(QUICK).read_json(url)
    assert not isinstance(caught.value, NetworkTimeoutError)


@pytest.mark.parametrize("reader", [bounded_stac_io, bounded_api_io])
def test_headers_trickled_byte_by_byte_fail_within_the_timeouts(
    reader: Callable[..., Any],
) -> None:
    """A slow-loris server sends its status line and header fields a byte at a time."""
    with FaultyServer({"catalog.json": json.dumps(CATALOG).encode()}, "trickle-head") as server:
        started = time.monotonic()
        with pytest.raises(NetworkTimeoutError, match=re.escape(server.url_for("catalog.json"))):
            reader(QUICK).read_json(server.url_for("catalog.json"))
    assert time.monotonic() - started < 3 * QUICK.timeout + QUICK.retry_timeout


@pytest.mark.parametrize("reader", [bounded_stac_io, bounded_api_io])
def test_a_redirect_loop_is_named_as_such(reader: Callable[..., Any]) -> None:
    """The server sends ``catalog.json`` back to itself for ever."""
    with FaultyServer({"catalog.json": json.dumps(CATALOG).encode()}, "redirect") as server:
        with pytest.raises(NetworkError, match=r"redirected it more than .* \(a redirect loop"):
            reader(QUICK).read_json(server.url_for("catalog.json"))


@pytest.mark.parametrize("reader", [bounded_stac_io, bounded_api_io])
def test_a_redirect_to_a_local_file_is_refused_as_such(
    reader: Callable[..., Any], tmp_path: Path
) -> None:
    """An HTTP server must not make the reader open a file of the reader's own machine."""
    (tmp_path / "catalog.json").write_text(json.dumps(CATALOG))
    with FaultyServer({}, "redirect") as server:
        server.redirect_to = tmp_path.as_uri()
        with pytest.raises(RedirectRefusedError, match=r"redirected it to .*file.*not followed"):
            reader(QUICK).read_json(server.url_for("catalog.json"))
