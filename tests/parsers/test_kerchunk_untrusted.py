"""Kerchunk references other people publish: what they name is read only where the reader
allows it, refused before a byte of it is fetched, and never hangs the reader.

Kerchunk names local sources by their plain path (``/data/x.nc``) or a plain ``file://`` URL,
which the parsers read literally, as fsspec does: a reference file served over HTTP or from a
bucket may therefore name any local path, and the registry (the allow-list) is what stops it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import xarray as xr

from servers import HTTPServer, S3Server
from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import InvalidPathError, UnregisteredURLError
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.kerchunk import KerchunkJSONParser
from virtualstac.storage.stats import counting_reads

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")

#: One int64 element per chunk, uncompressed.
ZARRAY = json.dumps(
    {
        "zarr_format": 2,
        "shape": [1],
        "chunks": [1],
        "dtype": "<i8",
        "compressor": None,
        "filters": None,
        "fill_value": None,
        "order": "C",
    }
)


def references(chunk: Any, **sections: Any) -> dict[str, Any]:
    """A version 1 reference set of one array ``v`` whose single chunk is ``chunk`` (None:
    none, for ``gen`` to generate)."""
    refs = {
        ".zgroup": json.dumps({"zarr_format": 2}),
        "v/.zarray": ZARRAY,
        "v/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["x"]}),
        **({} if chunk is None else {"v/0": chunk}),
    }
    return {"version": 1, "refs": refs, **sections}


def finishes(action: Callable[[], Any], release: Path, seconds: float = 30) -> Any:
    """``action()``'s result or error, failing the test if it blocks (on the named pipe
    ``release``, which is then opened for writing so that the blocked read returns)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = action()
        except BaseException as err:  # handed to the test's thread
            outcome["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        os.close(os.open(release, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(seconds)
        pytest.fail(f"reading blocked on the named pipe {release}")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


# -- local references --------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [["data.nc", 0, 8], ["data.nc"]])
def test_a_named_pipe_next_to_the_references_is_refused_not_waited_on(
    tmp_path: Path, chunk: list[Any]
) -> None:
    """An archive can unpack a named pipe next to its references; opening one for reading
    would wait for a writer for ever."""
    os.mkfifo(tmp_path / "data.nc")
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps(references(chunk)))

    with pytest.raises(UnregisteredURLError, match=r"data\.nc' is not allowed: it is a named pipe"):
        finishes(
            lambda: open_virtual_dataset(str(refs), loadable_variables=["v"]),
            tmp_path / "data.nc",
        )
    with pytest.raises(UnregisteredURLError, match="it is a named pipe"):
        finishes(lambda: open_virtual_dataset(str(tmp_path / "data.nc")), tmp_path / "data.nc")


# -- references served by others ---------------------------------------------------------------

#: What a reference file served over HTTP or from a bucket may name, and how reading it fails:
#: local files in every spelling Kerchunk and fsspec accept, climbing paths, other hosts.
HOSTILE = [
    (["/etc/passwd", 0, 8], UnregisteredURLError, "'file:///etc/passwd' is not allowed"),
    (["file:///etc/passwd", 0, 8], UnregisteredURLError, "'file:///etc/passwd' is not allowed"),
    (["file://localhost/etc/passwd", 0, 8], UnregisteredURLError, "file:///etc/passwd"),
    (["file:///etc/pass#wd", 0, 8], UnregisteredURLError, "file:///etc/pass%23wd"),
    (["/proc/self/environ", 0, 8], UnregisteredURLError, "is not allowed"),
    (["/dev/zero", 0, 8], UnregisteredURLError, "'file:///dev/zero' is not allowed"),
    (["/etc/passwd"], UnregisteredURLError, "the whole object 'file:///etc/passwd'"),
    (["file://evil.example/etc/passwd", 0, 8], InvalidPathError, "names host 'evil.example'"),
    (["../secret.bin", 0, 8], InvalidPathError, "may not contain '..'"),
    (["%2e%2e/secret.bin", 0, 8], UnregisteredURLError, "is not allowed"),
    (["sub/%2E%2E/%2e%2e/secret.bin", 0, 8], UnregisteredURLError, "is not allowed"),
    (["s3://someone-elses-bucket/x.nc", 0, 8], UnregisteredURLError, "is not allowed"),
    (["http://127.0.0.1:9/x.nc", 0, 8], UnregisteredURLError, "is not allowed"),
]


def assert_refused_unread(
    url: str, registry: ObjectStoreRegistry, error: type[Exception], match: str
) -> None:
    """Opening the references at ``url`` or reading their chunk raises ``error`` naming what
    was refused, and nothing but the reference file itself is requested."""
    document = registry.head(url)["size"]
    with counting_reads() as reads, pytest.raises(error, match=match):
        store = KerchunkJSONParser()(url, registry)
        assert isinstance(store, ManifestStore)
        xr.open_zarr(store, consolidated=False)["v"].load()
    assert (reads.requests, reads.bytes) == (1, document)


@pytest.mark.parametrize(("chunk", "error", "match"), HOSTILE)
def test_references_served_over_http_read_nothing_the_server_does_not_serve(
    http_server: HTTPServer, chunk: list[Any], error: type[Exception], match: str
) -> None:
    directory = http_server.directory("refs")
    refs = directory / "refs.json"
    refs.write_text(json.dumps(references(chunk)))
    url = http_server.url_for(refs)

    assert_refused_unread(url, ObjectStoreRegistry.for_url(url), error, match)
    # Not even a request the server would have refused.
    assert not [entry for entry in http_server.requests(method=None) if "secret" in entry.path]


def test_templates_and_generators_of_served_references_expand_to_refused_urls(
    http_server: HTTPServer,
) -> None:
    directory = http_server.directory("refs")
    secret = http_server.directory("private") / "secret.bin"
    secret.write_bytes(b"s3cret!!")
    elsewhere = http_server.url_for(secret)
    cases = [
        references(["{{home}}/.ssh/id_rsa", 0, 8], templates={"home": "/root"}),
        references(["{{private}}", 0, 8], templates={"private": elsewhere}),
        references(["{{home}}/x.nc", 0, 8], templates={"home": "file:///root"}),
        {
            **references(None),
            "gen": [
                {
                    "key": "v/{{i}}",
                    "url": "{{u}}",
                    "offset": "0",
                    "length": "8",
                    "dimensions": {"i": {"stop": 1}},
                }
            ],
            "templates": {"u": elsewhere},
        },
    ]
    for number, document in enumerate(cases):
        refs = directory / f"refs{number}.json"
        refs.write_text(json.dumps(document))
        url = http_server.url_for(refs)
        registry = ObjectStoreRegistry.for_url(url)
        assert_refused_unread(url, registry, UnregisteredURLError, "is not allowed")
    # The other directory of the same server was never asked for.
    assert not http_server.requests(secret, method=None)


@pytest.mark.parametrize(("chunk", "error", "match"), HOSTILE)
def test_references_in_a_bucket_read_nothing_outside_it(
    s3_server: S3Server, chunk: list[Any], error: type[Exception], match: str
) -> None:
    bucket = s3_server.create_bucket("refs")
    private = s3_server.create_bucket("private")  # the reader's credentials can read it
    s3_server.upload(private, "secret.bin", b"s3cret!!")
    if chunk[0].startswith("s3://"):
        chunk = [f"s3://{private}/secret.bin", *chunk[1:]]
    url = s3_server.upload(bucket, "refs.json", json.dumps(references(chunk)).encode())

    registry = ObjectStoreRegistry.for_url(url, **s3_server.store_options)
    assert_refused_unread(url, registry, error, match)
