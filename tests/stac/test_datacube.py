"""The datacube fields of a published store: time in a CF calendar other than the standard one.

xarray decodes times of a ``noleap`` or ``360_day`` calendar as ``cftime`` dates, not
``datetime64``; they are still the store's temporal dimension, written as their calendar names
them, whatever their number.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pystac
import pytest

from virtualstac.stac import publish

NETCDF = "application/x-netcdf"


def monthly_item(
    directory: Path, year: int, calendar: str, make_item: Callable[..., pystac.Item]
) -> pystac.Item:
    """An Item over one netCDF4 file of 120 monthly steps, 30 days apart, from ``year``."""
    path = directory / f"tas_{year}.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 2)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time.calendar = calendar
        time[:] = (year - 2000) * 360 + np.arange(120) * 30.0
        nc.createVariable("tas", "f4", ("time", "x"))[:] = np.ones((120, 2), "f4")
    item = make_item(
        f"tas_{year}", dt.datetime(year, 1, 1, tzinfo=dt.UTC), {"data": (str(path), NETCDF)}
    )
    item.set_self_href(str(directory / f"tas_{year}.json"))
    item.save_object(include_self_link=True)
    return item


def test_a_360_day_time_axis_is_temporal_in_its_calendars_dates(
    tmp_path: Path, make_item: Callable[..., pystac.Item], validator: Any
) -> None:
    items = [monthly_item(tmp_path, 2000, "360_day", make_item)]
    collection = publish(items, tmp_path / "tas.icechunk")
    time = collection.assets["icechunk"].extra_fields["cube:dimensions"]["time"]
    assert time == {
        "type": "temporal",
        "extent": ["2000-01-01T00:00:00Z", "2009-12-01T00:00:00Z"],
        "step": "P30D",
        "description": "dates in the 360_day calendar",
    }
    collection.validate(validator=validator)


@pytest.mark.parametrize("calendar", ["noleap", "standard"])
def test_a_noleap_time_axis_is_temporal_and_a_standard_one_as_before(
    tmp_path: Path, make_item: Callable[..., pystac.Item], calendar: str
) -> None:
    items = [monthly_item(tmp_path, 2000, calendar, make_item)]
    collection = publish(items, tmp_path / "tas.json", format="kerchunk")
    time = collection.assets["kerchunk"].extra_fields["cube:dimensions"]["time"]
    assert time["type"] == "temporal"
    assert time["extent"][0] == "2000-01-01T00:00:00Z"
    assert time["step"] == "P30D"
    assert ("description" in time) == (calendar == "noleap")
