"""Joining many virtual datasets along time: the direct path gives what ``xr.concat`` gives."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pyproj
import pytest
import rasterio
import rasterio.transform
import xarray as xr

from virtualstac import ManifestArray, open_virtual_dataset, open_virtual_mfdataset
from virtualstac.demo import write_sample_archive
from virtualstac.errors import (
    IncompatibleArraysError,
    IncompatibleCalendarsError,
    IncompatibleCodecsError,
    UnsupportedIndexingError,
    UnsupportedOperationError,
)
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray.combine import EXACT_COMBINE, concat_along_existing, concat_virtual
from virtualstac.xarray.unpacking import open_zarr_values


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three daily netCDF4 files (zlib + shuffle, CF packing, time coordinates)."""
    return write_sample_archive(tmp_path_factory.mktemp("combine") / "archive", days=3)


@pytest.fixture
def days(archive: list[Path]) -> list[xr.Dataset]:
    """Nine daily virtual datasets: the three files, and copies of them renamed."""
    opened = [open_virtual_dataset(path) for path in archive]
    copies = [
        ds.virtual.rename_paths(lambda p, i=i: p.replace(".nc", f"_copy{i}.nc"))
        for i, ds in enumerate(opened * 2)
    ]
    return opened + copies


def assert_same_result(fast: xr.Dataset, slow: xr.Dataset) -> None:
    """Equal in values, order, attributes, encodings, indexes, and references.

    xarray cannot compare references (it would compute them), so virtual variables are compared
    by their metadata and manifests and the rest by ``assert_identical``.
    """
    virtual = [n for n, v in fast.variables.items() if isinstance(v.data, ManifestArray)]
    assert virtual == [n for n, v in slow.variables.items() if isinstance(v.data, ManifestArray)]
    xr.testing.assert_identical(fast.drop_vars(virtual), slow.drop_vars(virtual))
    assert list(fast.variables) == list(slow.variables)
    assert list(fast.coords) == list(slow.coords)
    assert fast.attrs == slow.attrs
    assert fast.encoding == slow.encoding
    assert {k: type(i) for k, i in fast.xindexes.items()} == {
        k: type(i) for k, i in slow.xindexes.items()
    }
    for name, variable in fast.variables.items():
        other = slow.variables[name]
        assert variable.encoding == other.encoding, name
        assert variable.attrs == other.attrs, name
        assert variable.dims == other.dims, name
        if name in virtual:
            assert variable.data.metadata == other.data.metadata
            assert variable.data.manifest == other.data.manifest


def test_direct_concat_equals_xarray_concat(days: list[xr.Dataset]) -> None:
    fast = concat_along_existing(days, "time", EXACT_COMBINE)
    assert fast is not None
    assert fast.sizes["time"] == 9 * 24
    assert len(fast["t2m"].data.manifest.path_table) == 9
    assert_same_result(fast, xr.concat(days, dim="time", **EXACT_COMBINE))


def test_conflicting_attributes_are_dropped_as_xarray_drops_them(days: list[xr.Dataset]) -> None:
    days[4] = days[4].assign_attrs(title="another title", source="model B")
    days[5]["t2m"].attrs["comment"] = "only here"
    days[6]["time"].attrs["note"] = "a note"
    fast = concat_along_existing(days, "time", EXACT_COMBINE)
    assert fast is not None
    assert "title" not in fast.attrs and fast.attrs["source"] == "model B"
    assert fast["t2m"].attrs["comment"] == "only here"
    assert_same_result(fast, xr.concat(days, dim="time", **EXACT_COMBINE))


def test_open_virtual_mfdataset_nested_equals_xarray_combine(archive: list[Path]) -> None:
    combined = open_virtual_mfdataset(archive, combine="nested", concat_dim="time")
    options = {"coords": "minimal", "compat": "override", "combine_attrs": "drop_conflicts"}
    expected = xr.combine_nested(
        [open_virtual_dataset(path) for path in archive], concat_dim="time", **options
    )
    assert_same_result(combined, expected)


def test_datasets_of_other_shapes_are_left_to_xarray(days: list[xr.Dataset]) -> None:
    without_dim = [ds.assign(mean=xr.Variable((), np.float32(1.5))) for ds in days]
    missing = [days[0].drop_vars("t2m"), *days[1:]]
    assert concat_along_existing(without_dim, "time", EXACT_COMBINE) is None
    assert concat_along_existing(missing, "time", EXACT_COMBINE) is None
    assert concat_along_existing(days, "lat", EXACT_COMBINE) is None
    assert concat_along_existing(days, "time", {**EXACT_COMBINE, "coords": "different"}) is None
    assert concat_along_existing(days, "time", {"join": "exact"}) is None


def test_unequal_grids_still_fail_as_xarray_fails(days: list[xr.Dataset]) -> None:
    shifted = days[1].assign_coords(lat=days[1]["lat"].values + np.float32(0.5))
    datasets = [days[0], shifted, days[2]]
    assert concat_along_existing(datasets, "time", EXACT_COMBINE) is None
    with pytest.raises(ValueError, match="exact"):
        concat_virtual(datasets, "time")


def write_month(
    path: Path, start: int, lat: np.ndarray | None = None, *, zlib: bool = True, extra: bool = False
) -> str:
    """A netCDF4 file of eight days of packed temperature on a 40 x 64 grid."""
    lat = np.linspace(-80, 80, 40) if lat is None else lat
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", lat.size)
        nc.createDimension("lon", 64)
        time = nc.createVariable("time", "f8", ("time",))
        time.units, time.calendar = "days since 2000-01-01", "noleap"
        time[:] = np.arange(start, start + 8)
        nc.createVariable("lat", "f4", ("lat",))[:] = lat
        nc.createVariable("lon", "f4", ("lon",))[:] = np.arange(64)
        tas = nc.createVariable(
            "tas", "i2", ("time", "lat", "lon"), zlib=zlib, chunksizes=(2, 20, 32), fill_value=-1
        )
        tas.scale_factor, tas.add_offset = np.float32(0.01), np.float32(273.15)
        tas[:] = np.full((8, lat.size, 64), 280.0)
        if extra:
            nc.createVariable("station_count", "i4", ("time",))[:] = np.arange(8)
    return str(path)


def test_files_compressed_differently_are_refused_naming_the_variable_and_files(
    tmp_path: Path,
) -> None:
    first = write_month(tmp_path / "a.nc", 0)
    plain = write_month(tmp_path / "b.nc", 8, zlib=False)
    for options in ({"combine": "by_coords"}, {"combine": "nested", "concat_dim": "time"}):
        with pytest.raises(IncompatibleCodecsError, match=r"'tas' of file://.*b\.nc .*a\.nc"):
            open_virtual_mfdataset([first, plain], **options)


def test_a_variable_some_files_lack_is_refused_naming_it(tmp_path: Path) -> None:
    """xr.open_mfdataset fills it with NaN in the others; references cannot."""
    files = [write_month(tmp_path / "a.nc", 0), write_month(tmp_path / "b.nc", 8, extra=True)]
    with pytest.raises(UnsupportedIndexingError, match=r"'station_count' is in file://.*b\.nc"):
        open_virtual_mfdataset(files)
    kept = open_virtual_mfdataset(files, drop_variables=["station_count"])
    assert kept.sizes["time"] == 16


def test_unequal_grids_joined_outer_are_refused_naming_the_coordinate(tmp_path: Path) -> None:
    files = [
        write_month(tmp_path / "a.nc", 0),
        write_month(tmp_path / "b.nc", 0, lat=np.linspace(-80, 80, 40) + 100),
    ]
    with pytest.raises(UnsupportedIndexingError, match=r"coordinates lat differ .*join='exact'"):
        open_virtual_mfdataset(files, combine="nested", concat_dim="member", join="outer")


@pytest.mark.parametrize("given", ["north first", "south first"])
def test_a_partial_chunk_before_another_file_is_named_in_descending_order(
    tmp_path: Path, given: str
) -> None:
    """Latitudes from north to south are joined in that order, as xarray orders them: the
    northern file's partial last chunk comes before the southern file, whose may not."""
    north = write_month(tmp_path / "north.nc", 0, lat=np.arange(80.0, 50.0, -1.0))
    south = write_month(tmp_path / "south.nc", 0, lat=np.arange(50.0, 20.0, -1.0))
    files = [north, south] if given == "north first" else [south, north]
    with pytest.raises(IncompatibleArraysError, match=r"'tas' of file://.*north\.nc is 30 long"):
        open_virtual_mfdataset(files)


def write_tile(path: Path, x0: float, crs: str) -> str:
    """A 64 x 64 GeoTIFF tile of 10 m pixels whose left edge is at ``x0``."""
    profile = {"driver": "GTiff", "width": 64, "height": 64, "count": 1, "dtype": "uint16"}
    transform = rasterio.transform.from_origin(x0, 640.0, 10.0, 10.0)
    with rasterio.open(
        path, "w", **profile, crs=crs, transform=transform, tiled=True, blockxsize=32, blockysize=32
    ) as tile:
        tile.write(np.ones((1, 64, 64), dtype="uint16"))
    return str(path)


@pytest.mark.parametrize(
    "options", [{}, {"combine": "nested", "concat_dim": "x"}], ids=["by_coords", "nested"]
)
def test_tiles_in_other_crs_are_refused_naming_both(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    """Kept once, the first tile's spatial_ref would place the second in the wrong zone."""
    west = write_tile(tmp_path / "west.tif", 0.0, "EPSG:32633")
    east = write_tile(tmp_path / "east.tif", 640.0, "EPSG:32634")
    with pytest.raises(
        IncompatibleArraysError,
        match=r"'spatial_ref' gives the CRS EPSG:32634 in .*east\.tif but EPSG:32633 in .*west",
    ):
        open_virtual_mfdataset([west, east], **options)
    joined = open_virtual_mfdataset([west, write_tile(tmp_path / "next.tif", 640.0, "EPSG:32633")])
    assert joined.sizes["x"] == 128


def test_one_crs_written_otherwise_joins(tmp_path: Path) -> None:
    """WKT 2 and GDAL's WKT 1 of one CRS are one CRS."""
    files = [write_month(tmp_path / "a.nc", 0), write_month(tmp_path / "b.nc", 8)]
    for path, version in zip(files, ("WKT2_2019", "WKT1_GDAL"), strict=True):
        with netCDF4.Dataset(path, "a") as nc:
            nc.createVariable("crs", "i4").crs_wkt = pyproj.CRS("EPSG:4326").to_wkt(version)
            nc["tas"].grid_mapping = "crs"
    assert open_virtual_mfdataset(files).sizes["time"] == 16
    with netCDF4.Dataset(files[1], "a") as nc:
        nc["crs"].crs_wkt = pyproj.CRS("EPSG:4269").to_wkt()
    with pytest.raises(IncompatibleArraysError, match=r"EPSG:4269 in .*b\.nc but EPSG:4326"):
        open_virtual_mfdataset(files)


def test_cf_grid_mappings_are_compared_by_their_parameters(tmp_path: Path) -> None:
    """Two UTM zones in CF parameters differ; one zone given as parameters in one file and
    as a WKT too in the other joins (the parameters alone are not compared with a WKT)."""
    files = [write_month(tmp_path / "a.nc", 0), write_month(tmp_path / "b.nc", 8)]
    for path, zone in zip(files, (33, 34), strict=True):
        with netCDF4.Dataset(path, "a") as nc:
            crs = nc.createVariable("crs", "i4")
            crs.setncatts(pyproj.CRS(f"EPSG:326{zone}").to_cf())
            del crs.crs_wkt
            nc["tas"].grid_mapping = "crs"
    with pytest.raises(IncompatibleArraysError, match=r"'crs' gives the CRS .*b\.nc but .*a\.nc"):
        open_virtual_mfdataset(files)
    with netCDF4.Dataset(files[1], "a") as nc:
        nc["crs"].setncatts(pyproj.CRS("EPSG:32633").to_cf())
    assert open_virtual_mfdataset(files).sizes["time"] == 16


def test_times_in_other_calendars_are_refused_decoded_or_not(tmp_path: Path) -> None:
    """Joined as numbers, the 360-day file's days would read as noleap dates; decoded, a
    360-day date is no noleap date."""
    files = [write_month(tmp_path / "a.nc", 0), write_month(tmp_path / "b.nc", 8)]
    with netCDF4.Dataset(files[1], "a") as nc:
        nc["time"].calendar = "360_day"
    for options in ({"combine": "by_coords"}, {"combine": "nested", "concat_dim": "time"}):
        with pytest.raises(IncompatibleArraysError, match=r"'time' .*360_day.*b\.nc.*noleap"):
            open_virtual_mfdataset(files, decode_times=False, **options)
    for options in ({"combine": "by_coords"}, {"combine": "nested", "concat_dim": "time"}):
        # decoded: a TypeError, as xr.open_mfdataset raises, naming files and calendars
        with pytest.raises(IncompatibleCalendarsError, match="mixed types") as caught:
            open_virtual_mfdataset(files, **options)
        assert isinstance(caught.value, TypeError)
        assert re.search(r"360_day calendar in file://.*b\.nc .*noleap .*a\.nc", str(caught.value))


def test_undecoded_times_spelled_otherwise_are_joined_as_xarray_joins_them(
    tmp_path: Path,
) -> None:
    """``365_day`` is ``noleap``, and midnight is midnight: the numbers count the same days."""
    files = [write_month(tmp_path / "a.nc", 0), write_month(tmp_path / "b.nc", 8)]
    with netCDF4.Dataset(files[1], "a") as nc:
        nc["time"].calendar = "365_day"
        nc["time"].units = nc["time"].units + " 00:00:00"
    for options in ({"combine": "by_coords"}, {"combine": "nested", "concat_dim": "time"}):
        virtual = open_virtual_mfdataset(files, decode_times=False, **options)
        with xr.open_mfdataset(files, engine="netcdf4", decode_times=False, **options) as direct:
            np.testing.assert_array_equal(virtual["time"].values, direct["time"].values)


def test_disjoint_grids_joined_inner_read_back_empty_as_xarray_gives_them(tmp_path: Path) -> None:
    files = [
        write_month(tmp_path / "a.nc", 0),
        write_month(tmp_path / "b.nc", 8, lat=np.linspace(-80, 80, 40) + 0.5),
    ]
    options = {"combine": "nested", "concat_dim": "time", "join": "inner"}
    virtual = open_virtual_mfdataset(files, combine_attrs="override", **options)
    values = open_zarr_values(virtual.virtual.to_store(ObjectStoreRegistry.for_url(files[0])))
    with xr.open_mfdataset(files, engine="netcdf4", **options) as direct:
        assert values.sizes == {"time": 16, "lat": 0, "lon": 64}
        xr.testing.assert_identical(values.load(), direct.load())


def test_comparing_virtual_values_is_refused_naming_the_variables_and_options(
    tmp_path: Path,
) -> None:
    files = [write_month(tmp_path / "a.nc", 0), write_month(tmp_path / "b.nc", 8)]
    for path in files:
        with netCDF4.Dataset(path, "a") as nc:
            nc.createVariable("crs", "i4").grid_mapping_name = "latitude_longitude"
    with pytest.raises(UnsupportedOperationError, match=r"compares the values of 'crs'.*override"):
        open_virtual_mfdataset(
            files, combine="nested", concat_dim="time", compat="equals", data_vars="different"
        )
