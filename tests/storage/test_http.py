"""virtualstac's HTTP client: byte ranges as object storage serves them, and never a redirect.

The registry is the read allow-list, so a server it allows must not be able to send a read
elsewhere: to another host, another path, or an address inside the reader's network. Each
case below meets a real server on loopback (the tests' uvicorn server, or a
:class:`~faulty_servers.FaultyServer` that misbehaves on purpose) and reads a netCDF4 file
written by the netCDF4 library.
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from faulty_servers import QUICK, FaultyServer
from servers import HTTPServer
from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import (
    InvalidPathError,
    NetworkTimeoutError,
    RedirectRefusedError,
    UnregisteredURLError,
    VirtualStacError,
)
from virtualstac.storage import objects
from virtualstac.storage.failures import HttpRequestError
from virtualstac.storage.http import HttpStore

NAME = "t2m.nc"  # as the netcdf fixture names it


def open_over(server: FaultyServer) -> xr.Dataset:
    url = server.url_for(NAME)
    registry = ObjectStoreRegistry.for_url(url, network=QUICK)
    return open_virtual_dataset(url, registry=registry, loadable_variables=[])


def values_of(virtual: xr.Dataset, url: str) -> np.ndarray:
    store = virtual.virtual.to_store(ObjectStoreRegistry.for_url(url, network=QUICK))
    return np.asarray(xr.open_zarr(store, consolidated=False)["t2m"].values)


# -- Redirects ----------------------------------------------------------------------------------


def test_a_redirect_at_open_is_refused_and_its_target_never_asked(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, _ = netcdf
    with (
        FaultyServer({f"private/{NAME}": data}, "serve") as inside,
        FaultyServer({NAME: data}, "redirect") as server,
    ):
        server.redirect_to = f"{inside.url}/private"
        with pytest.raises(RedirectRefusedError) as caught:
            open_over(server)
        assert inside.connections == 0
    message = str(caught.value)
    assert server.url_for(NAME) in message and f"{inside.url}/private/{NAME}" in message
    assert "302" in message and "never follows redirects" in message
    # A refused redirect is a refused read: it is what callers catch for unauthorized URLs.
    assert isinstance(caught.value, UnregisteredURLError)


def test_a_redirect_of_a_chunk_read_is_refused(netcdf: tuple[bytes, np.ndarray]) -> None:
    data, values = netcdf
    with (
        FaultyServer({f"private/{NAME}": data}, "serve") as inside,
        FaultyServer({NAME: data}, "serve") as server,
    ):
        virtual = open_over(server)
        np.testing.assert_array_equal(values_of(virtual, server.url_for(NAME)), values)
        server.redirect_to = f"{inside.url}/private"
        server.behave("redirect")
        with pytest.raises(RedirectRefusedError, match="302"):
            values_of(virtual, server.url_for(NAME))
        assert inside.connections == 0


def test_a_redirect_to_the_same_server_is_refused_too(netcdf: tuple[bytes, np.ndarray]) -> None:
    """Another path on an allowed host may lie outside the registered prefix."""
    data, _ = netcdf
    with FaultyServer({NAME: data, f"other/{NAME}": data}, "redirect") as server:
        server.redirect_to = f"{server.url}/other"
        with pytest.raises(RedirectRefusedError, match=r"other/t2m\.nc"):
            open_over(server)
        assert server.connections == 1


# -- What a server sends ------------------------------------------------------------------------


def test_a_compressed_answer_is_refused_naming_the_encoding(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "gzip") as server:
        with pytest.raises(VirtualStacError, match="Content-Encoding 'gzip'") as caught:
            open_over(server)
    assert server.url_for(NAME) in str(caught.value)


def test_a_trickling_answer_fails_within_the_request_timeout(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    """A server that keeps sending one byte at a time never trips a per-read timeout; the
    whole request is bounded instead (3 attempts of 0.5 s here, where the bytes of one chunk
    would take a minute)."""
    data, _ = netcdf
    with FaultyServer({NAME: data}, "serve") as server:
        virtual = open_over(server)
        server.behave("trickle")
        started = time.monotonic()
        with pytest.raises(NetworkTimeoutError, match="3 attempts") as caught:
            values_of(virtual, server.url_for(NAME))
        assert time.monotonic() - started < 10
    assert "stalled past the timeout" in str(caught.value)


def test_headers_trickled_byte_by_byte_fail_within_the_request_timeout(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    """A slow-loris server sends its status line and header fields a byte at a time, each
    within the read timeout: the headers of an answer are bounded as a whole too."""
    data, _ = netcdf
    with FaultyServer({NAME: data}, "serve") as server:
        virtual = open_over(server)
        server.behave("trickle-head")
        started = time.monotonic()
        with pytest.raises(NetworkTimeoutError, match="3 attempts"):
            values_of(virtual, server.url_for(NAME))
        assert time.monotonic() - started < 3 * 2 * QUICK.timeout + 1


# -- HttpStore ----------------------------------------------------------------------------------


def served_file(http_server: HTTPServer, size: int = 300_000) -> tuple[Path, bytes, HttpStore]:
    directory = http_server.directory("http-store")
    data = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes()
    (directory / "a b.bin").write_bytes(data)
    store = HttpStore(http_server.url_for(directory), client_options={"allow_http": True})
    return directory / "a b.bin", data, store


def test_ranges_equal_the_file_merged_or_not(http_server: HTTPServer) -> None:
    path, data, store = served_file(http_server)
    starts = [250_000, 10, 0, 100_000, 299_990]
    ends = [260_000, 20, 5, 100_001, 300_010]  # unsorted, one past the end
    expected = [data[s:e] for s, e in zip(starts, ends, strict=True)]

    assert objects.get_ranges(store, "a b.bin", starts, ends, coalesce=0) == expected
    apart = len(http_server.requests(path))
    assert objects.get_ranges(store, "a b.bin", starts, ends, coalesce=1 << 20) == expected
    assert len(http_server.requests(path)) == apart + 1  # all of them in one request
    assert apart == len(starts)


def test_metadata_of_a_head_equals_that_of_a_ranged_get(http_server: HTTPServer) -> None:
    _, data, store = served_file(http_server)
    head = objects.head(store, "a b.bin")
    ranged = objects.get(store, "a b.bin", (0, 10))
    assert head["size"] == ranged.meta["size"] == len(data)
    assert head["last_modified"] == ranged.meta["last_modified"] is not None
    assert bytes(ranged.bytes()) == data[:10]
    assert bytes(objects.get(store, "a b.bin").bytes()) == data


def test_a_missing_object_is_file_not_found(http_server: HTTPServer) -> None:
    _, _, store = served_file(http_server)
    with pytest.raises(FileNotFoundError, match="not found"):
        objects.head(store, "missing.bin")
    with pytest.raises(FileNotFoundError):
        objects.get(store, "missing.bin", (0, 10))


def test_a_store_survives_pickling(http_server: HTTPServer) -> None:
    _, data, store = served_file(http_server)
    objects.head(store, "a b.bin")  # its connections are not part of its state
    again = pickle.loads(pickle.dumps(store))
    assert bytes(objects.get(again, "a b.bin", (5, 9)).bytes()) == data[5:9]
    assert again.timeout == store.timeout


def test_http_servers_have_no_listing() -> None:
    store = HttpStore("https://data.example.org/zarr")
    with pytest.raises(HttpRequestError, match="no listing"):
        list(objects.list_objects(store, "group"))


@pytest.mark.parametrize(
    ("given", "seconds"), [("30s", 30), ("500ms", 0.5), ("1m 30s", 90), (2.5, 2.5), ("7", 7)]
)
def test_timeouts_may_be_given_as_obstore_takes_them(given: object, seconds: float) -> None:
    store = HttpStore("https://data.example.org/", client_options={"timeout": given})
    assert store.timeout == seconds


@pytest.mark.parametrize(
    ("url", "options", "error", "match"),
    [
        ("http://data.example.org/", {}, InvalidPathError, "allow_http"),
        ("ftp://data.example.org/", {}, InvalidPathError, "not an http"),
        ("https://data.example.org/", {"timeout": "soon"}, ValueError, "not a duration"),
        ("https://data.example.org/", {"pool_idle_timeout": "5s"}, TypeError, "client options"),
    ],
)
def test_a_store_refuses_what_it_cannot_honour(
    url: str, options: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        HttpStore(url, client_options=options)
