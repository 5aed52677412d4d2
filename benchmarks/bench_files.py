"""The sample files the parser benchmarks open, written by the formats' own writers.

``SINGLE_FILES`` are the per-file cases of ``bench_parsers.py`` and ``bench_requests.py`` (see
``bench_parsers``' docstring for their shapes); ``write_many`` writes the small files of its
``open_virtual_mfdataset`` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def _smooth(shape: tuple[int, ...], seed: int) -> np.ndarray[Any, Any]:
    """A smooth field plus noise rounded to 0.01, which compresses like real model output."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*(np.linspace(0, 6, n) for n in shape[-2:]), indexing="ij")
    field = np.sin(grids[0]) * np.cos(grids[1]) * 20 + 280
    noise = rng.normal(0, 0.5, size=shape)
    return (field + noise).round(2).astype(np.float32)


def write_cog(path: Path, size: int, bands: int, blocksize: int, seed: int = 0) -> None:
    """A band-interleaved COG by GDAL's COG driver: deflate, nodata 0, overviews, UTM grid.

    Band-interleaved because virtual-tiff 0.5 fails on pixel-interleaved multi-band files with
    zarr >= 3.2 (its ``ChunkyCodec`` calls zarr's ``Endian`` enum, which zarr turned into a
    deprecation shim).
    """
    import rasterio
    from rasterio.transform import from_origin

    rng = np.random.default_rng(seed)
    y, x = np.meshgrid(np.linspace(0, 12, size), np.linspace(0, 12, size), indexing="ij")
    base = np.sin(y) * np.cos(x) * 1000 + 2000
    data = np.stack(
        [(base + rng.integers(0, 40, size=(size, size))).astype(np.uint16) for _ in range(bands)]
    )
    profile = {
        "driver": "COG",
        "width": size,
        "height": size,
        "count": bands,
        "dtype": "uint16",
        "crs": "EPSG:32633",
        "transform": from_origin(500_000, 4_000_000, 10, 10),
        "compress": "deflate",
        "blocksize": blocksize,
        "nodata": 0,
        "interleave": "band",
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)


def _netcdf_coordinates(ds: Any, times: np.ndarray[Any, Any], nlat: int, nlon: int) -> None:
    time_var = ds.createVariable("time", "f8", ("time",))
    time_var.units = "hours since 2024-01-01 00:00:00"
    time_var.calendar = "standard"
    time_var.standard_name = "time"
    time_var[:] = times
    lat = ds.createVariable("lat", "f4", ("lat",))
    lat.units, lat.standard_name = "degrees_north", "latitude"
    lat[:] = np.linspace(-90, 90, nlat)
    lon = ds.createVariable("lon", "f4", ("lon",))
    lon.units, lon.standard_name = "degrees_east", "longitude"
    lon[:] = np.linspace(0, 360, nlon, endpoint=False)


_NC_VARIABLES = (
    ("t2m", "K", "2 metre temperature"),
    ("u10", "m s-1", "10 metre U wind component"),
    ("v10", "m s-1", "10 metre V wind component"),
)


def write_netcdf(
    path: Path,
    *,
    fmt: str,
    times: np.ndarray[Any, Any],
    nlat: int,
    nlon: int,
    chunks: tuple[int, int, int] | None = None,
    unlimited: bool = False,
) -> None:
    """A CF netCDF file by the netCDF4 library: time/lat/lon and three float32 variables.

    ``fmt`` is ``NETCDF4`` (chunked, zlib level 4 with shuffle) or ``NETCDF3_CLASSIC``
    (``unlimited`` makes ``time`` the record dimension).
    """
    import netCDF4

    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("time", None if unlimited else len(times))
        ds.createDimension("lat", nlat)
        ds.createDimension("lon", nlon)
        ds.Conventions = "CF-1.8"
        ds.title = "virtualstac parser benchmark"
        _netcdf_coordinates(ds, times, nlat, nlon)
        options: dict[str, Any] = {}
        if fmt == "NETCDF4":
            options = {"zlib": True, "complevel": 4, "shuffle": True, "chunksizes": chunks}
        for i, (name, units, long_name) in enumerate(_NC_VARIABLES):
            var = ds.createVariable(
                name, "f4", ("time", "lat", "lon"), fill_value=np.float32(-9999), **options
            )
            var.units, var.long_name = units, long_name
            var[:] = _smooth((len(times), nlat, nlon), seed=int(times[0]) * 3 + i)


def write_hdf5(path: Path) -> None:
    """Plain HDF5 by h5py: two groups of two gzip-compressed, chunked float32 datasets."""
    import h5py

    with h5py.File(path, "w") as f:
        f.attrs["title"] = "virtualstac parser benchmark"
        for g, group_name in enumerate(("forecast", "analysis")):
            group = f.create_group(group_name)
            group.attrs["model"] = group_name
            for i, name in enumerate(("temperature", "pressure")):
                dset = group.create_dataset(
                    name,
                    data=_smooth((24, 512, 512), seed=g * 2 + i),
                    chunks=(1, 128, 128),
                    compression="gzip",
                    compression_opts=4,
                    shuffle=True,
                )
                dset.attrs["units"] = "K" if name == "temperature" else "hPa"


#: (label, file name, writer) of the per-file benchmark.
SINGLE_FILES: tuple[tuple[str, str, Callable[[Path], None]], ...] = (
    ("COG", "cog.tif", lambda p: write_cog(p, 2048, 4, 512)),
    (
        "netCDF4",
        "netcdf4.nc",
        lambda p: write_netcdf(
            p, fmt="NETCDF4", times=np.arange(24.0), nlat=361, nlon=720, chunks=(1, 181, 360)
        ),
    ),
    ("HDF5", "plain.h5", write_hdf5),
    (
        "netCDF3 classic",
        "classic.nc",
        lambda p: write_netcdf(p, fmt="NETCDF3_CLASSIC", times=np.arange(24.0), nlat=361, nlon=720),
    ),
    (
        "netCDF3 record",
        "record.nc",
        lambda p: write_netcdf(
            p, fmt="NETCDF3_CLASSIC", times=np.arange(24.0), nlat=361, nlon=720, unlimited=True
        ),
    ),
)


def write_many(directory: Path, kind: str, count: int) -> list[Path]:
    """``count`` small files of one kind, one time step (or one scene) each."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        if kind == "COG":
            path = directory / f"scene_{i:04d}.tif"
            write_cog(path, 256, 3, 128, seed=i)
        else:
            path = directory / f"step_{i:04d}.nc"
            fmt = "NETCDF4" if kind == "netCDF4" else "NETCDF3_CLASSIC"
            write_netcdf(
                path,
                fmt=fmt,
                times=np.array([float(i)]),
                nlat=32,
                nlon=64,
                chunks=(1, 32, 64),
                unlimited=kind == "netCDF3",
            )
        paths.append(path)
    return paths
