"""The part of a published store that belongs to some of the Items it holds.

An Item opened from its Collection's store must give what parsing its own sources gives, so a
part is taken only where the store tells it exactly; otherwise None, and the Items' sources are
parsed. The store's ``virtual:items`` and its ``time`` steps tell:

- as many steps as items: each step is one item's (stacked at its datetime, or its
  ``start_datetime``), found at that moment; one Item's step drops ``time``, as parsing one
  Item's assets has none;
- more steps than items: the items carry their own time steps (a netCDF file per day), the
  steps in each Item's ``start_datetime``..``end_datetime``, half-open: a step at its
  ``end_datetime`` may as well be the next Item's first one, so it is told apart only when it
  is the store's last step and the Item its last item;
- fewer steps than items: items share steps (the tiles of one pass published with
  ``groupby="solar_day"``, joined side by side), and one Item's pixels cannot be told apart
  from the others'.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import numpy as np
import pystac
import xarray as xr

__all__ = ["item_part", "items_part"]


def item_part(dataset: xr.Dataset, item: pystac.Item, covered: Sequence[str]) -> xr.Dataset | None:
    """``item``'s part of a store holding the items ``covered``, or None if it cannot be told."""
    positions = _positions(dataset, item, covered)
    if positions is None:
        return None
    if _one_step_per_item(dataset, covered):
        return dataset.isel(time=positions[0])
    return dataset.isel(time=positions)


def items_part(
    dataset: xr.Dataset, items: Sequence[pystac.Item], covered: Sequence[str]
) -> xr.Dataset | None:
    """The ``items``' parts of a store holding ``covered``, in time order, or None."""
    positions: set[int] = set()
    for item in items:
        found = _positions(dataset, item, covered)
        if found is None:
            return None
        positions.update(found)
    return dataset.isel(time=sorted(positions))


def _one_step_per_item(dataset: xr.Dataset, covered: Sequence[str]) -> bool:
    return bool(dataset.sizes["time"] == len(covered))


def _positions(dataset: xr.Dataset, item: pystac.Item, covered: Sequence[str]) -> list[int] | None:
    """The positions along ``time`` of ``item``'s steps, or None when they cannot be told."""
    if "time" not in dataset.indexes or item.id not in covered:
        return None
    index = dataset.indexes["time"]
    if not index.is_monotonic_increasing:
        return None
    steps = len(index)
    if steps == len(covered):
        moment = item.datetime or item.common_metadata.start_datetime
        if moment is None or _naive(moment) not in index:
            return None
        return [int(index.get_loc(_naive(moment)))]
    start = item.common_metadata.start_datetime
    end = item.common_metadata.end_datetime
    if steps < len(covered) or start is None or end is None:
        return None
    first, stop = (int(index.searchsorted(_naive(t), side="left")) for t in (start, end))
    if stop < steps and index[stop] == _naive(end):
        if stop != steps - 1 or item.id != covered[-1]:
            return None  # the step at the item's end may be the next item's first
        stop = steps
    return list(range(first, stop)) or None


def _naive(moment: dt.datetime) -> np.datetime64:
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    return np.datetime64(moment, "ns")
