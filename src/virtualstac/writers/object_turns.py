"""Writers of one object-store target take turns, as local writers do with ``flock``.

An object store has no locks, only conditional writes. A turn is a lock object beside the
target (``.NAME.lock``, as locally) created only if absent (``If-None-Match: *``); it names its
holder (host, process, turn) and a heartbeat that the holder rewrites every quarter lease,
each time on the version it wrote last (``If-Match``), and it is deleted when the turn ends.
A writer that finds the lock waits: until it is gone, or until its holder is known to have
ended (a process of this host that no longer runs) or the lock has not changed for a whole
lease (a holder killed on another host, or cut off from the store). The waiter then takes the
lock over by a write conditional on the version it saw, so that of several waiters only one
wins. Time is measured on the waiter's own monotonic clock and never compared with the
server's, so clock skew cannot make a live holder's lock look stale.

A holder whose heartbeat was refused had its lock taken over: it stalled for a whole lease.
Its turn ends with :class:`~virtualstac.errors.TurnLostError`, so that whoever drives the
writer does not record what it wrote as the target's version; the next writer finds the target
as it is.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, PreconditionError

from virtualstac.errors import TurnLostError
from virtualstac.writers.staging import owner_ended

if TYPE_CHECKING:
    from obstore import UpdateVersion

__all__ = ["LEASE_SECONDS", "lock_path", "taking_turns_in_store"]

#: How long a lock may go unchanged before a waiter takes it over.
LEASE_SECONDS = 60.0
_log = logging.getLogger(__name__)


def lock_path(path: str) -> str:
    """The lock object of the target at ``path`` (a path in its store): ``.NAME.lock`` beside it."""
    parent, _, name = path.rpartition("/")
    return f"{parent}/.{name}.lock" if parent else f".{name}.lock"


@contextmanager
def taking_turns_in_store(
    store: Any, path: str, *, lease: float = LEASE_SECONDS, poll: float = 0.5
) -> Iterator[None]:
    """Hold the turn of writing the target at ``path`` in ``store``; wait while another has it.

    A store that refuses the lock object (no conditional writes, or no permission to write
    there) gives no turn to take: the writer goes on and finds out what it may write.
    """
    lock = lock_path(path)
    holder = _Holder(store, lock, lease / 4)
    version = _take(store, lock, holder, lease, poll)
    if version is None:
        yield
        return
    holder.start(version)
    try:
        yield
    finally:
        lost = holder.stop()
        if not lost:
            with suppress(BaseError, OSError):
                obstore.delete(store, lock)
    if lost:
        raise TurnLostError(
            f"another writer took over the turn of writing {path!r}: this one had not been "
            f"heard of for {lease:g} s; what it wrote is not recorded"
        )


class _Holder:
    """The lock's content, and the thread that rewrites it while the turn lasts."""

    def __init__(self, store: Any, lock: str, interval: float) -> None:
        self.store = store
        self.lock = lock
        self.interval = interval
        self.identity = {"host": socket.gethostname(), "pid": os.getpid(), "turn": uuid.uuid4().hex}
        self.beats = 0
        self.lost = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._version: UpdateVersion = {}

    def content(self) -> bytes:
        # Every write differs (the beat count), so every write changes the lock's ETag.
        self.beats += 1
        return json.dumps({**self.identity, "beat": self.beats}).encode()

    def start(self, version: UpdateVersion) -> None:
        self._version = version
        self._thread = threading.Thread(target=self._beat, name="virtualstac-turn", daemon=True)
        self._thread.start()

    def stop(self) -> bool:
        """End the heartbeat; whether the turn was taken over meanwhile."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        return self.lost

    def _beat(self) -> None:
        while not self._stopped.wait(self.interval):
            try:
                self._version = _version(
                    obstore.put(self.store, self.lock, self.content(), mode=self._version)
                )
            except PreconditionError:
                self.lost = True
                _log.error("the turn of writing beside %s was taken over", self.lock)
                return
            except (BaseError, OSError) as err:  # a blip: the next beat tries again
                _log.warning("could not renew the turn at %s: %s", self.lock, err)


def _take(
    store: Any, lock: str, holder: _Holder, lease: float, poll: float
) -> UpdateVersion | None:
    """Create or take over the lock; its version, or None when the store gives no lock."""
    seen: tuple[Any, Any] | None = None
    seen_at = 0.0
    while True:
        try:
            return _version(obstore.put(store, lock, holder.content(), mode="create"))
        except AlreadyExistsError:
            pass
        except (BaseError, OSError, NotImplementedError) as err:
            _log.debug("no turn taken at %s (%s)", lock, err)
            return None
        try:
            found = obstore.get(store, lock)
            content = bytes(found.bytes())
        except FileNotFoundError:
            continue  # released meanwhile
        except (BaseError, OSError) as err:
            _log.debug("no turn taken at %s (%s)", lock, err)
            return None
        version = (found.meta.get("e_tag"), found.meta.get("version"))
        if version != seen:
            if seen is None:
                _log.info("waiting for another process writing beside %s to finish", lock)
            seen, seen_at = version, time.monotonic()
        if seen == (None, None):
            _log.debug("no turn taken at %s: the store gives its objects no version", lock)
            return None
        if _holder_ended(content) or time.monotonic() - seen_at >= lease:
            try:
                taken = obstore.put(store, lock, holder.content(), mode=_version(found.meta))
            except (PreconditionError, FileNotFoundError):
                continue  # its holder beat, it was released, or another waiter took it
            _log.warning("took over the turn at %s from a writer that stopped", lock)
            return _version(taken)
        time.sleep(poll)


def _holder_ended(content: bytes) -> bool:
    """Whether the lock's holder is a process of this host that no longer runs."""
    try:
        holder = json.loads(content)
        return owner_ended(str(holder["host"]), int(holder["pid"]))
    except (ValueError, TypeError, KeyError):
        return False  # not ours to judge: wait out the lease


def _version(result: Any) -> UpdateVersion:
    """The version of a written or read object, as a conditional write names it."""
    version: UpdateVersion = {}
    if result.get("e_tag") is not None:
        version["e_tag"] = result["e_tag"]
    if result.get("version") is not None:
        version["version"] = result["version"]
    return version
