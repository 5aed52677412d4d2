"""A bound on the time the status line and header fields of an HTTP answer take to arrive.

A socket's read timeout bounds each wait for bytes, not their sum: a server that sends its
headers a byte at a time, each within the timeout, holds a request for as long as http.client
reads headers (up to 100 fields of 64 KiB). :func:`bound_headers` makes a urllib3 pool manager
give up on an answer whose headers have not all arrived within the request's read timeout: a
timer shuts the connection's socket down then, and the read fails as a read timeout (which
urllib3 raises as ``ReadTimeoutError``). The body is bounded by its readers.
"""

from __future__ import annotations

import http.client
import socket
import threading
from typing import Any

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, PoolManager
from urllib3.connection import HTTPConnection, HTTPSConnection

__all__ = ["bound_headers"]


def _shut(sock: socket.socket, expired: threading.Event) -> None:
    expired.set()
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed meanwhile: the answer came after all
        pass


class _BoundedHeaders:
    """A urllib3 connection whose ``getresponse`` takes at most its read timeout in all."""

    sock: socket.socket | None
    timeout: Any

    def getresponse(self) -> Any:
        seconds = self.timeout
        if self.sock is None or not isinstance(seconds, int | float) or seconds <= 0:
            return super().getresponse()  # type: ignore[misc]
        expired = threading.Event()
        timer = threading.Timer(seconds, _shut, (self.sock, expired))
        timer.daemon = True
        timer.start()
        try:
            return super().getresponse()  # type: ignore[misc]
        except (OSError, http.client.HTTPException) as err:
            if expired.is_set():
                raise TimeoutError(
                    f"the answer's headers did not all arrive within {seconds:g} s"
                ) from err
            raise
        finally:
            timer.cancel()


class _HTTPConnection(_BoundedHeaders, HTTPConnection):
    pass


class _HTTPSConnection(_BoundedHeaders, HTTPSConnection):
    pass


class _HTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


def bound_headers[M: PoolManager](manager: M) -> M:
    """``manager``, its connections from now on bounding an answer's headers as a whole by
    the request's read timeout (proxied ones included: a ``ProxyManager`` is a manager)."""
    manager.pool_classes_by_scheme = {
        "http": _HTTPConnectionPool,
        "https": _HTTPSConnectionPool,
    }
    return manager
