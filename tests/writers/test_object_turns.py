"""Writers of one object-store target take turns through a lock object written conditionally."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from typing import Any

import obstore
import pytest
from obstore.store import S3Store

from servers import S3Server
from virtualstac.errors import TurnLostError
from virtualstac.writers.object_turns import lock_path, taking_turns_in_store

TARGET = "published/scenes.json"
LOCK = "published/.scenes.json.lock"


@pytest.fixture
def store(s3_server: S3Server) -> S3Store:
    """A new bucket of the loopback S3 server."""
    return S3Store(s3_server.create_bucket(), **s3_server.store_options)


def names(store: S3Store) -> list[str]:
    return sorted(meta["path"] for batch in obstore.list(store) for meta in batch)


def dead_pid() -> int:
    finished = subprocess.Popen(["true"])
    finished.wait()
    return finished.pid


def hold(store: S3Store, seconds: float, entered: threading.Event, **turns: Any) -> None:
    with taking_turns_in_store(store, TARGET, **turns):
        entered.set()
        time.sleep(seconds)


def test_the_lock_object_lies_beside_the_target() -> None:
    assert lock_path(TARGET) == LOCK
    assert lock_path("scenes.json") == ".scenes.json.lock"


def test_a_second_writer_waits_for_the_first_and_nothing_is_left(store: S3Store) -> None:
    entered = threading.Event()
    first = threading.Thread(target=hold, args=(store, 1.5, entered))
    first.start()
    assert entered.wait(10)
    assert names(store) == [LOCK]

    started = time.monotonic()
    with taking_turns_in_store(store, TARGET, poll=0.05):
        waited = time.monotonic() - started
    first.join()

    assert waited >= 1.0
    assert names(store) == []


def test_a_holder_that_keeps_renewing_its_lock_keeps_its_turn_past_the_lease(
    store: S3Store,
) -> None:
    entered = threading.Event()
    first = threading.Thread(target=hold, args=(store, 3.0, entered), kwargs={"lease": 1.0})
    first.start()
    assert entered.wait(10)

    started = time.monotonic()
    with taking_turns_in_store(store, TARGET, lease=1.0, poll=0.05):
        waited = time.monotonic() - started
    first.join()

    assert waited >= 2.5  # three leases: the heartbeat, not the lease, decided


def test_the_lock_of_a_dead_process_of_this_host_is_taken_over_at_once(store: S3Store) -> None:
    stale = {"host": socket.gethostname(), "pid": dead_pid(), "turn": "killed", "beat": 1}
    obstore.put(store, LOCK, json.dumps(stale).encode())

    started = time.monotonic()
    with taking_turns_in_store(store, TARGET, lease=60.0, poll=0.05):
        assert json.loads(bytes(obstore.get(store, LOCK).bytes()))["pid"] != stale["pid"]
    assert time.monotonic() - started < 30
    assert names(store) == []


def test_an_unchanging_lock_of_another_host_is_taken_over_after_one_lease(
    store: S3Store,
) -> None:
    elsewhere = {"host": "another-host", "pid": 1, "turn": "cut-off", "beat": 7}
    obstore.put(store, LOCK, json.dumps(elsewhere).encode())

    started = time.monotonic()
    with taking_turns_in_store(store, TARGET, lease=1.0, poll=0.05):
        waited = time.monotonic() - started

    assert 1.0 <= waited < 30
    assert names(store) == []


def test_a_holder_whose_lock_was_taken_over_ends_its_turn_with_an_error(
    store: S3Store,
) -> None:
    with pytest.raises(TurnLostError, match="another writer took over the turn"):
        with taking_turns_in_store(store, TARGET, lease=0.4):
            # What a waiter does once this holder has been silent for a lease.
            obstore.put(store, LOCK, b'{"host": "another-host", "pid": 1, "beat": 1}')
            time.sleep(1.0)
    # The lock is the new holder's, not deleted by the one that lost it.
    assert names(store) == [LOCK]


def test_a_store_that_refuses_the_lock_gives_no_turn(s3_server: S3Server) -> None:
    missing = S3Store("no-such-bucket", **s3_server.store_options)
    with taking_turns_in_store(missing, TARGET):
        pass
