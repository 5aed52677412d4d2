"""The tests' HTTP servers speak HTTP as object storage does (checked with the standard library).

Run against every server of ``servers.HTTP_SERVERS`` (uvicorn everywhere, nginx where it is
installed), so the tests that read through ``http_server`` rely on the same behaviour from each.
"""

from __future__ import annotations

import email.utils
import http.client
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from servers import SIGNED_TOKEN, HTTPServer

DATA = bytes(range(256)) * 16


@pytest.fixture
def served(http_server: HTTPServer) -> tuple[HTTPServer, Path]:
    path = http_server.directory("protocol") / "data.bin"
    path.write_bytes(DATA)
    return http_server, path


def ask(
    server: HTTPServer, path: str, method: str = "GET", **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection: status, headers (lower-case names), body."""
    connection = http.client.HTTPConnection(urlsplit(server.url).netloc, timeout=10)
    try:
        connection.request(
            method, path, headers={k.replace("_", "-"): v for k, v in headers.items()}
        )
        response = connection.getresponse()
        answer = {name.lower(): value for name, value in response.getheaders()}
        return response.status, answer, response.read()
    finally:
        connection.close()


def where(server: HTTPServer, path: Path) -> str:
    return "/" + path.relative_to(server.root).as_posix()


def test_a_single_range_is_answered_with_partial_content(served: tuple[HTTPServer, Path]) -> None:
    server, path = served
    status, headers, body = ask(server, where(server, path), Range="bytes=10-19")
    assert (status, body) == (206, DATA[10:20])
    assert headers["content-range"] == f"bytes 10-19/{len(DATA)}"
    assert server.requests(path)[-1].range == "bytes=10-19"
    assert server.requests(path)[-1].bytes_sent == 10


def test_several_ranges_come_as_multipart_byteranges(served: tuple[HTTPServer, Path]) -> None:
    server, path = served
    status, headers, body = ask(server, where(server, path), Range="bytes=0-3,1000-1003")
    assert status == 206
    assert headers["content-type"].startswith("multipart/byteranges")
    assert DATA[0:4] in body
    assert DATA[1000:1004] in body
    assert f"bytes 1000-1003/{len(DATA)}" in body.decode("latin-1")


def test_head_and_validators(served: tuple[HTTPServer, Path]) -> None:
    server, path = served
    status, headers, body = ask(server, where(server, path), "HEAD")
    assert (status, body, int(headers["content-length"])) == (200, b"", len(DATA))
    assert headers["accept-ranges"] == "bytes"
    assert headers["etag"]
    modified = email.utils.parsedate_to_datetime(headers["last-modified"]).timestamp()
    assert modified == int(path.stat().st_mtime)


def test_preconditions_fail_once_the_file_changed(served: tuple[HTTPServer, Path]) -> None:
    server, path = served
    _, headers, _ = ask(server, where(server, path), "HEAD")
    etag, modified = headers["etag"], headers["last-modified"]
    assert ask(server, where(server, path), If_Match=etag, Range="bytes=0-0")[0] == 206
    assert ask(server, where(server, path), If_Unmodified_Since=modified)[0] == 200
    later = path.stat().st_mtime + 5
    os.utime(path, (later, later))
    assert ask(server, where(server, path), If_Match=etag)[0] == 412
    assert ask(server, where(server, path), If_Unmodified_Since=modified)[0] == 412


def test_signed_directories_need_the_token(http_server: HTTPServer) -> None:
    path = http_server.directory("signed") / "data.bin"
    path.write_bytes(DATA)
    assert ask(http_server, where(http_server, path))[0] == 403
    assert ask(http_server, f"{where(http_server, path)}?token={SIGNED_TOKEN}")[0] == 200
    missing = f"{where(http_server, path)}-missing?token={SIGNED_TOKEN}"
    assert ask(http_server, missing)[0] == 404


def test_connections_are_kept_alive(served: tuple[HTTPServer, Path]) -> None:
    server, path = served
    connection = http.client.HTTPConnection(urlsplit(server.url).netloc, timeout=10)
    sockets = []
    try:
        for start in (0, 100, 200):
            connection.request("GET", where(server, path), headers={"Range": f"bytes={start}-"})
            response = connection.getresponse()
            assert response.read() == DATA[start:]
            assert not response.will_close
            sockets.append(connection.sock)
    finally:
        connection.close()
    assert sockets[0] is sockets[1] is sockets[2]


def test_missing_files_are_not_found(served: tuple[HTTPServer, Path]) -> None:
    server, path = served
    assert ask(server, where(server, path.with_name("absent.bin")))[0] == 404
