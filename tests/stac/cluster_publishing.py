"""What the tests of publishing on a dask.distributed cluster share besides their fixtures
(``client`` and ``archive`` in conftest.py): the expected values of the daily archive, and a
worker plugin that kills its worker mid-write."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pystac
from distributed import WorkerPlugin

DAYS = 6


def collection_of(items: list[pystac.Item], path: Path) -> pystac.Collection:
    """A Collection of ``items`` saved nowhere yet, its self href ``path``."""
    collection = pystac.Collection("era", "hourly temperature", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    collection.set_self_href(str(path))
    return collection


def expected_t2m(items: list[pystac.Item]) -> np.ndarray:
    """``t2m`` of the items' files as netCDF4 reads them, masked values as NaN."""
    parts = []
    for item in items:
        with netCDF4.Dataset(item.assets["data"].get_absolute_href() or "") as nc:
            parts.append(np.ma.filled(nc["t2m"][:].astype("f8"), np.nan))
    return np.concatenate(parts)


def expected_times(items: list[pystac.Item]) -> np.ndarray:
    """The archive's hourly time steps from its first day."""
    return np.datetime64("2024-01-01") + np.arange(24 * len(items)).astype("timedelta64[h]")


def killing_write(batch: int) -> WorkerPlugin:
    """A plugin that ends its worker's process when the write task of ``batch`` starts.

    The class is defined in the function, so that cloudpickle ships it (not a reference to
    this module, which workers cannot import) to the worker processes.
    """

    class DieWhileWriting(WorkerPlugin):
        name = "die-while-writing"

        def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
            if finish == "executing" and str(key).startswith(f"virtualstac-write-{batch}-"):
                os._exit(1)

    return DieWhileWriting()
