"""An archive of daily netCDF4 files combined by ``open_virtual_mfdataset`` reads back as
``xr.open_mfdataset`` reads the same files with the same options, or is refused with a typed
error naming the variable, the files and the reason where references cannot give that result.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import ObjectStoreRegistry, open_virtual_mfdataset
from virtualstac.errors import IncompatibleArraysError, UnsupportedIndexingError
from virtualstac.xarray.unpacking import open_zarr_values

NESTED: dict[str, Any] = {"combine": "nested", "concat_dim": "time"}
LAT = np.linspace(-60.0, 60.0, 300)


def write_days(
    path: Path,
    days: Sequence[float],
    *,
    units: str = "days since 2000-01-01",
    calendar: str = "standard",
    tas_units: str = "K",
    chunk: int | None = None,
    lat: np.ndarray = LAT,
    bounds: bool = False,
    fill: int | None = None,
    scale: float | None = None,
    attrs: dict[str, str] | None = None,
) -> str:
    """Daily steps of a ``tas(time, lat)`` field, deflated, as the netCDF4 library writes them:
    packed as int16 when ``scale`` is given, with CF ``time_bnds`` and a ``crs`` grid mapping
    when ``bounds``."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.setncatts(attrs or {"title": "daily tas"})
        nc.createDimension("time", None)
        nc.createDimension("lat", lat.size)
        time = nc.createVariable("time", "f8", ("time",))
        time.units, time.calendar = units, calendar
        time[:] = days
        nc.createVariable("lat", "f8", ("lat",))[:] = lat
        packed = scale is not None
        tas = nc.createVariable(
            "tas",
            "i2" if packed else "f4",
            ("time", "lat"),
            zlib=True,
            chunksizes=(chunk or len(days), lat.size),
            fill_value=fill,
        )
        if packed:
            tas.scale_factor = scale
        tas.units = tas_units
        tas[:] = 270.0 + np.add.outer(np.asarray(days), np.arange(lat.size) % 9)
        if bounds:
            time.bounds = "time_bnds"
            nc.createDimension("nv", 2)
            edges = np.stack([np.asarray(days), np.asarray(days) + 1.0], axis=1)
            nc.createVariable("time_bnds", "f8", ("time", "nv"))[:] = edges
            nc.createVariable("crs", "i4").grid_mapping_name = "latitude_longitude"
            tas.grid_mapping = "crs"
    return str(path)


def read_virtual(paths: Sequence[str], **options: Any) -> xr.Dataset:
    """The files combined as references, then read through them."""
    combined = open_virtual_mfdataset(paths, **options)
    registry = ObjectStoreRegistry.for_url(paths[0])
    return open_zarr_values(combined.virtual.to_store(registry)).load()


def assert_reads_as_open_mfdataset(
    paths: Sequence[str], loadable_variables: list[str] | None = None, **options: Any
) -> xr.Dataset:
    """Dimensions, coordinates, values, attributes and time encodings as xarray's."""
    virtual = read_virtual(paths, loadable_variables=loadable_variables, **options)
    with xr.open_mfdataset(paths, engine="netcdf4", **options) as direct:
        direct.load()
        xr.testing.assert_identical(virtual, direct)
        for name in ("time", "time_bnds"):
            if name in direct.variables:
                for key in ("units", "calendar"):
                    assert virtual[name].encoding.get(key) == direct[name].encoding.get(key)
    return virtual


@pytest.mark.parametrize("options", [{}, NESTED], ids=["by_coords", "nested"])
def test_daily_files_given_out_of_order(tmp_path: Path, options: dict[str, Any]) -> None:
    """by_coords puts them in time order; nested keeps the order given, as xarray does."""
    paths = [write_days(tmp_path / f"day{day}.nc", [day]) for day in range(6)]
    shuffled = [paths[i] for i in (4, 1, 5, 0, 3, 2)]
    virtual = assert_reads_as_open_mfdataset(shuffled, **options)
    ordered = options == {}
    assert virtual.indexes["time"].is_monotonic_increasing == ordered


@pytest.mark.parametrize("options", [{}, NESTED], ids=["by_coords", "nested"])
def test_time_units_that_differ_per_file_decode_each_files_dates(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    """The loaded times decode with each file's units; nothing is joined as numbers."""
    paths = [
        write_days(tmp_path / "jan.nc", [0, 1], units="days since 2000-01-01"),
        write_days(tmp_path / "feb.nc", [0, 1], units="days since 2000-02-01"),
    ]
    virtual = assert_reads_as_open_mfdataset(paths, **options)
    assert str(virtual["time"].values[2])[:10] == "2000-02-01"


def test_virtual_times_in_other_units_are_refused_naming_both_files(tmp_path: Path) -> None:
    paths = [
        write_days(tmp_path / "jan.nc", [0, 1], units="days since 2000-01-01"),
        write_days(tmp_path / "feb.nc", [0, 1], units="days since 2000-02-01"),
    ]
    with pytest.raises(IncompatibleArraysError, match=r"'time' of .*feb\.nc.*jan\.nc.*'units'"):
        open_virtual_mfdataset(paths, loadable_variables=[], **NESTED)


@pytest.mark.parametrize("options", [{}, NESTED], ids=["by_coords", "nested"])
def test_time_bounds_in_other_units_are_refused_naming_the_files_and_the_way_out(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    """Virtual bounds keep one file's units; loading them decodes each file's with its own."""
    paths = [
        write_days(tmp_path / "jan.nc", [0, 1], units="days since 2000-01-01", bounds=True),
        write_days(tmp_path / "feb.nc", [0, 1], units="days since 2000-02-01", bounds=True),
    ]
    with pytest.raises(
        IncompatibleArraysError,
        match=r"'time_bnds' of file://.*feb\.nc .*file://.*jan\.nc.*'units'.*"
        r"loadable_variables=\['time', 'lat', 'time_bnds'\]",
    ):
        open_virtual_mfdataset(paths, **options)
    loaded = ["time", "lat", "time_bnds"]
    virtual = assert_reads_as_open_mfdataset(paths, loadable_variables=loaded, **options)
    assert str(virtual["time_bnds"].values[2, 1])[:10] == "2000-02-02"


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"data_vars": "minimal", "coords": "minimal", "compat": "override"},
        {**NESTED, "data_vars": "minimal", "coords": "minimal", "compat": "override"},
        {"data_vars": "all", "coords": "minimal", "compat": "override"},
    ],
    ids=["default", "minimal", "nested-minimal", "all"],
)
def test_time_bounds_and_a_grid_mapping(tmp_path: Path, options: dict[str, Any]) -> None:
    paths = [
        write_days(tmp_path / f"m{i}.nc", [3 * i, 3 * i + 1, 3 * i + 2], bounds=True)
        for i in range(3)
    ]
    virtual = assert_reads_as_open_mfdataset(paths, **options)
    assert virtual["tas"].attrs["grid_mapping"] == "crs"
    assert virtual["time_bnds"].dims == ("time", "nv")


@pytest.mark.parametrize("options", [{}, NESTED], ids=["by_coords", "nested"])
def test_time_bounds_whose_units_and_calendar_are_spelled_otherwise(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    """``gregorian`` is ``standard``, and midnight is midnight: the virtual bounds decode as
    each file's do."""
    paths = [
        write_days(tmp_path / "a.nc", [0, 1], bounds=True),
        write_days(
            tmp_path / "b.nc",
            [2, 3],
            units="days since 2000-01-01 00:00:00",
            calendar="gregorian",
            bounds=True,
        ),
    ]
    virtual = assert_reads_as_open_mfdataset(paths, **options)
    assert str(virtual["time_bnds"].values[3, 1])[:10] == "2000-01-05"


@pytest.mark.parametrize("how", ["override", "drop_conflicts"])
def test_units_that_are_a_label_merge_as_attributes(tmp_path: Path, how: str) -> None:
    """``K`` and ``kelvin`` decode nothing: xarray keeps the first file's, or drops both."""
    paths = [
        write_days(tmp_path / "a.nc", [0, 1]),
        write_days(tmp_path / "b.nc", [2, 3], tas_units="kelvin"),
    ]
    virtual = assert_reads_as_open_mfdataset(paths, combine_attrs=how)
    assert virtual["tas"].attrs.get("units") == ("K" if how == "override" else None)


def test_global_attributes_that_differ(tmp_path: Path) -> None:
    """``combine_attrs="override"`` (xarray's default) keeps the first file's; the default
    here, ``"drop_conflicts"``, drops ``history``, on which the files disagree."""
    paths = [
        write_days(tmp_path / "a.nc", [0, 1], attrs={"title": "tas", "history": "made"}),
        write_days(tmp_path / "b.nc", [2, 3], attrs={"title": "tas", "history": "remade"}),
    ]
    for how in ("override", "drop_conflicts"):
        assert_reads_as_open_mfdataset(paths, combine_attrs=how)
    assert read_virtual(paths).attrs == {"title": "tas"}


@pytest.mark.parametrize("options", [{}, NESTED], ids=["by_coords", "nested"])
def test_files_ending_on_a_partial_chunk_are_refused_naming_the_variable_and_file(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    """Ten steps in chunks of four: after the first file's short last chunk, the next file's
    chunks would read at the wrong steps of one regular chunk grid."""
    paths = [
        write_days(tmp_path / f"dekad{i}.nc", list(range(10 * i, 10 * i + 10)), chunk=4)
        for i in range(3)
    ]
    with pytest.raises(
        IncompatibleArraysError,
        match=r"'tas' of file://.*dekad0\.nc is 10 long along time in chunks of 4",
    ):
        open_virtual_mfdataset(paths[::-1] if not options else paths, **options)
    # What the message advises: the values read, not referenced.
    assert_reads_as_open_mfdataset(paths, loadable_variables=["time", "lat", "tas"], **options)
    # The last file alone may end on a partial chunk.
    whole = [
        write_days(tmp_path / f"octet{i}.nc", list(range(8 * i, 8 * i + 8)), chunk=4)
        for i in range(2)
    ]
    assert_reads_as_open_mfdataset(
        [*whole, write_days(tmp_path / "tail.nc", [16, 17], chunk=4)], **options
    )


@pytest.mark.parametrize("what", ["fill", "scale"])
@pytest.mark.parametrize("lat", [LAT, LAT[:3]], ids=["referenced", "inlined"])
def test_files_packed_differently_are_refused_naming_both(
    tmp_path: Path, what: str, lat: np.ndarray
) -> None:
    """Decoding every file with the first file's ``_FillValue`` or ``scale_factor`` would give
    wrong values; small variables inlined in the references are named by their files too."""
    first = write_days(tmp_path / "a.nc", [0, 1], lat=lat, fill=-1, scale=0.1)
    second = write_days(
        tmp_path / "b.nc",
        [2, 3],
        lat=lat,
        fill=-2 if what == "fill" else -1,
        scale=0.2 if what == "scale" else 0.1,
    )
    for options in ({}, NESTED):
        with pytest.raises(
            IncompatibleArraysError, match=r"'tas' of file://.*b\.nc.*file://.*a\.nc"
        ):
            open_virtual_mfdataset([first, second], **options)


def test_coordinates_that_differ_by_rounding(tmp_path: Path) -> None:
    """``join="override"`` takes the first file's latitudes, as xarray does; ``"exact"`` and
    the default (``"outer"``, which would reindex the references) are refused."""
    paths = [
        write_days(tmp_path / "a.nc", [0, 1]),
        write_days(tmp_path / "b.nc", [2, 3], lat=LAT + 1e-12),
    ]
    assert_reads_as_open_mfdataset(paths, join="override", **NESTED)
    with pytest.raises(IncompatibleArraysError, match=r"a\.nc, .*b\.nc\): cannot align .*'lat'"):
        open_virtual_mfdataset(paths, join="exact", **NESTED)
    with pytest.raises(UnsupportedIndexingError, match=r"coordinates lat differ .*join='exact'"):
        open_virtual_mfdataset(paths, **NESTED)


@pytest.mark.parametrize("options", [{}, NESTED], ids=["by_coords", "nested"])
def test_unlimited_dims_are_kept_as_open_mfdataset_keeps_them(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    """nested keeps the first file's encoding, by_coords none, as xarray's combining does."""
    paths = [write_days(tmp_path / f"day{day}.nc", [day]) for day in range(3)]
    combined = open_virtual_mfdataset(paths, **options)
    with xr.open_mfdataset(paths, engine="netcdf4", **options) as direct:
        expected = direct.encoding.get("unlimited_dims")
    assert combined.encoding.get("unlimited_dims") == expected
    assert expected == ({"time"} if options else None)
    store = combined.virtual.to_store(ObjectStoreRegistry.for_url(paths[0]))
    assert open_zarr_values(store).encoding.get("unlimited_dims") == expected


@pytest.mark.parametrize("empty", [0, 1], ids=["first", "middle"])
def test_a_file_without_time_steps_adds_none(tmp_path: Path, empty: int) -> None:
    """A file of no steps yet holds no chunk: its variables, stored otherwise (inlined, in
    other chunks), join whatever the other files' are, as xarray joins them."""
    steps = [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    steps[empty] = []
    paths = [
        write_days(tmp_path / f"part{i}.nc", days, chunk=1 if not days else 2)
        for i, days in enumerate(steps)
    ]
    virtual = assert_reads_as_open_mfdataset(paths, **NESTED)
    assert virtual.sizes["time"] == 4


def write_step(path: Path, day: float) -> str:
    """One step of ``tas(lat)`` whose time is a scalar coordinate, as forecast files hold it."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("lat", LAT.size)
        nc.createVariable("lat", "f8", ("lat",))[:] = LAT
        time = nc.createVariable("time", "f8", ())
        time.units, time.calendar = "days since 2000-01-01", "standard"
        time[...] = day
        tas = nc.createVariable("tas", "f4", ("lat",), zlib=True)
        tas.coordinates = "time"
        tas[:] = 270.0 + day + np.arange(LAT.size) % 9
    return str(path)


def test_scalar_times_become_the_index_of_the_new_dimension(tmp_path: Path) -> None:
    """``concat_dim="time"`` stacks each file's scalar ``time`` into the new dimension's
    index, which needs its values: by default they are loaded, as dimension coordinates are."""
    paths = [write_step(tmp_path / f"step{day}.nc", day) for day in (0.0, 0.25, 0.5)]
    virtual = assert_reads_as_open_mfdataset(paths, **NESTED)
    assert str(virtual["time"].values[1])[:16] == "2000-01-01T06:00"
    assert virtual["tas"].dims == ("time", "lat")
