"""Conditional reads of byte ranges: the bytes of the version a reference recorded, or
``SourceChangedError``, from an HTTP server (uvicorn) and from S3 (moto)."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta

import pytest

from servers import HTTPServer, S3Server
from virtualstac import ObjectStoreRegistry
from virtualstac.errors import SourceChangedError
from virtualstac.storage import objects
from virtualstac.storage.conditions import ReadCondition

DATA = bytes(range(256)) * 64


def read(registry: ObjectStoreRegistry, url: str, condition: ReadCondition) -> list[bytes]:
    """Two nearby ranges of ``url`` and a far one, read with ``condition``."""
    store, path = registry.resolve(url)
    buffers = asyncio.run(
        objects.get_ranges_async(
            store, path, [0, 100, 15_000], [10, 110, 15_010], coalesce=1024, condition=condition
        )
    )
    return [bytes(buffer) for buffer in buffers]


def expected() -> list[bytes]:
    return [DATA[0:10], DATA[100:110], DATA[15_000:15_010]]


def test_http_reads_send_the_etag_quoted_and_fail_once_the_file_changed(
    http_server: HTTPServer,
) -> None:
    path = http_server.directory("conditions") / "data.bin"
    path.write_bytes(DATA)
    url = http_server.url_for(path)
    registry = ObjectStoreRegistry.for_url(url)
    etag = objects.head(*registry.resolve(url))["e_tag"]
    # Icechunk records an ETag as it was given, quoted or not: both name the same version.
    assert read(registry, url, ReadCondition(etag=etag)) == expected()
    assert read(registry, url, ReadCondition(etag=etag.strip('"'))) == expected()
    assert len(http_server.requests(path)) == 4  # the two nearby ranges merged, each time

    later = path.stat().st_mtime + 5
    os.utime(path, (later, later))
    with pytest.raises(SourceChangedError, match="412 Precondition Failed"):
        read(registry, url, ReadCondition(etag=etag))
    with pytest.raises(SourceChangedError, match="changed after it was referenced"):
        read(registry, url, ReadCondition(unmodified_since=datetime.fromtimestamp(later - 5, UTC)))
    assert read(registry, url, ReadCondition(unmodified_since=datetime.fromtimestamp(later, UTC)))


def test_s3_reads_pass_the_condition_as_get_options(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, "data.bin", DATA)
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    meta = objects.head(*registry.resolve(url))
    assert read(registry, url, ReadCondition(etag=meta["e_tag"])) == expected()
    since = meta["last_modified"]
    assert read(registry, url, ReadCondition(unmodified_since=since)) == expected()
    with pytest.raises(SourceChangedError, match="412 Precondition Failed"):
        read(registry, url, ReadCondition(unmodified_since=since - timedelta(seconds=5)))
    s3_server.upload(bucket, "data.bin", DATA[::-1])
    with pytest.raises(SourceChangedError, match=r"data\.bin"):
        read(registry, url, ReadCondition(etag=meta["e_tag"]))


def test_a_condition_names_a_version() -> None:
    with pytest.raises(ValueError, match="ETag or a time"):
        ReadCondition()
    with pytest.raises(ValueError, match="timezone-aware"):
        ReadCondition(unmodified_since=datetime(2024, 5, 6))
    moment = datetime(2024, 5, 6, 10, tzinfo=UTC)
    assert ReadCondition(etag="abc", unmodified_since=moment).http_headers() == {
        "If-Match": '"abc"',
        "If-Unmodified-Since": "Mon, 06 May 2024 10:00:00 GMT",
    }
    assert ReadCondition(etag='W/"abc"').http_headers() == {"If-Match": 'W/"abc"'}
    assert ReadCondition(etag='"abc"').get_options() == {"if_match": "abc"}
