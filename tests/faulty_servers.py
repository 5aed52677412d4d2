"""An HTTP server on loopback that misbehaves on purpose, connection by connection.

:class:`FaultyServer` serves a few files from memory and treats each new connection by the
next of its behaviours (the last one repeats):

``"serve"``
    Answer like object storage: ``206 Partial Content`` for a ``Range``, ``HEAD``, ``ETag``
    and ``Last-Modified``, then close the connection.
``"hang"``
    Accept the connection, read the request and never answer.
``"drop"``
    Read the request and close the connection without a word.
``"ignore-range"``
    Answer every request with ``200 OK`` and the whole file, whatever its ``Range`` says.
``"unavailable"``
    Answer ``503 Service Unavailable``, as an overloaded object store does.
``"cut"``
    Answer as ``"serve"`` does, but close the connection half-way through the body.
``"redirect"``
    Answer ``302 Found``, sending the client to the same name below :attr:`redirect_to`.
``"gzip"``
    Answer as ``"serve"`` does, with the bytes gzip-compressed (``Content-Encoding: gzip``).
``"trickle"``
    Answer as ``"serve"`` does, sending the body one byte every 50 ms.
``"trickle-head"``
    Answer as ``"serve"`` does, sending the status line and header fields one byte every
    50 ms (a slow-loris server: each byte comes well within any read timeout).

Its threads stop when the server is stopped (it is a context manager) and in any case after
``lifetime`` seconds, so a test that fails half-way leaves nothing running.
"""

from __future__ import annotations

import gzip
import re
import socket
import threading
import time
from collections.abc import Mapping
from types import TracebackType

from virtualstac.storage.client import NetworkOptions

__all__ = ["BEHAVIOURS", "QUICK", "FaultyServer"]

#: Network options for tests against these servers: short timeouts, so that a fault shows in a
#: second, and two retries (three attempts).
QUICK = NetworkOptions(
    connect_timeout=1, timeout=0.5, max_retries=2, backoff=0.02, max_backoff=0.05, retry_timeout=5
)

BEHAVIOURS = frozenset(
    {
        "serve",
        "hang",
        "drop",
        "ignore-range",
        "unavailable",
        "cut",
        "redirect",
        "gzip",
        "trickle",
        "trickle-head",
    }
)
_LAST_MODIFIED = "Mon, 06 May 2024 10:00:00 GMT"
_REASONS = {
    200: "OK",
    206: "Partial Content",
    302: "Found",
    404: "Not Found",
    416: "Range Not Satisfiable",
    503: "Service Unavailable",
}


class FaultyServer:
    """Serve ``files`` (name -> bytes) at :attr:`url`, each connection by the next behaviour."""

    def __init__(
        self, files: Mapping[str, bytes], *behaviours: str, lifetime: float = 60.0
    ) -> None:
        self._files = dict(files)
        #: Where ``"redirect"`` sends clients (this server's own URL unless set).
        self.redirect_to = ""
        self._lock = threading.Lock()
        self._behaviours: list[str] = []
        self._first = 0
        self.connections = 0
        self.behave(*behaviours)
        self._deadline = time.monotonic() + lifetime
        self._stopped = threading.Event()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="faulty-accept", daemon=True)
        self._acceptor.start()

    def url_for(self, name: str) -> str:
        """The URL of the file ``name``."""
        return f"{self.url}/{name}"

    def put(self, name: str, data: bytes) -> None:
        """Serve ``data`` as the file ``name`` from now on (documents that name the server's
        own URL can only be written once it runs)."""
        with self._lock:
            self._files[name] = data

    def behave(self, *behaviours: str) -> None:
        """Treat the connections from now on by ``behaviours`` (the last one repeats)."""
        unknown = set(behaviours) - BEHAVIOURS
        if not behaviours or unknown:
            raise ValueError(f"behaviours must be some of {sorted(BEHAVIOURS)}, got {behaviours}")
        with self._lock:
            self._behaviours = list(behaviours)
            self._first = self.connections

    def stop(self) -> None:
        """Close every connection and wait for the server's threads to end."""
        self._stopped.set()
        self._acceptor.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> FaultyServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _running(self) -> bool:
        return not self._stopped.is_set() and time.monotonic() < self._deadline

    def _accept(self) -> None:
        try:
            while self._running():
                try:
                    connection, _ = self._listener.accept()
                except TimeoutError:
                    continue
                with self._lock:
                    index = self.connections - self._first
                    behaviour = self._behaviours[min(index, len(self._behaviours) - 1)]
                    self.connections += 1
                thread = threading.Thread(
                    target=self._handle, args=(connection, behaviour), daemon=True
                )
                self._threads.append(thread)
                thread.start()
        finally:
            self._listener.close()

    def _handle(self, connection: socket.socket, behaviour: str) -> None:
        with connection:
            connection.settimeout(0.05)
            request = self._read_request(connection)
            if request is None or behaviour == "drop":
                return
            if behaviour == "hang":
                while self._running():
                    time.sleep(0.05)
                return
            connection.settimeout(5)
            if behaviour == "unavailable":
                connection.sendall(_head(503, {"Connection": "close", "Content-Length": "0"}))
                return
            if behaviour == "redirect":
                target = f"{self.redirect_to or self.url}/{request[1].lstrip('/')}"
                fields = {"Location": target, "Connection": "close", "Content-Length": "0"}
                connection.sendall(_head(302, fields))
                return
            honour_range = behaviour in ("serve", "cut", "gzip", "trickle", "trickle-head")
            answer = self._answer(*request, honour_range=honour_range)
            head, _, body = answer.partition(b"\r\n\r\n")
            if behaviour == "cut":
                answer = head + b"\r\n\r\n" + body[: len(body) // 2]
            if behaviour == "gzip":
                packed = gzip.compress(body)
                head = re.sub(rb"Content-Length: \d+", b"Content-Length: %d" % len(packed), head)
                answer = head + b"\r\nContent-Encoding: gzip\r\n\r\n" + packed
            if behaviour in ("trickle", "trickle-head"):
                slow, fast = (body, head + b"\r\n\r\n")
                if behaviour == "trickle-head":
                    slow, fast = (head + b"\r\n\r\n", b"")
                try:
                    connection.sendall(fast)
                    for index in range(len(slow)):
                        if not self._running():
                            return
                        connection.sendall(slow[index : index + 1])
                        time.sleep(0.05)
                    if behaviour == "trickle-head":
                        connection.sendall(body)
                except OSError:  # the client gave up: what the behaviour is for
                    return
                return
            connection.sendall(answer)

    def _read_request(self, connection: socket.socket) -> tuple[str, str, dict[str, str]] | None:
        """The method, path and headers of the request, or None if none arrives in time."""
        data = b""
        while b"\r\n\r\n" not in data:
            if not self._running():
                return None
            try:
                chunk = connection.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                return None
            data += chunk
        raw_head, _, body = data.partition(b"\r\n\r\n")
        head = raw_head.decode("latin-1").split("\r\n")
        method, path, _ = head[0].split(" ", 2)
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        # A body left unread (a search POSTed) would make closing the connection reset it,
        # and the client could lose the answer.
        missing = int(headers.get("content-length", "0") or 0) - len(body)
        while missing > 0 and self._running():
            try:
                chunk = connection.recv(min(missing, 65536))
            except TimeoutError:
                continue
            if not chunk:
                return None
            missing -= len(chunk)
        return method, path, headers

    def _answer(
        self, method: str, path: str, headers: dict[str, str], *, honour_range: bool
    ) -> bytes:
        with self._lock:
            body = self._files.get(path.lstrip("/").split("?", 1)[0])
        fields = {"Connection": "close", "Content-Type": "application/octet-stream"}
        if body is None:
            status, payload = 404, b""
        else:
            fields |= {"ETag": f'"{len(body)}-1"', "Last-Modified": _LAST_MODIFIED}
            status, payload = 200, body
            wanted = headers.get("range", "")
            if honour_range and wanted.startswith("bytes="):
                fields["Accept-Ranges"] = "bytes"
                start, end = _byte_range(wanted, len(body))
                if start >= len(body):
                    status, payload = 416, b""
                    fields["Content-Range"] = f"bytes */{len(body)}"
                else:
                    status, payload = 206, body[start:end]
                    fields["Content-Range"] = f"bytes {start}-{end - 1}/{len(body)}"
        fields["Content-Length"] = str(len(payload))
        head = _head(status, fields)
        return head if method == "HEAD" else head + payload


def _head(status: int, fields: Mapping[str, str]) -> bytes:
    """The status line and header fields of an answer."""
    lines = [f"HTTP/1.1 {status} {_REASONS[status]}"]
    lines += [f"{name}: {value}" for name, value in fields.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _byte_range(header: str, size: int) -> tuple[int, int]:
    """``[start, end)`` of a single ``bytes=`` range of an object of ``size`` bytes."""
    first, _, last = header.removeprefix("bytes=").split(",")[0].strip().partition("-")
    if not first:
        return max(size - int(last), 0), size
    return int(first), min(int(last) + 1, size) if last else size
