"""Files shaped like netCDF-C's own tests (nc_test4's tst_filter, tst_quantize,
tst_endian_fill, tst_rename; nc_test's record layouts), written by netCDF4-python and the
netCDF-C it bundles, read through ``engine="virtualstac"`` as the netcdf4 engine reads them."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")

TYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]


def assert_reads_like_netcdf4(path: Path, **options: bool) -> None:
    with xr.open_dataset(path, engine="netcdf4", **options) as direct:
        ours = xr.open_dataset(path, engine="virtualstac", **options).load()
        xr.testing.assert_identical(ours, direct.load())
        for name, variable in direct.variables.items():
            assert ours[name].dtype == variable.dtype, name


def test_netcdf_c_filters_of_every_type_read_as_netcdf4_reads_them(tmp_path: Path) -> None:
    # netCDF-C's own zstd, bzip2, szip and blosc filters (not hdf5plugin's), with their
    # options, on little- and big-endian chunks, some of them never written.
    path = tmp_path / "tst_filter.nc"
    filters = {
        "zlib": dict(shuffle=True, fletcher32=True),
        "zstd": dict(complevel=-3),
        "bzip2": dict(complevel=9, shuffle=True),
        "szip": dict(szip_coding="ec", szip_pixels_per_block=32),
        "blosc_lz4": dict(blosc_shuffle=0),
        "blosc_zstd": dict(blosc_shuffle=1),
        "blosc_lz": dict(blosc_shuffle=2),
    }
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("t", None)
        nc.createDimension("x", 257)
        for dtype in TYPES:
            values = (np.arange(257) // 16).astype(dtype)
            for compression, options in filters.items():
                if (compression == "szip" and dtype[1] == "8") or (
                    # netCDF-C's blosc filter fails on chunks of bytes it cannot compress.
                    compression.startswith("blosc") and dtype[1] == "1"
                ):
                    continue
                name = f"{compression}_{dtype}"
                little = nc.createVariable(
                    name, dtype, ("t", "x"), compression=compression, chunksizes=(2, 100), **options
                )
                little[:3] = np.stack([values] * 3)
                big = nc.createVariable(
                    f"{name}_big",
                    f">{dtype}",
                    ("x",),
                    compression=compression,
                    chunksizes=(64,),
                    endian="big",
                    fill_value=np.array(7, dtype),
                    **options,
                )
                big[:128] = values[:128]
    assert_reads_like_netcdf4(path)
    assert_reads_like_netcdf4(path, mask_and_scale=False)


def test_quantized_values_read_as_netcdf4_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "tst_quantize.nc"
    values = np.sin(np.arange(1000) / 10.0)
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 1000)
        for mode, digits in [("BitGroom", 3), ("GranularBitRound", 4), ("BitRound", 9)]:
            for dtype in ("f4", "f8"):
                variable = nc.createVariable(
                    f"{mode}_{dtype}",
                    dtype,
                    ("x",),
                    compression="zlib",
                    significant_digits=digits,
                    quantize_mode=mode,
                )
                variable[:] = values.astype(dtype)
    assert_reads_like_netcdf4(path)


def test_big_endian_chunks_never_written_read_as_their_fill_value(tmp_path: Path) -> None:
    # HDF5 keeps a big-endian variable's fill value in big-endian bytes.
    path = tmp_path / "tst_endian_fill.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("t", None)
        nc.createDimension("x", 12)
        for dtype in TYPES[2:]:
            default = nc.createVariable(
                f"default_{dtype}", f">{dtype}", ("x",), endian="big", chunksizes=(4,)
            )
            default[:4] = np.arange(4).astype(dtype)
            given = nc.createVariable(
                f"given_{dtype}",
                f">{dtype}",
                ("t", "x"),
                endian="big",
                chunksizes=(1, 12),
                fill_value=np.array(3, dtype),
            )
            given[2] = np.arange(12).astype(dtype)
    assert_reads_like_netcdf4(path)
    assert_reads_like_netcdf4(path, mask_and_scale=False)


def test_renamed_dimensions_and_variables_read_as_netcdf4_reads_them(tmp_path: Path) -> None:
    # Renaming turns "w" into the coordinate of "y" and "x" into "lon" in the file.
    path = tmp_path / "tst_rename.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 3)
        nc.createDimension("y", 2)
        nc.createVariable("x", "f4", ("x",))[:] = [1, 2, 3]
        nc.createVariable("v", "f4", ("x", "y"))[:] = np.arange(6).reshape(3, 2)
        nc.createVariable("w", "i4", ("y",))[:] = [7, 8]
    with netCDF4.Dataset(path, "a") as nc:
        nc.renameDimension("x", "lon")
        nc.renameVariable("w", "y")
        nc.renameVariable("x", "lon")
    assert_reads_like_netcdf4(path)
    assert set(xr.open_dataset(path, engine="virtualstac").xindexes) == {"lon", "y"}


@pytest.mark.parametrize(
    "fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA", "NETCDF4_CLASSIC"]
)
@pytest.mark.parametrize(
    ("dtype", "shape"), [("i1", ()), ("i2", ()), ("i1", (3,)), ("i2", (3,)), ("S1", (3,))]
)
def test_records_of_a_sole_record_variable_are_not_padded(
    tmp_path: Path, fmt: str, dtype: str, shape: tuple[int, ...]
) -> None:
    # netCDF-3 pads each record slab to 4 bytes, unless a single record variable holds the
    # records: then they follow one another, 1, 2, 3 or 6 bytes apart.
    path = tmp_path / "records.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as nc:
        nc.createDimension("t", None)
        nc.createDimension("n", 3)
        variable = nc.createVariable("a", dtype, ("t", *("n" * len(shape))))
        variable.set_auto_chartostring(False)
        values = np.arange(7 * max(1, len(shape) * 3)) % 100
        records = values.reshape(7, *shape).astype("i1" if dtype == "S1" else dtype)
        variable[:] = records.astype("S1") if dtype == "S1" else records
    assert_reads_like_netcdf4(path)
