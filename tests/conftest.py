"""Shared fixtures: real servers on loopback that tests read files through.

``http_server``
    nginx serving a temporary directory with byte-range support. Write files below
    ``http_server.directory()``, read them at ``http_server.url_for(path)``, and count the
    requests nginx answered with ``http_server.requests(path)``. Tests that use it are skipped
    when nginx is not installed (``.ci/run`` installs nginx-light).
``s3_server``
    moto's S3 server. ``s3_server.create_bucket()`` makes a fresh bucket,
    ``s3_server.upload(bucket, key, path_or_bytes)`` stores an object and returns its ``s3://``
    URL, and ``registry.register(f"s3://{bucket}", **s3_server.store_options)`` lets
    virtualstac read it.
``stac_api``
    rustac's STAC API serving the Items of ``stac_archive.py`` (collection ``s2-mini``), whose
    COGs nginx serves: ``stac_api.url`` is the API root, ``stac_api.archive`` the Items and
    files. Tests that use it are skipped when the ``rustac`` command cannot be found.

All are started once per session on free ports and stopped at the end. See ``servers.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from servers import (
    NGINX_MISSING_REASON,
    RUSTAC_MISSING_REASON,
    HTTPServer,
    S3Server,
    STACServer,
    nginx_binary,
    rustac_binary,
)
from stac_archive import ServedArchive, write_archive


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTTPServer]:
    """nginx on 127.0.0.1 serving a temporary directory, with range requests and an access log."""
    if nginx_binary() is None:
        pytest.skip(NGINX_MISSING_REASON)
    server = HTTPServer.start(tmp_path_factory.mktemp("nginx"))
    try:
        yield server
    finally:
        server.stop()


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
    """rustac's STAC API on 127.0.0.1 over the test archive, whose COGs nginx serves."""
    if rustac_binary() is None:
        pytest.skip(RUSTAC_MISSING_REASON)
    archive = write_archive(http_server.directory("stac"), http_server.url_for)
    server = STACServer.start(*archive.write_api_files(tmp_path_factory.mktemp("stac-api")))
    try:
        yield ServedArchive(server.url, archive)
    finally:
        server.stop()
