"""Values read through ``open_zarr_dataset`` (every front end's read path) are the format's
reference reader's, for files of every parser written by the format's own writers, for every
kind of selection, with and without dask; and the selections that can take the path past
zarr's per-chunk walk take it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import h5py
import netCDF4
import numpy as np
import pytest
import rasterio
import xarray as xr
import zarr
from kerchunk.hdf import SingleHdf5ToZarr
from rasterio.transform import from_origin
from rasterio.windows import Window
from scipy.io import netcdf_file

type Reference = Callable[..., xr.Dataset]

RNG = np.random.default_rng(11)


def netcdf4_file(path: Path) -> Path:
    """Groups, an unlimited dimension (and an empty one), a scalar, big-endian, packed, a
    fill value with a chunk never written, contiguous, edge chunks, times and durations,
    variable-length strings and char arrays, as the netCDF4 library writes them."""
    with netCDF4.Dataset(path, "w") as f:
        f.createDimension("time", None)
        f.createDimension("empty", None)
        f.createDimension("y", 7)
        f.createDimension("x", 9)
        f.createDimension("nchar", 4)
        time = f.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = np.arange(5)
        temp = f.createVariable("temp", "f4", ("time", "y", "x"), chunksizes=(2, 3, 4), zlib=True)
        temp[:] = RNG.normal(size=(5, 7, 9))
        temp[2, 1:3] = np.ma.masked
        f.createVariable("nothing", "i4", ("empty", "x"))
        f.createVariable("scalar", "f8", ()).assignValue(3.5)
        f.createVariable("big", ">i4", ("y", "x"), endian="big")[:] = np.arange(63).reshape(7, 9)
        packed = f.createVariable("packed", "i2", ("y", "x"), fill_value=-1)
        packed.scale_factor, packed.add_offset = np.float32(0.1), np.float32(5)
        packed.set_auto_maskandscale(False)
        packed[:] = np.arange(63).reshape(7, 9)
        f.createVariable("contiguous", "f8", ("y", "x"), contiguous=True)[:] = RNG.normal(
            size=(7, 9)
        )
        sparse = f.createVariable("sparse", "i4", ("y", "x"), chunksizes=(3, 3), fill_value=42)
        sparse[:3, :3] = 1
        duration = f.createVariable("duration", "i8", ("x",))
        duration.units = "seconds"
        duration[:] = np.arange(9) * 3600
        strings = f.createVariable("strings", str, ("x",))
        strings[:] = np.array(["s" * i + "é" for i in range(9)], dtype=object)
        f.createVariable("chars", "S1", ("x", "nchar"))[:] = netCDF4.stringtochar(
            np.array([f"ab{i}" for i in range(9)], dtype="S4")
        )
        f.createGroup("sub").createDimension("z", 5)
        f["sub"].createVariable("z", "u2", ("z",), chunksizes=(2,))[:] = np.arange(5)
    return path


def netcdf3_file(path: Path, fmt: str) -> Path:
    """Record variables of several types (bytes padded within records) beside fixed ones."""
    with netCDF4.Dataset(path, "w", format=fmt) as f:
        f.createDimension("time", None)
        f.createDimension("x", 5)
        f.createDimension("nchar", 3)
        time = f.createVariable("time", "f8", ("time",))
        time.units = "hours since 2001-01-01"
        time[:] = np.arange(6)
        f.createVariable("a", "f4", ("time", "x"))[:] = RNG.normal(size=(6, 5))
        masked = f.createVariable("b", "i2", ("time",), fill_value=-5)
        masked[:] = np.arange(6)
        masked[3] = np.ma.masked
        f.createVariable("byte", "i1", ("time",))[:] = np.arange(6)
        f.createVariable("c", "S1", ("time", "nchar"))[:] = netCDF4.stringtochar(
            np.array([b"ab", b"cde", b"", b"x", b"yy", b"zzz"], "S3")
        )
        f.createVariable("s", "f8", ()).assignValue(1.25)
        f.createVariable("fixed", "i2", ("x",))[:] = np.arange(5)
    return path


def scipy_file(path: Path) -> Path:
    with netcdf_file(path, "w", version=2) as f:
        f.createDimension("time", None)
        f.createDimension("x", 4)
        f.createVariable("v", "f8", ("time", "x"))[:] = RNG.normal(size=(3, 4))
        f.createVariable("w", "i2", ("time",))[:] = [1, 2, 3]
        f.createVariable("z", "c", ("x",))[:] = np.array(list(b"abcd"), "S1")
    return path


def hdf5_file(path: Path) -> Path:
    """Compact, contiguous and chunked (big-endian, fletcher32, shuffled, scale-offset)
    layouts, written and never-written chunks, edge chunks, as h5py writes them."""
    with h5py.File(path, "w") as f:
        layout = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        layout.set_layout(h5py.h5d.COMPACT)
        compact = h5py.h5d.create(
            f.id, b"compact", h5py.h5t.STD_I16LE, h5py.h5s.create_simple((3, 4)), layout
        )
        compact.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(12, dtype="<i2").reshape(3, 4))
        f.create_dataset("contiguous", data=RNG.normal(size=(10, 11)))
        f.create_dataset(
            "chunked",
            data=RNG.normal(size=(10, 11)).astype(">f4"),
            chunks=(4, 4),
            compression="gzip",
            shuffle=True,
            fletcher32=True,
        )
        f.create_dataset("fill", shape=(10, 11), chunks=(4, 4), dtype="i4", fillvalue=-7)
        f["fill"][0:4, 4:8] = 3
        f.create_dataset(
            "scaleoffset", data=np.arange(110).reshape(10, 11), chunks=(4, 4), scaleoffset=0
        )
    return path


def tiff_file(path: Path, **profile: Any) -> Path:
    """A 3-band GeoTIFF as GDAL writes it; ``sparse_ok`` ones have only their first tile."""
    data = (RNG.normal(size=(3, 37, 45)) * 100).astype(profile["dtype"])
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=45,
        height=37,
        count=3,
        crs="EPSG:4326",
        transform=from_origin(10, 50, 0.1, 0.1),
        **profile,
    ) as f:
        if profile.get("sparse_ok"):
            f.write(data[:, :16, :16], window=Window(0, 0, 16, 16))
        else:
            f.write(data)
    return path


def zarr_store(path: Path, zarr_format: int, **array_options: Any) -> Path:
    """A 3-D array with an edge in every axis and a chunk never written, as zarr writes it."""
    group = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    names = {"dimension_names": ["t", "y", "x"]} if zarr_format == 3 else {}
    array = group.create_array(
        "v", shape=(7, 9, 11), dtype="<f4", chunks=(3, 4, 5), fill_value=np.nan,
        **names, **array_options,
    )  # fmt: skip
    array[:] = RNG.normal(size=(7, 9, 11))
    array[:3, :4, :5] = np.nan
    if zarr_format == 2:
        array.attrs["_ARRAY_DIMENSIONS"] = ["t", "y", "x"]
    return path


def kerchunk_file(path: Path) -> Path:
    """Kerchunk references of an HDF5 file: small chunks inlined, one key missing."""
    source = path.with_suffix(".h5")
    with h5py.File(source, "w") as f:
        f.create_dataset("v", data=RNG.normal(size=(11,)).astype("f4"), chunks=(3,), fillvalue=-1)
        f.create_dataset("w", data=np.arange(11, dtype="i2"), chunks=(4,), compression="gzip")
    references = SingleHdf5ToZarr(str(source), inline_threshold=20).translate()
    del references["refs"]["v/1"]
    path.write_text(json.dumps(references))
    return path


def with_engine(engine: str, **options: Any) -> Reference:
    def read(path: Path, **opened: Any) -> xr.Dataset:
        return xr.open_dataset(path, engine=engine, **options, **opened)

    return read


def kerchunk_references(path: Path, **opened: Any) -> xr.Dataset:
    mapper = fsspec.get_mapper("reference://", fo=str(path), remote_protocol="file")
    return xr.open_zarr(mapper, consolidated=False, zarr_format=2, **opened)


def rasterio_dataset(path: Path, **opened: Any) -> xr.Dataset:
    """The band values rasterio reads, named as the virtualstac engine names them (in memory:
    ``opened``, the chunks, does not apply)."""
    with rasterio.open(path) as f:
        return xr.Dataset({"band_data": (("band", "y", "x"), f.read())})


FILES: dict[str, tuple[Callable[[Path], Path], Reference, dict[str, Any]]] = {
    "netcdf4": (netcdf4_file, with_engine("netcdf4"), {}),
    "netcdf4-group": (netcdf4_file, with_engine("netcdf4"), {"group": "sub"}),
    "netcdf3-classic": (
        lambda p: netcdf3_file(p, "NETCDF3_CLASSIC"), with_engine("netcdf4"), {}
    ),
    "netcdf3-64bit-offset": (
        lambda p: netcdf3_file(p, "NETCDF3_64BIT_OFFSET"), with_engine("netcdf4"), {}
    ),
    "cdf5": (lambda p: netcdf3_file(p, "NETCDF3_64BIT_DATA"), with_engine("netcdf4"), {}),
    "scipy": (scipy_file, with_engine("scipy"), {}),
    "hdf5": (hdf5_file, with_engine("h5netcdf", phony_dims="sort"), {}),
    "tiff-pixel-tiled": (
        lambda p: tiff_file(p, dtype="uint16", tiled=True, blockxsize=16, blockysize=16,
                            interleave="pixel", compress="deflate", predictor=2),
        rasterio_dataset, {"mask_and_scale": False},
    ),
    "tiff-band-striped": (
        lambda p: tiff_file(p, dtype="float64", blockysize=7, interleave="band",
                            compress="deflate", predictor=3),
        rasterio_dataset, {"mask_and_scale": False},
    ),
    "tiff-sparse": (
        lambda p: tiff_file(p, dtype="int32", tiled=True, blockxsize=16, blockysize=16,
                            sparse_ok=True, nodata=-9, interleave="band"),
        rasterio_dataset, {"mask_and_scale": False},
    ),
    "zarr-v2-dot": (lambda p: zarr_store(p, 2), with_engine("zarr"), {}),
    "zarr-v2-slash": (
        lambda p: zarr_store(p, 2, chunk_key_encoding={"name": "v2", "separator": "/"}),
        with_engine("zarr"), {},
    ),
    "zarr-v2-order-F": (lambda p: zarr_store(p, 2, order="F"), with_engine("zarr"), {}),
    "zarr-v3": (lambda p: zarr_store(p, 3), with_engine("zarr"), {}),
    "zarr-v3-sharded": (lambda p: zarr_store(p, 3, shards=(6, 8, 10)), with_engine("zarr"), {}),
    "kerchunk": (kerchunk_file, kerchunk_references, {}),
}  # fmt: skip

#: Selections of every kind, as functions of a variable: xarray turns each into the
#: ``zarr.Array`` reads of its backend (basic, orthogonal, strided, empty, reversed).
SELECTIONS: dict[str, Callable[[xr.DataArray], Any]] = {
    "values": lambda v: v.values,
    "load": lambda v: v.load().values,
    "first": lambda v: v.isel(dict.fromkeys(v.dims, 0)).values,
    "last": lambda v: v.isel(dict.fromkeys(v.dims, -1)).values,
    "tail": lambda v: v.isel(dict.fromkeys(v.dims, slice(1, None))).values,
    "negative": lambda v: v.isel(dict.fromkeys(v.dims, slice(-3, -1))).values,
    "step": lambda v: v.isel(dict.fromkeys(v.dims, slice(None, None, 2))).values,
    "reversed": lambda v: v.isel(dict.fromkeys(v.dims, slice(None, None, -1))).values,
    "list": lambda v: v.isel({key: [0, -1] for key in v.dims}).values,
    "empty": lambda v: v.isel(dict.fromkeys(v.dims, slice(0, 0))).values,
    "first-axis": lambda v: v.isel({v.dims[0]: 1} if v.dims else {}).values,
}


def outcome(select: Callable[[xr.DataArray], Any], variable: xr.DataArray) -> Any:
    """The values ``select`` reads, text as Python strings (the netcdf4 engine gives
    variable-length ones as ``<U``, virtualstac as ``object``); or the error it raises."""
    try:
        values = np.asarray(select(variable))
    except (IndexError, ValueError) as err:
        return type(err)
    return values.astype(object) if values.dtype.kind in "OU" else values


@pytest.mark.parametrize("chunks", [None, {}, -1], ids=["numpy", "dask-stored", "dask-whole"])
@pytest.mark.parametrize("name", FILES)
def test_every_selection_reads_the_reference_readers_values(
    tmp_path: Path, name: str, chunks: Any, fast_reads: set[str]
) -> None:
    write, reference, options = FILES[name]
    path = write(tmp_path / f"{name}.file")
    expected = reference(path, chunks=chunks, **options)

    opened = xr.open_dataset(path, engine="virtualstac", chunks=chunks, **options)

    for key in expected.variables:
        for how, select in SELECTIONS.items():
            read, wanted = outcome(select, opened[key]), outcome(select, expected[key])
            if isinstance(wanted, type):
                assert read is wanted, (key, how)
                continue
            assert read.dtype == wanted.dtype, (key, how)
            np.testing.assert_array_equal(read, wanted, err_msg=f"{key}, {how}")
    # Every array with elements read past the walk (an F-order v2 array's chunks too, through
    # a transpose), but sharded ones, which zarr reads, and the raster coordinates computed
    # from the GeoTransform, which are in memory.
    if "sharded" not in name:
        arrays = {str(k) for k, v in opened.variables.items() if v.ndim and v.size}
        assert arrays - {"x", "y", "band", "spatial_ref"} <= fast_reads
