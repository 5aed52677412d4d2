"""The options ``xr.open_mfdataset`` and VirtualiZarr take, given to the opening functions:
each gives ``xr.open_mfdataset``'s result on the same files, or is refused with a typed error
saying what to use instead, never silently ignored."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from virtualstac import (
    ObjectStoreRegistry,
    open_virtual_dataset,
    open_virtual_datatree,
    open_virtual_mfdataset,
)
from virtualstac.errors import SourceNotFoundError, UnsupportedOptionError
from virtualstac.xarray.unpacking import open_zarr_values


def write_member(path: Path, member: int, days: tuple[float, ...] = (0.0, 1.0)) -> str:
    """An ensemble member's ``tas(time, x)``, with a title of its own."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.title, nc.institution = f"member {member}", "same everywhere"
        nc.createDimension("time", len(days))
        nc.createDimension("x", 4)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = days
        tas = nc.createVariable("tas", "f4", ("time", "x"), chunksizes=(1, 4))
        tas[:] = np.arange(len(days) * 4.0).reshape(len(days), 4) + 10 * member
    return str(path)


@pytest.fixture
def members(tmp_path: Path) -> list[str]:
    return [write_member(tmp_path / f"member{i}.nc", i) for i in range(3)]


@pytest.fixture
def days(tmp_path: Path) -> list[str]:
    """Three files of consecutive days, each with its own title."""
    return [write_member(tmp_path / f"day{i}.nc", i, (2.0 * i, 2.0 * i + 1)) for i in range(3)]


def assert_reads_as_open_mfdataset(
    paths: list[str], options: dict[str, Any], xarray_options: dict[str, Any] | None = None
) -> None:
    """The files combined as references read back as ``xr.open_mfdataset`` reads them."""
    combined = open_virtual_mfdataset(paths, **options)
    values = open_zarr_values(combined.virtual.to_store(ObjectStoreRegistry.for_url(paths[0])))
    given = {"combine_attrs": "drop_conflicts", **(xarray_options or options)}
    with xr.open_mfdataset(paths, engine="netcdf4", **given) as direct:
        xr.testing.assert_identical(values.load(), direct.load())


@pytest.mark.parametrize(
    "concat_dim",
    [
        "member",
        xr.DataArray([10, 20, 30], dims="member", name="member"),
        pd.Index([10, 20, 30], name="member"),
    ],
    ids=["name", "DataArray", "Index"],
)
def test_a_new_dimension_stacks_the_files_as_open_mfdataset_does(
    members: list[str], concat_dim: Any
) -> None:
    options = {"combine": "nested", "concat_dim": concat_dim}
    # xarray reads a bare Index as a sequence of dimensions: it takes one in a list.
    assert_reads_as_open_mfdataset(members, options, {**options, "concat_dim": [concat_dim]})


def test_nested_without_concat_dim_merges_the_files(members: list[str], tmp_path: Path) -> None:
    other = tmp_path / "pr.nc"
    with netCDF4.Dataset(other, "w") as nc:
        nc.createDimension("time", 2)
        nc.createDimension("x", 4)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = [0.0, 1.0]
        nc.createVariable("pr", "f4", ("time", "x"))[:] = np.ones((2, 4))
    paths = [members[0], str(other)]
    assert_reads_as_open_mfdataset(paths, {"combine": "nested", "concat_dim": None})


@pytest.mark.parametrize(
    ("files", "options"),
    [
        ("days", {}),  # joined a batch at a time
        ("members", {"combine": "nested", "concat_dim": "member"}),  # combined by xarray
    ],
)
def test_attrs_file_gives_that_files_attributes(
    files: str, options: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    paths: list[str] = request.getfixturevalue(files)
    options = {**options, "attrs_file": paths[1]}
    assert_reads_as_open_mfdataset(paths, options)
    assert open_virtual_mfdataset(paths, **options).attrs["title"] == "member 1"


def test_an_attrs_file_not_among_the_files_is_refused(days: list[str]) -> None:
    with pytest.raises(ValueError, match=r"attrs_file .*elsewhere\.nc is not one of the files"):
        open_virtual_mfdataset(days[:2], attrs_file=str(Path(days[0]).parent / "elsewhere.nc"))


@pytest.mark.parametrize(
    ("options", "nested"),
    [
        ({}, False),
        ({"combine": "nested", "concat_dim": "time"}, False),
        ({"combine": "nested", "concat_dim": [None, "time"]}, True),
    ],
    ids=["by_coords", "nested", "nested-lists"],
)
def test_files_that_cannot_be_opened_are_left_out_with_errors_warn_or_ignore(
    days: list[str], options: dict[str, Any], nested: bool
) -> None:
    """As ``xr.open_mfdataset`` leaves them out: a warning each with ``"warn"``, none with
    ``"ignore"``; ``"raise"`` (the default) raises the file's error."""
    Path(days[1]).write_bytes(b"not a netCDF file at all")
    paths: Any = [days] if nested else days
    with pytest.warns(UserWarning, match=r"Could not open .*day1\.nc due to .*Ignoring"):
        warned = open_virtual_mfdataset(paths, errors="warn", **options)
    assert warned.sizes["time"] == 4
    if not nested:
        with pytest.warns(UserWarning, match="day1"):
            assert_reads_as_open_mfdataset(paths, {**options, "errors": "warn"})
    ignored = open_virtual_mfdataset(paths, errors="ignore", attrs_file=days[2], **options)
    assert ignored.sizes["time"] == 4 and ignored.attrs["title"] == "member 2"
    with pytest.raises(Exception, match="day1"):
        open_virtual_mfdataset(paths, **options)


def test_errors_forgive_opening_not_preprocess_nor_every_file_failing(days: list[str]) -> None:
    def failing(dataset: xr.Dataset) -> xr.Dataset:
        raise RuntimeError("preprocess failed")

    with pytest.raises(RuntimeError, match="preprocess failed"):
        open_virtual_mfdataset(days, errors="ignore", preprocess=failing)
    for path in days:
        Path(path).write_bytes(b"nothing")
    with pytest.raises(SourceNotFoundError, match=r"none of the 3 files could be opened: .*day0"):
        open_virtual_mfdataset(days, errors="ignore")
    with pytest.raises(ValueError, match="errors must be one of 'raise', 'warn', 'ignore'"):
        open_virtual_mfdataset(days, errors="skip")  # type: ignore[arg-type]


def test_concat_dim_by_coordinates_is_refused_as_xarray_refuses_it(days: list[str]) -> None:
    with pytest.raises(ValueError, match="concat_dim has no effect: give combine='nested'"):
        open_virtual_mfdataset(days, concat_dim="time")
    with pytest.raises(ValueError, match="has no effect"):
        xr.open_mfdataset(days, concat_dim="time")


@pytest.mark.parametrize(
    ("option", "instead"),
    [
        ({"chunks": {}}, r"chunks=.*engine='virtualstac', chunks="),
        ({"engine": "h5netcdf"}, "format is detected .* parser=.*HDFParser"),
        ({"decode_cf": False}, "values are decoded when read"),
        ({"mask_and_scale": False}, "values are decoded when read"),
        ({"lock": False}, "no open file"),
        ({"reader_options": {}}, r"parser=HDFParser\(...\)"),
        ({"virtual_backend_kwargs": {}}, "storage options to the registry"),
        ({"indexes": {}}, "loadable_variables=\\[\\] keeps every variable virtual"),
        ({"skip_variables": ["x"]}, r"drop_variables=\[...\]"),
        ({"frobnicate": True}, "not one of its parameters"),
    ],
)
def test_options_references_do_not_take_are_refused_saying_what_to_use(
    days: list[str], option: dict[str, Any], instead: str
) -> None:
    (name,) = option
    for open_files in (open_virtual_dataset, open_virtual_datatree):
        with pytest.raises(UnsupportedOptionError, match=f"does not take {name}=: .*{instead}"):
            open_files(days[0], **option)
    with pytest.raises(UnsupportedOptionError, match=f"does not take {name}=: .*{instead}"):
        open_virtual_mfdataset(days, **option)


def test_xarrays_combine_options_are_passed_on(days: list[str]) -> None:
    kept = open_virtual_mfdataset(days, combine_attrs="override", join="exact", fill_value=0)
    assert kept.attrs["title"] == "member 0"


def test_a_virtualizarr_parser_is_refused_naming_ours(days: list[str]) -> None:
    parsers = pytest.importorskip("virtualizarr.parsers")
    match = r"parser=HDFParser\(\) is VirtualiZarr's.*pass virtualstac.parsers.HDFParser\(\)"
    with pytest.raises(UnsupportedOptionError, match=match):
        open_virtual_dataset(days[0], parser=parsers.HDFParser())
    with pytest.raises(UnsupportedOptionError, match=match):
        open_virtual_mfdataset(days, parser=parsers.HDFParser())


@pytest.mark.parametrize(
    ("option", "instead"),
    [
        ({"lock": False}, "no open file"),
        ({"format": "NETCDF4"}, "not one of its parameters"),
        ({"references": True, "decode_times": False}, r"open_virtual_dataset\(path, loadable_"),
    ],
)
def test_the_engine_refuses_other_engines_options_saying_what_to_use(
    days: list[str], option: dict[str, Any], instead: str
) -> None:
    with pytest.raises(UnsupportedOptionError, match=instead):
        xr.open_dataset(days[0], engine="virtualstac", **option)


@pytest.mark.parametrize(
    "options",
    [
        {"data_vars": "different"},
        {"coords": "different"},
        {"data_vars": "different", "combine": "nested", "concat_dim": "time"},
    ],
)
def test_comparing_variables_uses_xarrays_compat_by_default(
    days: list[str], options: dict[str, Any]
) -> None:
    # compat="override", the default otherwise, forbids comparing them.
    assert_reads_as_open_mfdataset(days, options)


def test_one_variable_name_is_a_name_not_its_letters(days: list[str]) -> None:
    # xr.open_dataset(path, drop_variables="tas") drops tas.
    assert "tas" not in open_virtual_dataset(days[0], drop_variables="tas")
    assert "tas" not in open_virtual_datatree(days[0], drop_variables="tas")["/"]
    assert "tas" not in open_virtual_mfdataset(days, drop_variables="tas")
    loaded = open_virtual_dataset(days[0], loadable_variables="tas")
    assert isinstance(loaded["tas"].data, np.ndarray)
    nested = {"combine": "nested", "concat_dim": "time"}
    combined = open_virtual_mfdataset(days, loadable_variables="tas", **nested)
    assert isinstance(combined["tas"].data, np.ndarray)


def test_an_executor_class_is_refused_asking_for_an_instance(days: list[str]) -> None:
    with pytest.raises(TypeError, match=r"not its class: pass ThreadPoolExecutor\(...\)"):
        open_virtual_mfdataset(days, parallel=ThreadPoolExecutor)


@pytest.mark.parametrize(
    ("option", "value"),
    [("compat", "minimal"), ("join", "exactly"), ("data_vars", "some"), ("combine_attrs", "x")],
)
def test_a_combine_option_xarray_does_not_know_is_refused_as_such(
    days: list[str], option: str, value: str
) -> None:
    with pytest.raises(ValueError, match=f"{option}='{value}' is not one of") as refused:
        open_virtual_mfdataset(days, **{option: value})
    assert "cannot be combined" not in str(refused.value)
