"""gc_paused: the collector stays off until the last of overlapping pauses ends."""

from __future__ import annotations

import gc
import io
import threading
from collections.abc import Generator
from pathlib import Path

import h5py
import numpy as np
import pytest

from virtualstac.gc_pause import gc_paused
from virtualstac.parsers.hdf import HDFParser


@pytest.fixture(autouse=True)
def collector_on() -> Generator[None]:
    gc.enable()
    yield
    gc.enable()


def test_pause_ends_with_the_last_of_overlapping_pauses_on_other_threads() -> None:
    first_entered, first_may_leave, first_left = (threading.Event() for _ in range(3))

    def first() -> None:
        with gc_paused():
            first_entered.set()
            first_may_leave.wait(10)
        first_left.set()

    thread = threading.Thread(target=first)
    thread.start()
    first_entered.wait(10)
    with gc_paused():
        first_may_leave.set()
        first_left.wait(10)
        assert not gc.isenabled()  # the first pause ended; this one has not
    thread.join()
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    with gc_paused(), gc_paused():
        pass
    assert not gc.isenabled()


class _WatchedFile(io.BytesIO):
    """A file object that notes whether the collector ran while h5py read through it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.collector_states: set[bool] = set()

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        self.collector_states.add(gc.isenabled())
        return super().readinto(buffer)


def test_hdf5_files_parse_with_the_collector_paused_while_h5py_holds_its_lock(
    tmp_path: Path,
) -> None:
    # h5py calls the reader holding its global lock; a collection on a thread the reader waits
    # for (parallel ranged GETs) that frees an h5py object would wait for that lock forever.
    path = tmp_path / "chunked.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("values", data=np.arange(600.0).reshape(20, 30), chunks=(5, 10))
    file = _WatchedFile(path.read_bytes())
    group = HDFParser().parse_file(path.as_uri(), file)
    assert "values" in group.arrays
    assert file.collector_states == {False}
    assert gc.isenabled()
