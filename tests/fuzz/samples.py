"""Small real files of every format the fuzz suite damages, written by each format's own writer.

Each writer returns the path virtualstac opens: a file, or a directory for Zarr and Kerchunk
parquet. Files are small (a few KiB) so that hundreds of damaged copies open in seconds, yet
each has what a parser walks: several variables, compressed and uncompressed chunks,
coordinates, attributes and (HDF5) a sub-group.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import h5py
import netCDF4
import numpy as np
import rasterio
import scipy.io
import zarr
from numcodecs import Zlib
from rasterio.transform import from_origin

from virtualstac import ObjectStoreRegistry, open_virtual_dataset


def _values(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Smooth-ish values compress, as real data does, so compressed chunks are short.
    base = np.cumsum(rng.integers(0, 3, size=shape), axis=-1)
    return base.astype(dtype)


def write_cog(path: Path) -> Path:
    """A two-band COG (GDAL's COG driver): deflate with horizontal predictor, 16x16 tiles."""
    data = _values((2, 48, 40), "uint16", 1)
    profile = {
        "driver": "COG",
        "width": 40,
        "height": 48,
        "count": 2,
        "dtype": "uint16",
        "crs": "EPSG:32633",
        "transform": from_origin(500000, 4000000, 30, 30),
        "compress": "DEFLATE",
        "predictor": 2,
        "blocksize": 16,
        "overview_count": 1,
        "nodata": 0,
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
    return path


def write_gtiff_strips(path: Path) -> Path:
    """An uncompressed float32 GeoTIFF in strips of 8 rows (GDAL's GTiff driver)."""
    data = _values((1, 30, 20), "float32", 2)
    profile = {
        "driver": "GTiff",
        "width": 20,
        "height": 30,
        "count": 1,
        "dtype": "float32",
        "crs": "EPSG:4326",
        "transform": from_origin(10, 50, 0.1, 0.1),
        "blockysize": 8,
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
    return path


def write_netcdf4(path: Path) -> Path:
    """netCDF-4 (netCDF4 library): a zlib-compressed chunked variable, a contiguous one."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.title = "fuzz sample"
        nc.createDimension("time", None)
        nc.createDimension("y", 6)
        nc.createDimension("x", 8)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = np.arange(4.0)
        nc.createVariable("y", "f4", ("y",))[:] = np.linspace(40, 45, 6)
        nc.createVariable("x", "f4", ("x",))[:] = np.linspace(0, 7, 8)
        temp = nc.createVariable(
            "temp", "f4", ("time", "y", "x"), zlib=True, shuffle=True, chunksizes=(1, 6, 4)
        )
        temp.units = "K"
        temp[:] = _values((4, 6, 8), "float32", 3)
        mask = nc.createVariable("mask", "i2", ("y", "x"), contiguous=True)
        mask[:] = _values((6, 8), "int16", 4)
    return path


def write_netcdf3(path: Path) -> Path:
    """netCDF-3 (scipy, CDF-2): a record variable and fixed-size variables."""
    with scipy.io.netcdf_file(path, "w", version=2) as nc:
        nc.history = "fuzz sample"
        nc.createDimension("time", None)
        nc.createDimension("x", 5)
        x = nc.createVariable("x", "f4", ("x",))
        x[:] = np.arange(5.0)
        x.units = "m"
        level = nc.createVariable("level", "i4", ("time", "x"))
        level[:] = _values((3, 5), "int32", 5)
        grid = nc.createVariable("grid", "f8", ("x", "x"))
        grid[:] = _values((5, 5), "float64", 6)
    return path


def write_netcdf3_cdf5(path: Path) -> Path:
    """netCDF-3 (netCDF4 library, CDF-5): record variables of 1, 2 and 8 bytes interleaved
    (padded records), a character variable, a scalar and attributes of the CDF-5 types."""
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_DATA") as nc:
        nc.history = "fuzz sample"
        nc.counts = np.array([1, 2**40], dtype="u8")
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        nc.createDimension("name", 4)
        nc.createVariable("x", "f4", ("x",))[:] = np.arange(3.0)
        nc.createVariable("code", "S1", ("x", "name"))[:] = np.array(
            list("abcdefghijkl"), "S1"
        ).reshape(3, 4)
        nc.createVariable("scale", "f8", ())[...] = 0.5
        flag = nc.createVariable("flag", "u1", ("time", "x"), fill_value=np.uint8(255))
        flag[:] = _values((4, 3), "uint8", 12)
        nc.createVariable("level", "i2", ("time",))[:] = _values((4,), "int16", 13)
        nc.createVariable("count", "u8", ("time", "x"))[:] = _values((4, 3), "uint64", 14)
    return path


def write_hdf5(path: Path) -> Path:
    """Plain HDF5 (h5py): gzip+shuffle chunks, a contiguous dataset, a sub-group, attributes."""
    with h5py.File(path, "w") as f:
        f.attrs["source"] = "fuzz sample"
        f.create_dataset(
            "packed",
            data=_values((12, 10), "int32", 7),
            chunks=(4, 5),
            compression="gzip",
            shuffle=True,
        )
        f.create_dataset("plain", data=_values((9, 7), "float64", 8))
        group = f.create_group("sub")
        group.attrs["level"] = 2
        group.create_dataset("inner", data=_values((20,), "uint8", 9), chunks=(8,))
    return path


def write_zarr(path: Path, zarr_format: int) -> Path:
    """A Zarr store (zarr-python) with a compressed array, an uncompressed one, attributes."""
    root = zarr.open_group(path, mode="w", zarr_format=zarr_format)  # type: ignore[arg-type]
    root.attrs["title"] = "fuzz sample"
    compressors = [Zlib(level=5)] if zarr_format == 2 else "auto"
    packed = root.create_array(
        "packed",
        shape=(10, 12),
        chunks=(4, 5),
        dtype="int32",
        compressors=compressors,
        dimension_names=("y", "x") if zarr_format == 3 else None,
    )
    packed[:] = _values((10, 12), "int32", 10)
    if zarr_format == 2:
        packed.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    plain = root.create_array(
        "plain",
        shape=(12,),
        chunks=(5,),
        dtype="float64",
        compressors=None,
        dimension_names=("x",) if zarr_format == 3 else None,
    )
    plain[:] = _values((12,), "float64", 11)
    if zarr_format == 2:
        plain.attrs["_ARRAY_DIMENSIONS"] = ["x"]
    return path


def write_kerchunk(path: Path, fmt: str) -> Path:
    """Kerchunk references (our writer) to a netCDF-4 file beside them."""
    source = write_netcdf4(path.parent / f"{path.name}.source.nc")
    dataset = open_virtual_dataset(str(source), loadable_variables=[])
    registry = ObjectStoreRegistry.for_url(str(source))
    sizes = {"record_size": 3} if fmt == "parquet" else {}
    dataset.virtual.to_kerchunk(str(path), format=fmt, registry=registry, **sizes)  # type: ignore[arg-type]
    return path


#: Format name -> writer of a sample at the given path.
SAMPLES: dict[str, Callable[[Path], Path]] = {
    "cog": write_cog,
    "gtiff": write_gtiff_strips,
    "netcdf4": write_netcdf4,
    "netcdf3": write_netcdf3,
    "netcdf3-cdf5": write_netcdf3_cdf5,
    "hdf5": write_hdf5,
    "zarr2": lambda path: write_zarr(path, 2),
    "zarr3": lambda path: write_zarr(path, 3),
    "kerchunk-json": lambda path: write_kerchunk(path, "json"),
    "kerchunk-parquet": lambda path: write_kerchunk(path, "parquet"),
}
