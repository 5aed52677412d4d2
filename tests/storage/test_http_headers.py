"""An HTTP answer's headers bounded as a whole: one watchdog thread for every request.

Each case meets a :class:`~faulty_servers.FaultyServer` on loopback; ``"trickle-head"`` sends
the status line and header fields a byte every 50 ms, each byte well within the read timeout,
so only a bound on the headers as a whole stops the request.
"""

from __future__ import annotations

import multiprocessing
import threading
from multiprocessing.connection import Connection

import pytest
import urllib3

from faulty_servers import FaultyServer
from virtualstac.storage.http_headers import bound_headers

BODY = b"0123456789" * 10
TIMEOUT = urllib3.Timeout(connect=1, read=0.5)


def fetch(url: str) -> str:
    """What a bounded pool manager makes of ``url``: its body, or the reason it failed."""
    manager = bound_headers(urllib3.PoolManager(retries=False))
    try:
        return manager.request("GET", url, timeout=TIMEOUT).data.decode()
    except urllib3.exceptions.ReadTimeoutError as err:
        return str(err)


def watchdogs() -> int:
    return sum(thread.name == "virtualstac-http-headers" for thread in threading.enumerate())


def test_headers_trickled_byte_by_byte_fail_as_a_read_timeout() -> None:
    with FaultyServer({"body": BODY}, "trickle-head") as server:
        assert "Read timed out. (read timeout=0.5)" in fetch(server.url_for("body"))


def test_many_requests_share_one_watchdog_thread() -> None:
    with FaultyServer({"body": BODY}, "serve") as server:
        for _ in range(50):
            assert fetch(server.url_for("body")) == BODY.decode()
    assert watchdogs() == 1


def fetch_in_child(url: str, answer: Connection) -> None:
    answer.send(fetch(url))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_a_forked_child_bounds_headers_with_its_own_watchdog() -> None:
    """A forked child inherits the watchdog but not its thread: it starts its own."""
    with FaultyServer({"body": BODY}, "serve", "trickle-head") as server:
        assert fetch(server.url_for("body")) == BODY.decode()  # the parent's watchdog runs
        assert watchdogs() == 1
        theirs, ours = multiprocessing.Pipe(duplex=False)
        child = multiprocessing.get_context("fork").Process(
            target=fetch_in_child, args=(server.url_for("body"), ours)
        )
        child.start()
        assert theirs.poll(30)
        assert "Read timed out. (read timeout=0.5)" in theirs.recv()
        child.join(5)
    assert child.exitcode == 0
