"""Pausing Python's cyclic garbage collector, counted across threads.

Two reasons to pause it. Building millions of small acyclic objects (a large manifest's
entries, a batch of files' virtual datasets) otherwise triggers collections that rescan every
object made so far, roughly doubling the time. And h5py holds its global lock while it calls
back into Python (a file object's ``read``); if that read waits for another thread (parallel
ranged GETs), a collection on that thread which frees a leftover h5py object waits for the same
lock, and both wait forever.

:func:`gc_paused` nests and overlaps across threads: the collector is re-enabled (if it was
enabled) only when the last pause ends, so one thread's pause never ends another's.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Generator
from contextlib import contextmanager

__all__ = ["gc_paused"]

_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Generator[None]:
    """Pause the cyclic garbage collector for the block; usable as a decorator."""
    global _pauses, _was_enabled
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
