"""Network faults, met on loopback: servers that hang, drop connections or ignore ``Range``.

Each case opens a netCDF4 file (written by the netCDF4 library) over HTTP, through a registry
with short timeouts, and reads its values: they equal the netCDF4 library's, or a typed error
says which URL failed, how, and after how many attempts. Messages carry one line each, never a
Rust debug dump, and never the credentials of a URL.
"""

from __future__ import annotations

import socket
import time
import traceback

import numpy as np
import pytest
import xarray as xr

from faulty_servers import QUICK, FaultyServer
from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import (
    ChunkReadError,
    NetworkError,
    NetworkTimeoutError,
    RangeNotSupportedError,
    SourceChangedError,
    UnregisteredURLError,
)
from virtualstac.manifests.sources import SourceStamp
from virtualstac.parsers.kerchunk_sources import verify_sources
from virtualstac.storage.client import NetworkOptions
from virtualstac.storage.signing import SigningRegistry

NAME = "t2m.nc"  # as the netcdf fixture names it


def open_over(server: FaultyServer, network: NetworkOptions = QUICK) -> xr.Dataset:
    """The virtual dataset of the served file, with the values of its chunks still unread."""
    url = server.url_for(NAME)
    return open_virtual_dataset(
        url, registry=ObjectStoreRegistry.for_url(url, network=network), loadable_variables=[]
    )


def values_of(
    virtual: xr.Dataset, url: str, network: NetworkOptions = QUICK, *, first_only: bool = False
) -> np.ndarray:
    """Read the chunks of ``t2m`` (or only the first), as zarr does, through a registry that
    allows ``url``."""
    registry = ObjectStoreRegistry.for_url(url, network=network)
    store = virtual.virtual.to_store(registry)
    t2m = xr.open_zarr(store, consolidated=False)["t2m"]
    return np.asarray((t2m[0, 0] if first_only else t2m).values)


def printed(error: BaseException) -> str:
    """What Python prints for ``error`` uncaught: the message and its chained causes."""
    return "".join(traceback.format_exception(error))


def test_a_server_that_never_answers_fails_within_the_timeout(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "hang") as server:
        started = time.monotonic()
        with pytest.raises(NetworkTimeoutError) as raised:
            open_over(server)
        waited = time.monotonic() - started
        assert server.connections == 3
    # Three attempts of 0.5 s; obstore's own defaults would wait for minutes.
    assert waited < 10
    message = str(raised.value)
    assert server.url_for(NAME) in message
    assert "did not answer within the timeout" in message
    assert "3 attempts" in message
    assert isinstance(raised.value, TimeoutError)


def test_chunk_reads_from_a_server_that_stops_answering_time_out_naming_the_chunk(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "serve") as server:
        virtual = open_over(server)
        server.behave("hang")
        with pytest.raises(NetworkTimeoutError, match=r"chunk 't2m/c/0/0' from .*3 attempts"):
            values_of(virtual, server.url_for(NAME), first_only=True)


def test_a_dropped_connection_is_retried(netcdf: tuple[bytes, np.ndarray]) -> None:
    data, expected = netcdf
    with FaultyServer({NAME: data}, "drop", "serve") as server:
        virtual = open_over(server)
        assert server.connections >= 2
        server.behave("drop", "serve")
        np.testing.assert_array_equal(values_of(virtual, server.url_for(NAME)), expected)


def test_a_server_that_drops_every_connection_names_the_url_and_the_attempts(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "drop") as server:
        with pytest.raises(NetworkError) as raised:
            open_over(server)
        assert server.connections == 3
    assert not isinstance(raised.value, NetworkTimeoutError)
    message = str(raised.value)
    assert f"reading '{server.url_for(NAME)}' failed" in message
    assert "closed the connection before answering (3 attempts in" in message
    assert "\n" not in message
    assert "Debug source" not in printed(raised.value)


def test_a_server_that_keeps_answering_503_is_retried_then_named(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "unavailable") as server:
        with pytest.raises(NetworkError, match=r"answered 503 Service Unavailable \(3 attempts"):
            open_over(server)
        assert server.connections == 3


def test_a_server_that_answers_503_once_is_read_on_the_retry(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, expected = netcdf
    with FaultyServer({NAME: data}, "unavailable", "serve") as server:
        virtual = open_over(server)
        server.behave("unavailable", "serve")
        np.testing.assert_array_equal(values_of(virtual, server.url_for(NAME)), expected)


def test_a_refused_connection_is_named() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/{NAME}"
    registry = ObjectStoreRegistry.for_url(url, network=QUICK)
    with pytest.raises(NetworkError, match=r"the connection was refused \(3 attempts"):
        open_virtual_dataset(url, registry=registry)


def test_a_server_that_ignores_range_is_named_at_open(netcdf: tuple[bytes, np.ndarray]) -> None:
    data, _ = netcdf
    with (
        FaultyServer({NAME: data}, "ignore-range") as server,
        pytest.raises(RangeNotSupportedError, match=r"server at 127\.0\.0\.1 ignores HTTP Range"),
    ):
        open_over(server)


def test_chunks_are_never_read_from_a_server_that_ignores_range(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "serve") as server:
        virtual = open_over(server)
        server.behave("ignore-range")
        with pytest.raises(RangeNotSupportedError, match=r"chunk 't2m/c/\d/\d' from '"):
            values_of(virtual, server.url_for(NAME))


def test_a_body_cut_short_after_its_headers_is_a_network_error_naming_the_chunk(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "serve") as server:
        virtual = open_over(server)
        server.behave("cut")
        with pytest.raises(NetworkError, match=r"chunk 't2m/c/\d/\d' from '.*connection dropped"):
            values_of(virtual, server.url_for(NAME))


def test_credentials_in_urls_never_reach_messages(netcdf: tuple[bytes, np.ndarray]) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "drop") as server:
        url = server.url_for(NAME).replace("://", "://reader:hunter2@")
        with pytest.raises(NetworkError) as raised:
            open_virtual_dataset(url, registry=ObjectStoreRegistry.for_url(url, network=QUICK))
    assert "hunter2" not in printed(raised.value)
    assert "://***@127.0.0.1" in str(raised.value)

    registry = ObjectStoreRegistry.for_url("http://reader:hunter2@127.0.0.1:9/allowed/x.nc")
    with pytest.raises(UnregisteredURLError) as refused:
        registry.resolve("http://reader:hunter2@127.0.0.1:9/elsewhere/x.nc")
    assert "hunter2" not in str(refused.value)


def test_a_password_holding_an_at_sign_is_redacted_whole() -> None:
    """URL parsers split user info from the host at its last ``@``: so does redaction."""
    registry = ObjectStoreRegistry.for_url("http://127.0.0.1:9/allowed/x.nc")
    with pytest.raises(UnregisteredURLError) as refused:
        registry.resolve("http://reader:hun@ter2@127.0.0.1:9/elsewhere/x.nc")
    assert "ter2" not in str(refused.value)
    assert "'http://***@127.0.0.1:9/elsewhere/x.nc'" in str(refused.value)


def test_credentials_never_reach_a_changed_source_message(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "serve") as server:
        url = server.url_for(NAME).replace("://", "://reader:hunter2@")
        registry = ObjectStoreRegistry.for_url(url, network=QUICK)
        references = url.rsplit("/", 1)[0] + "/refs.json"
        stale = {url: SourceStamp(size=len(data) + 1)}  # recorded when the file was longer
        with pytest.raises(SourceChangedError, match=r"size \d+ -> \d+") as raised:
            verify_sources(stale, registry, references)
    assert "hunter2" not in printed(raised.value)
    assert "://***@127.0.0.1" in str(raised.value)


def test_signatures_in_queries_never_reach_messages(netcdf: tuple[bytes, np.ndarray]) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "drop") as server:
        url = server.url_for(NAME)
        registry = SigningRegistry(
            lambda unsigned: f"{unsigned}?sv=2024&sig=hunter3", network=QUICK
        )
        registry.register(url.rsplit("/", 1)[0] + "/")
        with pytest.raises(NetworkError) as raised:
            open_virtual_dataset(url, registry=registry)
    assert "hunter3" not in printed(raised.value)


def test_a_missing_file_says_so_in_one_line(netcdf: tuple[bytes, np.ndarray]) -> None:
    data, _ = netcdf
    with FaultyServer({NAME: data}, "serve") as server:
        virtual = open_over(server)
        url = server.url_for(NAME)
        renamed = virtual.virtual.rename_paths(lambda path: path.replace(NAME, "gone.nc"))
        with pytest.raises(ChunkReadError, match="which does not exist") as raised:
            values_of(renamed, url)
    assert "Debug source" not in printed(raised.value)


def test_files_read_through_default_options_have_equal_values(
    netcdf: tuple[bytes, np.ndarray],
) -> None:
    data, expected = netcdf
    with FaultyServer({NAME: data}, "serve") as server:
        url = server.url_for(NAME)
        virtual = open_virtual_dataset(url, loadable_variables=[])
        np.testing.assert_array_equal(values_of(virtual, url, NetworkOptions()), expected)
