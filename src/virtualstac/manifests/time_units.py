"""What a variable's ``units`` and ``calendar`` make its numbers mean when decoded.

Joined arrays keep one ``units`` and one ``calendar``. Those of times (``days since
2000-01-01``) and durations (``hours``) change the decoded values, so arrays that differ in
them cannot be joined; but the same dates spelled otherwise (``days since 2000-01-01 00:00:00``,
the ``gregorian`` calendar for ``standard``) decode alike, and other units (``K``, ``kelvin``)
are a label xarray's combining merges as any attribute (``combine_attrs``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["calendar_meaning", "units_meaning"]

#: Units xarray decodes as durations (``decode_timedelta``).
_DURATIONS = frozenset(
    {"nanoseconds", "microseconds", "milliseconds", "seconds", "minutes", "hours", "days"}
)

#: CF's other names of a calendar.
_ALIASES = {"gregorian": "standard", "365_day": "noleap", "366_day": "all_leap"}


def units_meaning(units: Any) -> tuple[str, ...] | None:
    """What ``units`` make the numbers mean when decoded: a time's step and epoch, or a
    duration's step; None for units that decode nothing (a label)."""
    if not isinstance(units, str):
        return None
    step, since, epoch = units.strip().partition(" since ")
    step = step.strip().lower()
    if not since:
        return ("duration", step) if step in _DURATIONS else None
    try:
        stamp = pd.Timestamp(epoch.strip())
    except (ValueError, OverflowError):  # dates pandas cannot hold (year 0): as written
        return ("since", step, " ".join(epoch.split()))
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    return ("since", step, stamp.isoformat())


def calendar_meaning(calendar: Any) -> Any:
    """The calendar ``calendar`` names, by CF's standard name (none: ``standard``)."""
    if calendar is None:
        return "standard"
    if not isinstance(calendar, str):
        return calendar
    name = calendar.strip().lower()
    return _ALIASES.get(name, name)
