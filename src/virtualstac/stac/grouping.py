"""Which Items form one time step: ``groupby="time"``, ``"solar_day"``, ``"id"``, a property.

Items of one group become one step of the ``time`` axis; the tiles among them are joined side
by side (:mod:`virtualstac.stac.mosaic`). The keys follow odc-stac's ``groupby``:

``"time"`` (the default)
    Items with exactly the same datetime.
``"solar_day"``
    Items of the same local solar date: each datetime (UTC) shifted by the longitude of the
    centre of all the Items' bounding boxes together, in whole hours towards zero
    (``int(longitude / 15)`` hours, as odc-stac shifts by the centre of the area it loads).
    One longitude for every Item, so adjacent tiles of one pass never fall on two dates.
``"id"``
    Every Item on its own.
any other string
    The Item property of that name (``"s2:datatake_id"``, ``"platform"``...).
a callable
    ``item -> hashable key``.

A group's time coordinate is its earliest datetime (odc-stac's choice: the first Item of the
group sorted by datetime, then id). Two groups with the same time coordinate would make a
non-unique index, so they raise :class:`DuplicateTimeError` naming the Items.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pystac

from virtualstac.errors import IncompatibleArraysError
from virtualstac.stac.invalid import reading_stac

__all__ = [
    "AssignedGroups",
    "DuplicateTimeError",
    "GroupBy",
    "GroupingError",
    "OverlappingItemsError",
    "TimeGroup",
    "assign_groups",
    "group_items",
    "item_time",
    "time_order",
]

#: What ``groupby=`` accepts: ``"time"``, ``"solar_day"``, ``"id"``, a property name, or a
#: function of an Item returning a hashable key.
type GroupBy = str | Callable[[pystac.Item], Hashable]


class GroupingError(IncompatibleArraysError):
    """Items cannot be put into time steps as ``groupby`` asks."""


class DuplicateTimeError(GroupingError):
    """Items of different time steps share one datetime: the ``time`` index would repeat."""


class OverlappingItemsError(GroupingError):
    """Items of one time step cover the same pixels (e.g. a reprocessed copy of a tile)."""


@dataclass(frozen=True)
class TimeGroup:
    """One time step: its coordinate and its Items (sorted by datetime, then id)."""

    time: np.datetime64
    items: tuple[pystac.Item, ...]


#: Whole days within what a nanosecond datetime64 holds (1677-09-21 to 2262-04-11).
_NANOSECONDS_FROM = dt.datetime(1677, 9, 22)
_NANOSECONDS_UNTIL = dt.datetime(2262, 4, 11)


def item_time(item: pystac.Item) -> np.datetime64:
    """An Item's ``datetime`` (or ``start_datetime``) as naive UTC nanoseconds."""
    moment = item.datetime
    if moment is None:
        # pystac reads start_datetime only now, long after the catalog was walked.
        with reading_stac(item.get_self_href() or f"item {item.id!r}", "STAC Item"):
            moment = item.common_metadata.start_datetime
    if moment is None:
        raise GroupingError(f"item {item.id!r} has neither datetime nor start_datetime")
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    if not _NANOSECONDS_FROM <= moment <= _NANOSECONDS_UNTIL:
        # numpy would wrap the nanoseconds around silently (2300 becomes 1715); pystac's
        # microseconds hold any year, as xarray keeps times beyond 1678-2262.
        return np.datetime64(moment, "us")
    return np.datetime64(moment, "ns")


def time_order(time: np.datetime64) -> np.datetime64:
    """``time`` in microseconds, to compare times of either unit of :func:`item_time`: numpy
    compares them in nanoseconds, which overflows beyond 2262."""
    return np.datetime64(time, "us")


def group_items(items: Sequence[pystac.Item], groupby: GroupBy = "time") -> list[TimeGroup]:
    """Group ``items`` into time steps, in time order (see the module docstring)."""
    key = _key_function(items, groupby)
    members: dict[Hashable, list[pystac.Item]] = {}
    for item in items:
        members.setdefault(key(item), []).append(item)
    groups = []
    for group in members.values():
        ordered = tuple(sorted(group, key=lambda item: (time_order(item_time(item)), item.id)))
        groups.append(TimeGroup(item_time(ordered[0]), ordered))
    groups.sort(key=lambda group: time_order(group.time))
    for before, after in itertools.pairwise(groups):
        if time_order(before.time) == time_order(after.time):
            raise DuplicateTimeError(_duplicate_message(before, after, groupby))
    return groups


@dataclass(frozen=True)
class AssignedGroups:
    """A grouping decided once, applied to Items by id: a publishing client groups all the
    items it publishes (the solar day's longitude is taken over all of them) and its workers,
    each opening a share, group theirs the same way. Picklable, unlike most callables."""

    steps: Mapping[str, int]

    def __call__(self, item: pystac.Item) -> Hashable:
        """The time step ``item`` belongs to."""
        return self.steps[item.id]


def assign_groups(items: Sequence[pystac.Item], groupby: GroupBy) -> AssignedGroups:
    """Group ``items`` now (see :func:`group_items`) and keep each one's step by its id."""
    groups = group_items(items, groupby)
    return AssignedGroups({item.id: n for n, group in enumerate(groups) for item in group.items})


def _duplicate_message(before: TimeGroup, after: TimeGroup, groupby: GroupBy) -> str:
    first = ", ".join(repr(item.id) for item in before.items)
    second = ", ".join(repr(item.id) for item in after.items)
    shown = groupby if isinstance(groupby, str) else getattr(groupby, "__name__", "a function")
    advice = (
        "they are one time step if they are tiles of one pass: pass groupby='solar_day' (or a "
        "property such as groupby='s2:datatake_id'); if one is a reprocessed copy, keep one of "
        "them (filter the items, e.g. on their processing baseline)"
    )
    return (
        f"items {first} and {second} would be two time steps at the same time "
        f"{np.datetime_as_string(before.time, unit='s')} with groupby={shown!r}, and the time "
        f"index would repeat; {advice}"
    )


def _key_function(
    items: Sequence[pystac.Item], groupby: GroupBy
) -> Callable[[pystac.Item], Hashable]:
    if callable(groupby):
        return _checked(groupby)
    if not isinstance(groupby, str):
        raise TypeError(f"groupby must be a string or a callable, got {type(groupby).__name__}")
    if groupby == "time":
        return item_time
    if groupby == "id":
        return lambda item: item.id
    if groupby == "solar_day":
        hours = _solar_offset_hours(items)
        return lambda item: (item_time(item) + np.timedelta64(hours, "h")).astype("datetime64[D]")
    return _property(groupby)


def _checked(function: Callable[[pystac.Item], Hashable]) -> Callable[[pystac.Item], Hashable]:
    def key(item: pystac.Item) -> Hashable:
        value = function(item)
        try:
            hash(value)
        except TypeError as err:
            raise GroupingError(
                f"groupby returned {value!r} for item {item.id!r}, which is not hashable"
            ) from err
        return value

    return key


def _property(name: str) -> Callable[[pystac.Item], Hashable]:
    def key(item: pystac.Item) -> Hashable:
        if name not in item.properties:
            raise GroupingError(
                f"item {item.id!r} has no property {name!r} to group by; groupby takes "
                "'time', 'solar_day', 'id', an Item property or a function"
            )
        value: Hashable = item.properties[name]
        try:
            hash(value)
        except TypeError:
            return repr(value)
        return value

    return key


def _solar_offset_hours(items: Sequence[pystac.Item]) -> int:
    """Whole hours from UTC to local solar time at the centre of the Items' bounding boxes."""
    wests, easts = [], []
    for item in items:
        west, east = _west_east(item)
        wests.append(west)
        # Across the antimeridian the box continues east past 180.
        easts.append(east + 360.0 if east < west else east)
    centre = (min(wests) + max(easts)) / 2
    longitude = (centre + 180.0) % 360.0 - 180.0
    return int(longitude / 15)


def _west_east(item: pystac.Item) -> tuple[float, float]:
    """An Item's western and eastern longitude: from its bbox, else its geometry."""
    if item.bbox:
        return float(item.bbox[0]), float(item.bbox[len(item.bbox) // 2])
    longitudes: list[float] = []

    def walk(value: object) -> None:
        if isinstance(value, list | tuple):
            if value and all(isinstance(v, int | float) for v in value):
                longitudes.append(float(value[0]))
            else:
                for member in value:
                    walk(member)

    walk((item.geometry or {}).get("coordinates"))
    if not longitudes:
        raise GroupingError(
            f"item {item.id!r} has neither bbox nor geometry coordinates, so "
            "groupby='solar_day' has no longitude; group by 'time' or a property instead"
        )
    return min(longitudes), max(longitudes)
