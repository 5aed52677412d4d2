"""Relative paths and ``pathlib.Path`` open as in every xarray engine: against the working
directory; the references still store absolute ``file://`` URLs."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import open_virtual_dataset, open_virtual_datatree, open_virtual_mfdataset


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``data/day_0.nc`` .. ``data/day_2.nc`` (netCDF4 library) below the working directory."""
    directory = tmp_path / "data"
    directory.mkdir()
    for day in range(3):
        with netCDF4.Dataset(directory / f"day_{day}.nc", "w") as nc:
            nc.createDimension("time", None)
            nc.createDimension("x", 1000)
            time = nc.createVariable("time", "i4", ("time",))
            time.units = "days since 2024-01-01"
            time[:] = [day]
            nc.createVariable("x", "f4", ("x",))[:] = np.arange(1000)
            nc.createVariable("t", "f4", ("time", "x"), chunksizes=(1, 500))[0, :] = (
                np.arange(1000) + 10 * day
            )
    monkeypatch.chdir(tmp_path)
    return directory


def referenced_files(dataset: xr.Dataset) -> set[str]:
    return set(dataset["t"].data.manifest.path_table)


@pytest.mark.parametrize(
    "path", ["data/day_1.nc", Path("data/day_1.nc"), "./data/../data/day_1.nc"]
)
def test_a_relative_path_opens_against_the_working_directory(
    data_dir: Path, path: str | Path
) -> None:
    virtual = open_virtual_dataset(path)

    assert referenced_files(virtual) == {(data_dir / "day_1.nc").as_uri()}


@pytest.mark.parametrize("path", ["data/day_1.nc", Path("data/day_1.nc")])
def test_a_datatree_opens_relative_and_pathlib_paths(data_dir: Path, path: str | Path) -> None:
    tree = open_virtual_datatree(path)

    assert referenced_files(tree.to_dataset()) == {(data_dir / "day_1.nc").as_uri()}


def test_an_absolute_pathlib_path_opens(data_dir: Path) -> None:
    assert referenced_files(open_virtual_dataset(data_dir / "day_0.nc")) == {
        (data_dir / "day_0.nc").as_uri()
    }


@pytest.mark.parametrize(
    "paths", ["data/day_*.nc", Path("data") / "day_*.nc", [Path("data/day_0.nc"), "data/day_1.nc"]]
)
def test_relative_globs_and_lists_of_paths_open_many_files(
    data_dir: Path, paths: str | Path | list[str | Path]
) -> None:
    combined = open_virtual_mfdataset(paths, combine="nested", concat_dim="time")

    expected = sorted(data_dir.glob("day_*.nc"))[: combined.sizes["time"]]
    assert referenced_files(combined) == {path.as_uri() for path in expected}


def test_nested_lists_of_relative_paths_open(data_dir: Path) -> None:
    combined = open_virtual_mfdataset(
        [[Path("data/day_0.nc")], ["data/day_1.nc"]], combine="nested", concat_dim=["time", "y"]
    )
    assert referenced_files(combined) == {
        (data_dir / name).as_uri() for name in ("day_0.nc", "day_1.nc")
    }


@pytest.mark.parametrize("path", ["data/day_2.nc", Path("data/day_2.nc")])
def test_the_engine_opens_relative_paths(data_dir: Path, path: str | Path) -> None:
    with xr.open_dataset(path, engine="virtualstac") as opened:
        with netCDF4.Dataset(data_dir / "day_2.nc") as nc:
            np.testing.assert_array_equal(opened["t"].values, nc["t"][:])


def test_a_file_named_with_glob_characters_opens_as_that_file(data_dir: Path) -> None:
    named = data_dir / "day[1].nc"
    named.write_bytes((data_dir / "day_1.nc").read_bytes())
    for given in ("data/day[1].nc", named, named.as_uri().replace("%5B", "[").replace("%5D", "]")):
        combined = open_virtual_mfdataset(given)
        assert referenced_files(combined) == {named.as_uri()}


def test_each_file_records_its_source_as_xarray_engines_do(data_dir: Path) -> None:
    # preprocess functions read dates or members from ds.encoding["source"].
    expected = xr.open_dataset("data/day_1.nc").encoding["source"]
    assert open_virtual_dataset("data/day_1.nc").encoding["source"] == expected

    seen: list[str] = []

    def preprocess(dataset: xr.Dataset) -> xr.Dataset:
        seen.append(dataset.encoding["source"])
        return dataset

    combined = open_virtual_mfdataset("data/day_*.nc", preprocess=preprocess)
    assert seen == [str(data_dir / f"day_{day}.nc") for day in range(3)]
    # A combination has no one source, as in xr.open_mfdataset.
    assert "source" not in combined.encoding
