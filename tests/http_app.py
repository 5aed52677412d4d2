"""The HTTP servers of the tests, as ASGI apps that uvicorn runs in a child process.

``python tests/http_app.py --fd N files ROOT LOG`` serves the files below ``ROOT`` with
Starlette's ``StaticFiles`` (single and multiple byte ranges, ``HEAD``, ``ETag`` and
``Last-Modified``, conditional requests) and appends one line per answered request to ``LOG``.
``python tests/http_app.py --fd N gateway UPSTREAM`` forwards requests that accept to pay to
the S3 endpoint ``UPSTREAM``. ``N`` is a listening socket the parent passes down, so the port
is known before the child starts. The child exits when its parent does.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import socket
import stat
from collections.abc import Awaitable, Callable, MutableMapping
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import uvicorn
from starlette.exceptions import HTTPException
from starlette.responses import FileResponse, PlainTextResponse
from starlette.staticfiles import StaticFiles

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The query token that directories named ``signed-*`` require.
SIGNED_TOKEN = "letmein"
#: Seconds an idle connection stays open: longer than the clients' idle pool timeout
#: (reqwest, under obstore and Icechunk: 90 s), so that the server never closes a connection a
#: client is about to reuse ("connection closed before message completed").
KEEPALIVE_SECONDS = 600
#: Connections the server accepts at once (Icechunk reads many chunks at once).
MAX_CONNECTIONS = 4096


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _precondition_failed(files: StaticFiles, scope: Scope) -> bool:
    """Whether ``If-Match`` or ``If-Unmodified-Since`` fail (RFC 9110 13.1.1, 13.1.4).

    StaticFiles checks only the conditions that answer 304; object stores and nginx also
    answer 412 to these, which is how Icechunk notices that a referenced file changed.
    """
    if_match = _header(scope, b"if-match")
    if_unmodified_since = _header(scope, b"if-unmodified-since")
    if if_match is None and if_unmodified_since is None:
        return False
    full_path, stat_result = files.lookup_path(files.get_path(scope))
    if stat_result is None or not stat.S_ISREG(stat_result.st_mode):
        return False  # StaticFiles answers 404
    if if_match is not None:
        tags = [tag.strip() for tag in if_match.split(",")]
        etag = FileResponse(full_path, stat_result=stat_result).headers["etag"]
        return "*" not in tags and etag not in tags
    try:
        since = parsedate_to_datetime(if_unmodified_since)
    except (TypeError, ValueError):
        return False  # an invalid date is ignored
    return int(stat_result.st_mtime) > since.timestamp()


def files_app(root: Path, log: Path) -> ASGIApp:
    """Starlette's static files below ``root``; ``signed-*`` directories need the token.

    Each answer is logged as ``method, path, Range header ("-" if none), status, body bytes``
    separated by tabs, like nginx's access log in ``tests/servers.py``.
    """
    files = StaticFiles(directory=root)
    forbidden = PlainTextResponse("Forbidden", status_code=403)
    failed = PlainTextResponse("Precondition Failed", status_code=412)
    # Line-buffered: each request's line reaches the file as a whole.
    log_file = log.open("a", buffering=1)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        answer = {"status": 0, "sent": 0, "logged": False}

        def record() -> None:
            if not answer["logged"]:
                answer["logged"] = True
                fields = (
                    scope["method"],
                    scope["path"],
                    _header(scope, b"range") or "-",
                    answer["status"],
                    answer["sent"],
                )
                log_file.write("\t".join(map(str, fields)) + "\n")

        async def logged(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                headers = dict(message.get("headers", []))
                if scope["method"] == "HEAD" or headers.get(b"content-length") == b"0":
                    # The headers are the whole answer: uvicorn may send them at once.
                    record()
            elif message["type"] == "http.response.body":
                answer["sent"] += len(message.get("body", b""))
                if not message.get("more_body", False):
                    # Logged before the last bytes leave, so a client that has its answer
                    # finds the request in the log.
                    record()
            await send(message)

        query = parse_qs(scope["query_string"].decode("latin-1"))
        try:
            if scope["path"].startswith("/signed-") and query.get("token") != [SIGNED_TOKEN]:
                await forbidden(scope, receive, logged)
            elif _precondition_failed(files, scope):
                await failed(scope, receive, logged)
            else:
                await files(scope, receive, logged)
        except HTTPException as err:  # what Starlette's routing would turn into an answer
            refusal = PlainTextResponse(str(err.detail), err.status_code, headers=err.headers)
            await refusal(scope, receive, logged)
        finally:
            record()

    return app


def gateway_app(upstream: str) -> ASGIApp:
    """Forward requests with ``x-amz-request-payer: requester`` to ``upstream``; 403 others."""
    parts = urlsplit(upstream)

    def forward(method: str, target: str, headers: dict[str, str], body: bytes) -> Any:
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        try:
            connection.request(method, target, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if _header(scope, b"x-amz-request-payer") != "requester":
            await PlainTextResponse("Forbidden", status_code=403)(scope, receive, send)
            return
        query = scope["query_string"].decode("latin-1")
        target = scope["raw_path"].decode("latin-1") + (f"?{query}" if query else "")
        headers = {
            key.decode("latin-1"): value.decode("latin-1")
            for key, value in scope["headers"]
            if key.lower() != b"host"
        }
        status, upstream_headers, data = await anyio.to_thread.run_sync(
            forward, scope["method"], target, headers, body
        )
        hop_by_hop = {"connection", "keep-alive", "transfer-encoding"}
        kept = [
            (key.lower().encode(), value.encode())
            for key, value in upstream_headers
            if key.lower() not in hop_by_hop
        ]
        if scope["method"] != "HEAD" and not any(key == b"content-length" for key, _ in kept):
            kept.append((b"content-length", str(len(data)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": kept})
        await send({"type": "http.response.body", "body": data, "more_body": False})

    return app


async def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    parent = os.getppid()

    async def exit_with_parent() -> None:
        while not server.should_exit:
            if os.getppid() != parent:
                server.should_exit = True
            await asyncio.sleep(1)

    watchdog = asyncio.ensure_future(exit_with_parent())
    try:
        await server.serve(sockets=[sock])
    finally:
        watchdog.cancel()


def main() -> None:
    """Serve the app the command line names on the inherited socket until terminated."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fd", type=int, required=True, help="a listening socket")
    apps = parser.add_subparsers(dest="app", required=True)
    files = apps.add_parser("files")
    files.add_argument("root", type=Path)
    files.add_argument("log", type=Path)
    gateway = apps.add_parser("gateway")
    gateway.add_argument("upstream")
    arguments = parser.parse_args()
    app = (
        files_app(arguments.root, arguments.log)
        if arguments.app == "files"
        else gateway_app(arguments.upstream)
    )
    config = uvicorn.Config(
        app,
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_keep_alive=KEEPALIVE_SECONDS,
        timeout_graceful_shutdown=5,
        backlog=MAX_CONNECTIONS,
    )
    sock = socket.socket(fileno=arguments.fd)
    asyncio.run(_serve(uvicorn.Server(config), sock))


if __name__ == "__main__":
    main()
