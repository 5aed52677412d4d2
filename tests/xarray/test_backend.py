"""``xr.open_dataset(..., engine="virtualstac")`` reads every format like its reference reader."""

import sys
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import rasterio
import scipy.io
import xarray as xr

from text_fill_files import write_character_fills, write_string_fills
from virtualstac import open_virtual_dataset
from virtualstac.demo import write_sample_archive

sys.path.insert(0, str(Path(__file__).parents[1] / "parsers"))
from tiff_files import write_gdal


def test_netcdf4_matches_the_netcdf4_engine(tmp_path: Path) -> None:
    (path,) = write_sample_archive(tmp_path, days=1)
    opened = xr.open_dataset(path, engine="virtualstac")
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(opened.load(), direct.load())


@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")
@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_character_fill_values_are_masked_as_with_the_netcdf4_engine(
    tmp_path: Path, fmt: str
) -> None:
    path = write_character_fills(tmp_path / "chars.nc", fmt)
    opened = xr.open_dataset(path, engine="virtualstac")
    with xr.open_dataset(path, engine="netcdf4") as direct:
        assert direct["names"].values[1] is np.nan
        xr.testing.assert_identical(opened.load(), direct.load())


def test_string_fill_values_are_masked_as_with_the_netcdf4_engine(tmp_path: Path) -> None:
    path = write_string_fills(tmp_path / "strings.nc")
    opened = xr.open_dataset(path, engine="virtualstac")
    with xr.open_dataset(path, engine="netcdf4") as direct:
        assert direct["names"].values[1] is np.nan
        xr.testing.assert_identical(opened.load(), direct.load())
        assert opened["names"].encoding["_FillValue"] == direct["names"].encoding["_FillValue"]


@pytest.mark.parametrize("chunks", [None, {}])
def test_strings_are_python_objects_as_with_the_netcdf4_engine(
    tmp_path: Path, chunks: dict[str, int] | None
) -> None:
    # Zarr reads them as numpy's StringDType, which xarray cannot mask: ds.where() failed.
    path = write_string_fills(tmp_path / "strings.nc")
    opened = xr.open_dataset(path, engine="virtualstac", chunks=chunks)
    assert opened["labels"].dtype == object
    with xr.open_dataset(path, engine="netcdf4") as direct:
        masked = opened.where(opened["labels"] == "a")
        xr.testing.assert_identical(masked.load(), direct.where(direct["labels"] == "a"))
        assert masked["labels"].values.tolist()[0] == "a"
        shifted = opened.shift(station=1)
        xr.testing.assert_identical(shifted.load(), direct.shift(station=1))


def test_chunks_follow_the_file(tmp_path: Path) -> None:
    (path,) = write_sample_archive(tmp_path, days=1)
    opened = xr.open_dataset(path, engine="virtualstac", chunks={})
    assert opened["t2m"].chunks == ((6, 6, 6, 6), (45, 45), (90, 90))


def test_netcdf3_and_undecoded_values(tmp_path: Path) -> None:
    path = tmp_path / "classic.nc"
    with scipy.io.netcdf_file(path, "w") as f:
        f.createDimension("x", 4)
        var = f.createVariable("v", "i2", ("x",))
        var[:] = [1, 2, 3, -99]
        var.scale_factor = 0.5
        var._FillValue = np.int16(-99)
    raw = xr.open_dataset(path, engine="virtualstac", mask_and_scale=False)
    np.testing.assert_array_equal(raw["v"].values, [1, 2, 3, -99])
    decoded = xr.open_dataset(path, engine="virtualstac")
    np.testing.assert_array_equal(decoded["v"].values, [0.5, 1.0, 1.5, np.nan])


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
def test_cog_matches_rasterio(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "a.tif", driver="COG", compress="DEFLATE", count=2)
    opened = xr.open_dataset(path, engine="virtualstac")
    with rasterio.open(path) as src:
        np.testing.assert_array_equal(opened["band_data"].values, src.read())


def test_the_engine_is_never_guessed(tmp_path: Path) -> None:
    from virtualstac.xarray.backend import VirtualstacBackendEntrypoint

    (path,) = write_sample_archive(tmp_path, days=1)
    assert not VirtualstacBackendEntrypoint().guess_can_open(path)


@pytest.mark.parametrize("undecoded", [{"decode_times": False}, {"decode_cf": False}])
def test_undecoded_time_bounds_have_no_units_as_with_the_netcdf4_engine(
    tmp_path: Path, undecoded: dict[str, bool]
) -> None:
    path = tmp_path / "bounds.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("time", 2)
        nc.createDimension("nv", 2)
        time = nc.createVariable("time", "f8", ("time",))
        time.setncatts({"units": "days since 2000-01-01", "bounds": "time_bnds"})
        time[:] = [0.5, 1.5]
        nc.createVariable("time_bnds", "f8", ("time", "nv"))[:] = [[0, 1], [1, 2]]
    opened = xr.open_dataset(path, engine="virtualstac", **undecoded)
    with xr.open_dataset(path, engine="netcdf4", **undecoded) as direct:
        assert "units" not in direct["time_bnds"].attrs
        xr.testing.assert_identical(opened.load(), direct.load())
    # Decoded, the bounds are times too.
    decoded = xr.open_dataset(path, engine="virtualstac")
    with xr.open_dataset(path, engine="netcdf4") as direct:
        assert direct["time_bnds"].dtype.kind == "M"
        xr.testing.assert_identical(decoded.load(), direct.load())


@pytest.mark.parametrize("fmt", ["NETCDF3_64BIT_DATA", "NETCDF4"])
def test_unsigned_bytes_read_as_signed_mask_their_fill_as_with_the_netcdf4_engine(
    tmp_path: Path, fmt: str
) -> None:
    """``_Unsigned = "false"`` on a ``ubyte`` variable reads it as signed, its ``_FillValue`` of
    200 becoming -56; a fill out of the signed range once failed to decode (OverflowError)."""
    path = tmp_path / "ubyte.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as nc:
        nc.createDimension("x", 4)
        flags = nc.createVariable("flags", "u1", ("x",), fill_value=np.uint8(200))
        flags._Unsigned = "false"
        flags[:] = np.array([0, 200, 255, 5], dtype="u1")
    with xr.open_dataset(path, engine="netcdf4") as direct:
        np.testing.assert_array_equal(direct["flags"].values, [0, np.nan, -1, 5])
        expected = direct.load()
    xr.testing.assert_identical(xr.open_dataset(path, engine="virtualstac").load(), expected)
    loaded = open_virtual_dataset(path, loadable_variables=["flags"])
    xr.testing.assert_identical(loaded, expected)


@pytest.mark.parametrize("undecoded", [{}, {"decode_coords": False}, {"decode_cf": False}])
def test_coordinates_attributes_are_the_files_as_with_the_netcdf4_engine(
    tmp_path: Path, undecoded: dict[str, bool]
) -> None:
    """Undecoded, each variable's CF ``coordinates`` attribute (and the file's) is what the
    file holds; they were once rewritten as xarray writes them, naming ``lat lon height`` on
    every variable along ``(y, x)`` and leaving the file without its own."""
    path = tmp_path / "coordinates.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("y", 2)
        nc.createDimension("x", 3)
        nc.coordinates = "height"  # as xarray writes a coordinate no variable names
        nc.createVariable("height", "f4", ())[...] = 2.0
        for name in ("lat", "lon", "tas", "tas_error"):
            nc.createVariable(name, "f4", ("y", "x"))[:] = np.arange(6.0).reshape(2, 3)
        nc["tas"].coordinates = "lat lon"
    opened = xr.open_dataset(path, engine="virtualstac", **undecoded)
    with xr.open_dataset(path, engine="netcdf4", **undecoded) as direct:
        xr.testing.assert_identical(opened.load(), direct.load())


def _unlimited(path: Path) -> set[str]:
    """The dimensions the netCDF library reports unlimited (``isunlimited()``)."""
    with netCDF4.Dataset(path) as nc:
        return {name for name, dim in nc.dimensions.items() if dim.isunlimited()}


@pytest.mark.parametrize("records", [2, 0])
def test_unlimited_dims_are_encoded_and_written_back_like_the_netcdf4_engine(
    tmp_path: Path, records: int
) -> None:
    source = tmp_path / "records.nc"
    with scipy.io.netcdf_file(source, "w") as f:
        f.createDimension("time", None)
        f.createDimension("x", 3)
        f.createVariable("x", "i4", ("x",))[:] = [1, 2, 3]
        values = f.createVariable("v", "f8", ("time", "x"))
        if records:
            values[:] = np.ones((records, 3))
    opened = xr.open_dataset(source, engine="virtualstac")
    with xr.open_dataset(source, engine="netcdf4") as direct:
        assert opened.encoding["unlimited_dims"] == direct.encoding["unlimited_dims"] == {"time"}
    assert "unlimited_dims" not in opened.attrs
    opened.to_netcdf(tmp_path / "written.nc")
    assert _unlimited(tmp_path / "written.nc") == _unlimited(source) == {"time"}


def test_each_group_opens_with_its_own_unlimited_dims(tmp_path: Path) -> None:
    source = tmp_path / "groups.nc"
    with netCDF4.Dataset(source, "w") as nc:
        nc.createDimension("time", None)
        nc.createVariable("time", "f8", ("time",))[:] = [0, 1]
        member = nc.createGroup("ensemble")
        member.createDimension("member", None)
        member.createDimension("x", 2)
        member.createVariable("spread", "f4", ("member", "x"))[:] = np.ones((3, 2))
    for group in (None, "ensemble"):
        opened = xr.open_dataset(source, engine="virtualstac", group=group)
        references = xr.open_dataset(source, engine="virtualstac", group=group, references=True)
        with xr.open_dataset(source, engine="netcdf4", group=group) as direct:
            expected = direct.encoding["unlimited_dims"]
        assert opened.encoding["unlimited_dims"] == expected, group
        assert references.encoding["unlimited_dims"] == expected, group
    tree = xr.open_datatree(source, engine="virtualstac")
    assert tree["ensemble"].to_dataset().encoding["unlimited_dims"] == {"member"}
    ensemble = xr.open_dataset(source, engine="virtualstac", group="ensemble")
    ensemble.to_netcdf(tmp_path / "ensemble.nc")
    assert _unlimited(tmp_path / "ensemble.nc") == {"member"}


def test_formats_without_unlimited_dimensions_encode_none(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "plain.tif", width=4, height=4)
    assert "unlimited_dims" not in xr.open_dataset(path, engine="virtualstac").encoding
