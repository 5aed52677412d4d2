"""Shared fixtures: real servers on loopback that tests read files through.

``http_server``
    An HTTP server of a temporary directory with byte-range support. Write files below
    ``http_server.directory()``, read them at ``http_server.url_for(path)``, and count the
    requests it answered with ``http_server.requests(path)``. Every test that uses it runs
    against uvicorn (installed with the test extra), and also against nginx where nginx is
    installed. Fixtures that choose a server themselves ask for ``uvicorn_server`` or
    ``nginx_server`` by name, from ``servers.HTTP_SERVERS``.
``s3_server``
    moto's S3 server. ``s3_server.create_bucket()`` makes a fresh bucket,
    ``s3_server.upload(bucket, key, path_or_bytes)`` stores an object and returns its ``s3://``
    URL, and ``registry.register(f"s3://{bucket}", **s3_server.store_options)`` lets
    virtualstac read it.
``stac_api``
    rustac's STAC API serving the Items of ``stac_archive.py`` (collection ``s2-mini``), whose
    COGs ``http_server`` serves: ``stac_api.url`` is the API root, ``stac_api.archive`` the
    Items and files. Tests that use it are skipped when the ``rustac`` command cannot be found.

All are started once per session on free ports and stopped at the end. See ``servers.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import zarr.core.array

from servers import (
    HTTP_SERVERS,
    RUSTAC_MISSING_REASON,
    HTTPServer,
    NginxServer,
    S3Server,
    STACServer,
    UvicornServer,
    rustac_binary,
)
from stac_archive import ServedArchive, write_archive
from virtualstac.manifests import selection_reads


@pytest.fixture(scope="session")
def uvicorn_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTTPServer]:
    """uvicorn on 127.0.0.1 serving a temporary directory, with range requests and a log."""
    server = UvicornServer.start(tmp_path_factory.mktemp("uvicorn"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def nginx_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTTPServer]:
    """nginx on 127.0.0.1 serving a temporary directory (only requested where installed)."""
    server = NginxServer.start(tmp_path_factory.mktemp("nginx"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session", params=HTTP_SERVERS)
def http_server(request: pytest.FixtureRequest) -> HTTPServer:
    """Each HTTP server this machine has (see ``servers.HTTP_SERVERS``), in turn."""
    server: HTTPServer = request.getfixturevalue(f"{request.param}_server")
    return server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server on 127.0.0.1 (credentials ``testing``/``testing``, ``us-east-1``)."""
    server = S3Server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def stac_api(
    http_server: HTTPServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedArchive]:
    """rustac's STAC API on 127.0.0.1 over the test archive, whose COGs ``http_server`` serves."""
    if rustac_binary() is None:
        pytest.skip(RUSTAC_MISSING_REASON)
    archive = write_archive(http_server.directory("stac"), http_server.url_for)
    server = STACServer.start(*archive.write_api_files(tmp_path_factory.mktemp("stac-api")))
    try:
        yield ServedArchive(server.url, archive)
    finally:
        server.stop()


@pytest.fixture
def no_zarr_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """zarr's reads of selections fail: a read passing with it went past zarr's per-chunk walk
    (``manifests/selection_reads.py``)."""

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("zarr walked the chunks")

    monkeypatch.setattr(zarr.core.array, "_get_selection", refuse)


@pytest.fixture
def fast_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """The names of the arrays whose reads took the path past zarr's per-chunk walk
    (``manifests/selection_reads.py``)."""
    read: set[str] = set()
    original = selection_reads.read_basic_selection

    def recording(array: Any, selection: Any) -> Any:
        values = original(array, selection)
        if values is not None:
            read.add(array.basename)
        return values

    monkeypatch.setattr(selection_reads, "read_basic_selection", recording)
    yield read
