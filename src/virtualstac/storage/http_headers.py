"""A bound on the time the status line and header fields of an HTTP answer take to arrive.

A socket's read timeout bounds each wait for bytes, not their sum: a server that sends its
headers a byte at a time, each within the timeout, holds a request for as long as http.client
reads headers (up to 100 fields of 64 KiB). :func:`bound_headers` makes a urllib3 pool manager
give up on an answer whose headers have not all arrived within the request's read timeout: a
watchdog shuts the connection's socket down then, and the read fails as a read timeout (which
urllib3 raises as ``ReadTimeoutError``). The body is bounded by its readers.

One watchdog thread serves every request of the process, a heap of deadlines: a thread per
request (``threading.Timer``) cost more than the request itself on loopback. The watchdog only
shuts sockets down, never closes them (their connection does), and forgets a socket as soon as
its answer's headers are in, so it keeps no socket alive.
"""

from __future__ import annotations

import heapq
import http.client
import os
import socket
import threading
import time
from typing import Any

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, PoolManager
from urllib3.connection import HTTPConnection, HTTPSConnection

__all__ = ["bound_headers"]


class _Watch:
    """One answer being waited for: its socket until it is released or shut down."""

    __slots__ = ("deadline", "expired", "sock")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock: socket.socket | None = sock
        self.deadline = deadline
        self.expired = False


class _Watchdog:
    """A daemon thread that shuts down the socket of each watch whose deadline passes first.

    Released watches stay in the heap until they come up or outnumber the live ones (then the
    heap is rebuilt), so a release is O(1) and the heap stays within twice the requests in
    flight. A watch is expired or released under the lock, never both: once :meth:`release`
    returns, the watchdog no longer touches that socket (a pooled connection may be reused).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, _Watch]] = []
        self._released = 0
        self._count = 0
        self._thread: threading.Thread | None = None

    def watch(self, sock: socket.socket, seconds: float) -> _Watch:
        """Shut ``sock`` down in ``seconds`` unless the watch is released before."""
        entry = _Watch(sock, time.monotonic() + seconds)
        with self._lock:
            self._count += 1
            heapq.heappush(self._heap, (entry.deadline, self._count, entry))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="virtualstac-http-headers", daemon=True
                )
                self._thread.start()
            elif self._heap[0][2] is entry:  # earlier than what the thread waits for
                self._wake.notify()
        return entry

    def release(self, entry: _Watch) -> bool:
        """Stop watching ``entry`` (again is harmless); whether its deadline had passed."""
        with self._lock:
            if entry.sock is not None:
                entry.sock = None
                self._released += 1
                if self._released > len(self._heap) // 2 and self._released > 64:
                    self._heap = [item for item in self._heap if item[2].sock is not None]
                    heapq.heapify(self._heap)
                    self._released = 0
            return entry.expired

    def _run(self) -> None:
        with self._lock:
            while True:
                now = time.monotonic()
                while self._heap and (self._heap[0][2].sock is None or self._heap[0][0] <= now):
                    entry = heapq.heappop(self._heap)[2]
                    if entry.sock is None:
                        self._released -= 1
                        continue
                    entry.expired = True
                    _shut(entry.sock)
                    entry.sock = None
                self._wake.wait(self._heap[0][0] - now if self._heap else None)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed meanwhile by its connection
        pass


_watchdog = _Watchdog()


def _new_watchdog_after_fork() -> None:
    # A forked child inherits the watchdog but not its thread, and perhaps a held lock.
    global _watchdog
    _watchdog = _Watchdog()


os.register_at_fork(after_in_child=_new_watchdog_after_fork)


class _BoundedHeaders:
    """A urllib3 connection whose ``getresponse`` takes at most its read timeout in all."""

    sock: socket.socket | None
    timeout: Any

    def getresponse(self) -> Any:
        seconds = self.timeout
        if self.sock is None or not isinstance(seconds, int | float) or seconds <= 0:
            return super().getresponse()  # type: ignore[misc]
        watchdog = _watchdog
        entry = watchdog.watch(self.sock, seconds)
        try:
            response = super().getresponse()  # type: ignore[misc]
        except (OSError, http.client.HTTPException) as err:
            if watchdog.release(entry):
                raise _late(seconds) from err
            raise
        finally:
            watchdog.release(entry)
        if entry.expired:  # shut down as the last header came: the body cannot be read
            response.close()
            raise _late(seconds)
        return response


def _late(seconds: float) -> TimeoutError:
    return TimeoutError(f"the answer's headers did not all arrive within {seconds:g} s")


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
