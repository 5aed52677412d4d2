"""HDF5 and netCDF4 test files, written by the real libraries (netCDF4-python and h5py).

netCDF4 is imported only inside the functions that use it: importing it points
``HDF5_PLUGIN_PATH`` at filter plugins built for its own HDF5 library, which h5py then loads
(see :func:`write_hdf5_filters`).

Each ``write_*`` function writes one file at the path it is given and returns that path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest


def write_netcdf_everything(path: Path) -> Path:
    """A netCDF4 file exercising most of what netCDF4-python can write.

    Groups (nested, with dimensions inherited from the parent), an unlimited dimension, zlib +
    shuffle + fletcher32, packed integers (scale_factor/add_offset/_FillValue), partly written
    variables (unallocated chunks), times with units and calendar, variable-length and
    character strings, a scalar, big-endian data, contiguous storage, unsigned and 64-bit
    types, ``missing_value``, a 2-D coordinate variable and a variable named like a dimension
    it is not the coordinate of.
    """
    import netCDF4

    rng = np.random.default_rng(0)
    with netCDF4.Dataset(path, "w") as nc:
        nc.title = "everything"
        nc.history = "written by the virtualstac tests"
        nc.version = np.int32(3)
        nc.valid = np.array([1.5, 2.5])
        nc.createDimension("time", None)
        nc.createDimension("lat", 30)
        nc.createDimension("lon", 40)
        nc.createDimension("nchar", 6)
        nc.createDimension("station", 4)
        nc.createDimension("node", 3)

        time = nc.createVariable("time", "f8", ("time",))
        time.units = "hours since 2000-01-01 00:00:00"
        time.calendar = "noleap"
        time.standard_name = "time"
        time[:] = np.arange(10) * 6.0
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lat[:] = np.linspace(-60, 60, 30)
        lon = nc.createVariable("lon", "f4", ("lon",), contiguous=True)
        lon[:] = np.linspace(0, 351, 40)

        temp = nc.createVariable(
            "temp",
            "i2",
            ("time", "lat", "lon"),
            zlib=True,
            complevel=5,
            shuffle=True,
            fletcher32=True,
            chunksizes=(1, 16, 16),
            fill_value=np.int16(-32767),
        )
        temp.scale_factor = np.float32(0.01)
        temp.add_offset = np.float32(273.15)
        temp.units = "K"
        temp.long_name = "air temperature"
        values = np.ma.masked_array(rng.normal(15, 10, (10, 30, 40)))
        values[0, :5, :5] = np.ma.masked
        temp[:] = values

        # Written only partly: the chunks of the rest are never allocated.
        precip = nc.createVariable(
            "precip",
            "f4",
            ("time", "lat", "lon"),
            zlib=True,
            chunksizes=(2, 10, 10),
            fill_value=np.float32(np.nan),
        )
        precip.units = "mm"
        precip[:4, :10, :] = rng.random((4, 10, 40)).astype("f4")

        big = nc.createVariable("big", ">f8", ("lat", "lon"), endian="big", zlib=True)
        big[:] = rng.random((30, 40))
        counts = nc.createVariable("counts", "u2", ("lat", "lon"), chunksizes=(7, 9))
        counts.missing_value = np.uint16(65535)
        counts[:] = rng.integers(0, 1000, (30, 40)).astype("u2")
        quality = nc.createVariable("quality", "i2", ("station",))
        quality.missing_value = np.array([-1, -2], dtype="i2")
        quality[:] = [1, -1, -2, 4]
        ratio = nc.createVariable("ratio", "f4", ("station",))
        ratio.missing_value = np.float32(np.nan)
        ratio.valid_range = np.array([0, np.inf], dtype="f4")
        ratio[:] = [0.5, np.nan, 2.0, 1.0]
        ids = nc.createVariable("ids", "i8", ("station",))
        ids[:] = [1, 2**40, -(2**50), 7]
        flags = nc.createVariable("flags", "u1", ("station",))
        flags[:] = [0, 1, 254, 255]
        signed = nc.createVariable("signed", "i1", ("station",))
        signed._Unsigned = "true"
        signed[:] = np.array([-1, 0, 5, -128], dtype="i1")
        huge = nc.createVariable("huge", "u8", ("station",))
        huge[:] = np.array([0, 2**63 + 5, 1, 2**64 - 1], dtype="u8")

        names = nc.createVariable("station_name", str, ("station",))
        names.long_name = "station name"
        names[:] = np.array(["Zürich", "Oslo", "", "a longer station name"], dtype=object)
        codes = nc.createVariable("station_code", "S1", ("station", "nchar"))
        codes[:] = netCDF4.stringtochar(np.array(["ABC", "DEFGHI", "J", ""], dtype="S6"))
        scalar = nc.createVariable("crs", "i4", ())
        scalar.grid_mapping_name = "latitude_longitude"
        scalar[...] = 0
        level = nc.createVariable("level", "f4", ())
        level.units = "m"
        level[...] = 2.0

        # A 2-D coordinate variable, and a variable named like a dimension it does not follow.
        node = nc.createVariable("node", "f4", ("node", "station"))
        node[:] = np.arange(12, dtype="f4").reshape(3, 4)
        nc.createVariable("empty_series", "f4", ("time", "station"), fill_value=np.float32(-1))

        sub = nc.createGroup("forecast")
        sub.model = "gfs"
        sub.createDimension("step", 5)
        step = sub.createVariable("step", "i4", ("step",))
        step.units = "hours"
        step[:] = np.arange(5) * 3
        field = sub.createVariable(
            "field", "f4", ("step", "lat", "lon"), zlib=True, shuffle=False, chunksizes=(1, 30, 40)
        )
        field.coordinates = "lat lon"
        field[:] = rng.random((5, 30, 40)).astype("f4")
        deeper = sub.createGroup("members")
        deeper.createDimension("member", 3)
        spread = deeper.createVariable("spread", "f8", ("member", "step"))
        spread[:] = rng.random((3, 5))
    return path


def write_netcdf_types_and_conventions(path: Path) -> Path:
    """A netCDF4 file of the types and CF conventions providers use beyond the basic ones.

    An enum with a ``_FillValue``, NC_STRING attributes (one, several, one in a list, empty
    ones), a character variable along a string length with ``_Encoding``, times in the
    ``noleap`` and ``360_day`` calendars with bounds, ``grid_mapping`` and
    ``ancillary_variables``, bytes packed with their ``_FillValue`` in the packed type, and a
    sub-group whose variable along the parent's unlimited dimension was appended to in later
    sessions, its last chunk partly written.
    """
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.Conventions = "CF-1.8"
        nc.setncattr_string("institution", "Météo")
        nc.setncattr_string("sources", ["model", "observations"])
        nc.createDimension("time", None)
        nc.createDimension("bnds", 2)
        nc.createDimension("x", 4)
        nc.createDimension("strlen", 6)
        time = nc.createVariable("time", "f8", ("time",))
        time.units, time.calendar, time.bounds = "days since 2000-01-01", "noleap", "time_bnds"
        time[:] = [0.5, 365.5, 730.5]
        nc.createVariable("time_bnds", "f8", ("time", "bnds"))[:] = [[0, 1], [365, 366], [730, 731]]
        months = nc.createVariable("months", "i4", ("time",))
        months.units, months.calendar = "days since 1850-01-01", "360_day"
        months[:] = [0, 30, 359]
        cloud_t = nc.createEnumType("u1", "cloud_t", {"clear": 0, "cloudy": 1, "missing": 255})
        cloud = nc.createVariable("cloud", cloud_t, ("time", "x"), fill_value=255)
        cloud.setncattr_string("long_name", ["cloud cover"])
        cloud[:] = np.array([[0, 1, 255, 1]] * 3, dtype="u1")
        crs = nc.createVariable("crs", "i4", ())
        crs.grid_mapping_name = "lambert_conformal_conic"
        crs.standard_parallel = [30.0, 60.0]
        albedo = nc.createVariable("albedo", "u1", ("time", "x"), fill_value=np.uint8(255))
        albedo.scale_factor, albedo.add_offset = np.float32(0.004), np.float32(0.0)
        albedo.grid_mapping, albedo.ancillary_variables = "crs", "albedo_flag"
        albedo.setncattr_string("comments", ["", ""])
        albedo.set_auto_maskandscale(False)
        albedo[:] = np.array([[0, 100, 255, 250]] * 3, dtype="u1")
        flag = nc.createVariable("albedo_flag", "i1", ("time", "x"))
        flag.flag_values, flag.flag_meanings = np.array([0, 1], "i1"), "good bad"
        flag[:] = np.zeros((3, 4), "i1")
        name = nc.createVariable("name", "S1", ("x", "strlen"))
        name._Encoding = "utf-8"
        name[:] = np.array(["Zürich", "Oslo", "", "Bern"])
        station = nc.createGroup("station")
        station.createVariable("count", "i4", ("time",), chunksizes=(2,))
    for record in range(3):
        with netCDF4.Dataset(path, "a") as nc:
            nc["station/count"][record] = 10 * record
    return path


def write_netcdf_unlimited_empty(path: Path) -> Path:
    """A netCDF4 file with an unlimited dimension that has no records yet."""
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 1970-01-01"
        nc.createVariable("v", "f4", ("time", "x"), fill_value=np.float32(-9))
        x = nc.createVariable("x", "i4", ("x",))
        x[:] = [1, 2, 3]
    return path


def write_netcdf_strings_partly_written(path: Path) -> Path:
    """netCDF-4 string variables along an unlimited dimension whose second record was never
    written (HDF5 refuses to read such strings from a file open read-only): ``names``
    without a fill value, ``labels`` with the ``_FillValue`` "N/A"."""
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("t", None)
        nc.createDimension("station", 3)
        names = nc.createVariable("names", str, ("t", "station"))
        names[0, :] = np.array(["a", "", "ccc"], dtype=object)
        names[2, 1] = "late"
        labels = nc.createVariable("labels", str, ("t",), fill_value="N/A")
        labels[0] = "first"
        labels[2] = "third"
    return path


def write_netcdf_benchmark(path: Path, *, times: int = 48) -> Path:
    """Five variables and a few hundred zlib chunks: the request and timing figure file."""
    import netCDF4

    rng = np.random.default_rng(1)
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 90)
        nc.createDimension("lon", 180)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = np.arange(times)
        nc.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-89, 89, 90)
        nc.createVariable("lon", "f4", ("lon",))[:] = np.linspace(-179, 179, 180)
        for name in ("t2m", "u10", "v10"):
            var = nc.createVariable(
                name, "f4", ("time", "lat", "lon"), zlib=True, shuffle=True, chunksizes=(1, 90, 90)
            )
            var[:] = rng.random((times, 90, 180)).astype("f4")
    return path


def write_hdf5_plain(path: Path) -> Path:
    """A plain HDF5 file (h5py): the layouts, types and dimension scales netCDF4 does not write."""
    rng = np.random.default_rng(2)
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "plain"
        f.attrs["numbers"] = np.arange(3, dtype="i4")
        f.attrs["one"] = np.array([7.5])
        f.attrs["bytes"] = np.bytes_(b"caf\xc3\xa9")
        f.attrs["words"] = np.array([b"a", b"bc"])
        f.attrs["vlen_words"] = np.array(["x", "yz"], dtype=h5py.string_dtype())
        f.attrs["empty"] = h5py.Empty("f4")
        f.attrs["flag"] = np.bool_(True)
        f["contiguous"] = rng.random((20, 30))
        f.create_dataset("chunked", data=rng.random((50, 70)).astype("f4"), chunks=(16, 32))
        f.create_dataset(
            "big_gzip",
            data=np.arange(3000, dtype=">i4").reshape(30, 100),
            chunks=(8, 25),
            compression="gzip",
            compression_opts=9,
            shuffle=True,
        )
        f.create_dataset("big_contiguous", data=np.linspace(0, 1, 100).astype(">f8"))
        f.create_dataset("big_uint16", data=np.arange(200, dtype=">u2"), chunks=(64,))
        f.create_dataset(
            "fletcher",
            data=rng.random(1000).astype(">f4"),
            chunks=(300,),
            fletcher32=True,
            shuffle=True,
            compression="gzip",
        )
        sparse = f.create_dataset(
            "sparse", shape=(100, 100), dtype="i2", chunks=(10, 10), fillvalue=-5
        )
        sparse[15:25, 40:60] = 3
        f.create_dataset("never_written", shape=(40, 40), dtype="f8", fillvalue=2.5)
        f.create_dataset("never_written_chunked", shape=(40, 40), dtype="f4", chunks=(10, 10))
        compact_space = h5py.h5s.create_simple((6,))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        compact = h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_I32BE, compact_space, dcpl=dcpl)
        compact.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(6, dtype=">i4") * 11)
        f["scalar"] = np.float64(3.25)
        f["bools"] = np.array([True, False, True])
        f["complex"] = (np.arange(4) + 1j * np.arange(4)).astype("c8")
        enum = h5py.enum_dtype({"low": 0, "high": 9}, basetype="u1")
        f.create_dataset("enum", data=np.array([0, 9, 9, 0], dtype="u1"), dtype=enum)
        f["fixed_strings"] = np.array([b"alpha", b"be", b""], dtype="S5")
        f.create_dataset(
            "vlen_strings", data=["one", "twenty-two", "é"], dtype=h5py.string_dtype("utf-8")
        )
        f.create_dataset("ascii_strings", data=[b"ab", b"c"], dtype=h5py.string_dtype("ascii"))
        f.create_dataset("zero_length", shape=(0, 4), dtype="f4", maxshape=(None, 4), chunks=True)

        x = f.create_dataset("x", data=np.arange(30, dtype="f8"))
        x.make_scale("x")
        y = f.create_dataset("y", data=np.arange(100, dtype="f8"))
        y.make_scale("y")
        f["big_gzip"].dims[0].attach_scale(x)
        f["big_gzip"].dims[1].attach_scale(y)
        f["big_gzip"].attrs["units"] = "counts"
        f["chunked"].attrs["see_also"] = f["contiguous"].ref

        g = f.create_group("sub")
        g.attrs["level"] = 1
        g.create_dataset("inner", data=rng.integers(0, 100, (12, 30)), chunks=(5, 30))
        g["inner"].dims[1].attach_scale(x)
        deeper = g.create_group("deeper")
        deeper["values"] = np.arange(5, dtype="u8")
        f["link_to_chunked"] = h5py.SoftLink("/chunked")
        # A dataset whose dimension scale lives in another branch of the file.
        elsewhere = f.create_group("elsewhere")
        elsewhere.create_dataset("along_y", data=np.arange(100, dtype="i2"))
        elsewhere["along_y"].dims[0].attach_scale(y)
    return path


def write_with_plugins(writer: str, path: Path) -> Path:
    """Run ``hdf_files.<writer>(path)`` in a fresh interpreter, where hdf5plugin's filters load.

    Once netCDF4 is imported, h5py loads netCDF4's filter plugins (netCDF4 points
    HDF5_PLUGIN_PATH at plugins built for its own HDF5 library), which cannot write.
    """
    pytest.importorskip("hdf5plugin")
    script = (
        "import sys, pathlib; sys.path.insert(0, sys.argv[1]); import hdf_files; "
        f"hdf_files.{writer}(pathlib.Path(sys.argv[2]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "HDF5_PLUGIN_PATH"}
    subprocess.run(
        [sys.executable, "-c", script, str(Path(__file__).parent), str(path)],
        check=True,
        env=env,
    )
    return path


FILTER_DATA = np.arange(20000, dtype="<f4").reshape(100, 200) % 97


def write_hdf5_filters(path: Path) -> Path:
    """Chunked datasets through each compression filter with a zarr codec (hdf5plugin ones too).

    Every dataset holds :data:`FILTER_DATA` (``big_zstd`` as big-endian float64). Call it in an
    interpreter that has not imported netCDF4 and whose ``HDF5_PLUGIN_PATH`` is unset: h5py
    would otherwise load netCDF4's blosc plugin, built for another HDF5, which cannot write.
    """
    import hdf5plugin

    data = FILTER_DATA
    with h5py.File(path, "w") as f:
        f.create_dataset("lzf", data=data, chunks=(25, 50), compression="lzf")
        f.create_dataset("lzf_shuffle", data=data, chunks=(25, 50), compression="lzf", shuffle=True)
        f.create_dataset("blosc", data=data, chunks=(25, 50), **hdf5plugin.Blosc(cname="lz4"))
        f.create_dataset(
            "blosc_zstd",
            data=data,
            chunks=(25, 50),
            **hdf5plugin.Blosc(cname="zstd", clevel=7, shuffle=hdf5plugin.Blosc.BITSHUFFLE),
        )
        f.create_dataset("zstd", data=data, chunks=(25, 50), **hdf5plugin.Zstd(clevel=9))
        f.create_dataset("lz4", data=data, chunks=(25, 50), **hdf5plugin.LZ4())
        f.create_dataset("bzip2", data=data, chunks=(25, 50), **hdf5plugin.BZip2())
        f.create_dataset(
            "big_zstd", data=data.astype(">f8"), chunks=(30, 70), **hdf5plugin.Zstd(clevel=1)
        )
    return path


def write_hdf5_unknown_filter(path: Path) -> Path:
    """A ZFP dataset (a filter no zarr codec decodes) next to a gzip one.

    Call it as :func:`write_hdf5_filters` is called, in a fresh interpreter.
    """
    import hdf5plugin

    with h5py.File(path, "w") as f:
        f.create_dataset(
            "zfp", data=FILTER_DATA, chunks=(25, 50), **hdf5plugin.Zfp(reversible=True)
        )
        f.create_dataset("gzipped", data=FILTER_DATA, chunks=(25, 50), compression="gzip")
    return path


def half_noise() -> np.ndarray[Any, Any]:
    """100 x 200 bytes, the first 50 rows zeros and the others random: the chunks of the noise
    are ones no compressor shrinks."""
    values = np.random.default_rng(9).integers(0, 256, (100, 200), dtype="u1")
    values[:50] = 0
    return values


def write_hdf5_blosc_half_noise(path: Path) -> Path:
    """``blosc``: :func:`half_noise` through hdf5plugin's blosc, an optional filter HDF5 skips
    for the chunks of noise, which blosc cannot compress.

    Call it as :func:`write_hdf5_filters` is called, in a fresh interpreter.
    """
    import hdf5plugin

    with h5py.File(path, "w") as f:
        blosc = hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.NOSHUFFLE)
        f.create_dataset("blosc", data=half_noise(), chunks=(25, 50), **blosc)
    return path


def bitshuffle_data(dtype: str) -> np.ndarray[Any, Any]:
    """The 100 x 200 values of :func:`write_hdf5_bitshuffle`'s datasets of ``dtype``."""
    values = np.random.default_rng(5).normal(scale=100, size=(100, 200))
    return values.astype(dtype)


#: The datasets of :func:`write_hdf5_bitshuffle`: name -> (dtype, chunk shape, compression).
BITSHUFFLE_DATASETS = {
    f"{dtype.replace('>', 'be_').lstrip('<')}_{compression}_{'x'.join(map(str, chunks))}": (
        dtype,
        chunks,
        compression,
    )
    for dtype in ("u1", "<i2", ">f4", "<f8")
    for chunks in ((25, 50), (7, 13), (100, 200))
    for compression in ("none", "lz4", "zstd")
}


def write_hdf5_bitshuffle(path: Path) -> Path:
    """Datasets through hdf5plugin's bitshuffle filter (:data:`BITSHUFFLE_DATASETS`), whose
    chunks hold whole blocks of elements, a short block and fewer than 8 left (7 x 13), and
    blocks of 1000 elements (100 x 200), plus ``checksummed``, followed by fletcher32.

    Call it as :func:`write_hdf5_filters` is called, in a fresh interpreter.
    """
    import hdf5plugin

    with h5py.File(path, "w") as f:
        for name, (dtype, chunks, compression) in BITSHUFFLE_DATASETS.items():
            nelems = 1000 if chunks == (100, 200) else 0
            bitshuffle = hdf5plugin.Bitshuffle(nelems=nelems, cname=compression)
            f.create_dataset(name, data=bitshuffle_data(dtype), chunks=chunks, **bitshuffle)
        f.create_dataset(
            "checksummed",
            data=bitshuffle_data("<i4"),
            chunks=(30, 30),
            fletcher32=True,
            **hdf5plugin.Bitshuffle(cname="lz4"),
        )
    return path


def write_hdf5_blosc_snappy(path: Path) -> Path:
    """``snappy``: a dataset through blosc's snappy compressor, next to ``lz4``, through its lz4.

    Call it as :func:`write_hdf5_filters` is called, in a fresh interpreter.
    """
    import hdf5plugin

    with h5py.File(path, "w") as f:
        for cname in ("snappy", "lz4"):
            blosc = hdf5plugin.Blosc(cname=cname)
            f.create_dataset(cname, data=FILTER_DATA, chunks=(25, 50), **blosc)
    return path


def write_hdf5_filter_mask(path: Path) -> Path:
    """A gzip dataset with one chunk written raw (filter mask 1) and a clean one."""
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("masked", shape=(20,), dtype="i4", chunks=(10,), compression="gzip")
        ds[:10] = np.arange(10)
        ds.id.write_direct_chunk((10,), np.arange(10, 20, dtype="i4").tobytes(), filter_mask=1)
        f.create_dataset("clean", data=np.arange(20, dtype="i4"), chunks=(10,), compression="gzip")
    return path


def write_hdf5_unsupported(path: Path) -> Path:
    """One dataset per thing that cannot be referenced, next to ones that can (``fine``, and
    ``szip``, ``scaleoffset`` and ``nbit``, through filters HDF5 has built in)."""
    data = np.arange(400, dtype="i4").reshape(20, 20)
    with h5py.File(path, "w") as f:
        f["fine"] = np.arange(10)
        f.create_dataset("szip", data=data.astype("f4"), chunks=(10, 10), compression="szip")
        f.create_dataset("scaleoffset", data=data, chunks=(10, 10), scaleoffset=0)
        # HDF5 2 refuses types whose precision is narrower than their size unless file
        # integrity checks are relaxed; the filter is in the pipeline either way.
        nbit_type = h5py.h5t.STD_I32LE
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((10, 10))
        dcpl.set_filter(h5py.h5z.FILTER_NBIT)
        nbit = h5py.h5d.create(
            f.id, b"nbit", nbit_type, h5py.h5s.create_simple((20, 20)), dcpl=dcpl
        )
        nbit.write(h5py.h5s.ALL, h5py.h5s.ALL, data % 1000)
        f.create_dataset(
            "vlen_ints", data=[np.arange(3), np.arange(5)], dtype=h5py.vlen_dtype("i4")
        )
        refs = f.create_dataset("refs", shape=(2,), dtype=h5py.ref_dtype)
        refs[0] = f["fine"].ref
        regions = f.create_dataset("regions", shape=(1,), dtype=h5py.regionref_dtype)
        regions[0] = f["fine"].regionref[2:5]
        f["compound"] = np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "i4"), ("b", "f8")])
        f["opaque"] = np.array([b"ab\x00", b"cde"], dtype="V3")  # netCDF-4's NC_OPAQUE
        array_type = h5py.h5t.array_create(h5py.h5t.IEEE_F32LE, (2,))
        h5py.h5d.create(f.id, b"array_type", array_type, h5py.h5s.create_simple((3,)))
        f.create_dataset(
            "external", shape=(10,), dtype="i4", external=[(str(path) + ".raw", 0, 40)]
        )
        layout = h5py.VirtualLayout(shape=(10,), dtype="i8")
        layout[:] = h5py.VirtualSource(f["fine"])
        f.create_virtual_dataset("virtual", layout)
        f["null_dataspace"] = h5py.Empty("f4")
        f["external_link"] = h5py.ExternalLink("other.h5", "/data")
        f["dangling"] = h5py.SoftLink("/nowhere")
    return path


def write_netcdf_fill_off(path: Path, *, edge_chunk: bool) -> Path:
    """A netCDF4 file written with fill off whose variable ``short`` has 4 of 10 records.

    With ``edge_chunk`` its chunks hold 3 records, so the second stored chunk reaches past
    the 4 records; otherwise they hold 2.
    """
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.set_fill_off()
        nc.createDimension("t", None)
        nc.createDimension("x", 2)
        chunk = 3 if edge_chunk else 2
        short = nc.createVariable("short", "f4", ("t", "x"), chunksizes=(chunk, 2), zlib=True)
        long = nc.createVariable("long", "i2", ("t", "x"), chunksizes=(5, 2))
        long[:10] = 1
        short[:4] = 7
    return path


def write_netcdf_fill_off_fill_attribute(path: Path) -> Path:
    """A netCDF4 file written with fill off whose record variable ``short`` has a ``_FillValue``
    of -5 and 2 of the 4 records of ``long``: netCDF reads its records past the extent as the
    default fill (-32767), since fill off leaves HDF5 no fill value to take."""
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.set_fill_off()
        nc.createDimension("t", None)
        nc.createDimension("x", 3)
        long = nc.createVariable("long", "f8", ("t", "x"), chunksizes=(2, 3))
        long[:4] = 1.0
        short = nc.createVariable("short", "i2", ("t", "x"), chunksizes=(2, 3), fill_value=-5)
        short[:2] = 3
    return path


def write_netcdf_fill_off_unwritten(path: Path) -> Path:
    """A netCDF4 file written with fill off and variables with chunks never written: ``chunked``
    (the first of its 4 chunks written), ``contiguous`` (never written) and ``scalar`` (never
    written). netCDF reads them as whatever its buffer held."""
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.set_fill_off()
        nc.createDimension("x", 10)
        chunked = nc.createVariable("chunked", "f4", ("x",), chunksizes=(3,))
        chunked[:3] = 1.0
        nc.createVariable("contiguous", "i4", ("x",), contiguous=True)
        nc.createVariable("scalar", "i2", ())
        written = nc.createVariable("written", "i4", ("x",), chunksizes=(4,))
        written[:] = np.arange(10)
    return path


def write_hdf5_fill_never(path: Path) -> Path:
    """``sparse``: ten int32 in chunks of four with fill value 9 and fill time never, of which
    the first chunk was written; h5py reads the other chunks as zeros (HDF5 leaves its
    zero-filled buffer as it was)."""
    with h5py.File(path, "w") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((4,))
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
        dcpl.set_fill_value(np.array(9, "i4"))
        space = h5py.h5s.create_simple((10,))
        sparse = h5py.h5d.create(f.id, b"sparse", h5py.h5t.STD_I32LE, space, dcpl=dcpl)
        h5py.Dataset(sparse)[:4] = 1
    return path


def write_hdf5_undefined_fill(path: Path) -> Path:
    """Datasets whose fill value is undefined (``H5D_FILL_VALUE_UNDEFINED``), as old writers left.

    h5py always passes a value to ``H5Pset_fill_value``; a NULL one, which undefines it, goes
    through ctypes to the HDF5 library h5py itself loaded. Each dataset holds ten int32 values
    in chunks of four (``contiguous*``: in one block) of which the first ``written`` (in the
    name) were written; ``never_*`` datasets have fill time never.
    """
    set_fill_value = _h5py_hdf5_library().H5Pset_fill_value
    set_fill_value.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    with h5py.File(path, "w") as f:
        for name, chunked, written, fill_never in UNDEFINED_FILL_DATASETS:
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            if chunked:
                dcpl.set_chunk((4,))
            if fill_never:
                dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
            assert set_fill_value(dcpl.id, h5py.h5t.NATIVE_INT32.id, None) >= 0
            space = h5py.h5s.create_simple((10,))
            dataset = h5py.Dataset(
                h5py.h5d.create(f.id, name.encode(), h5py.h5t.NATIVE_INT32, space, dcpl=dcpl)
            )
            if written:
                dataset[:written] = np.arange(written) + 1
            dataset.attrs["units"] = "m"
    return path


#: (name, chunked, values written, fill time never) of :func:`write_hdf5_undefined_fill`.
UNDEFINED_FILL_DATASETS = [
    ("chunked_10", True, 10, False),
    ("chunked_3", True, 3, False),
    ("chunked_0", True, 0, False),
    ("contiguous_10", False, 10, False),
    ("contiguous_0", False, 0, False),
    ("never_chunked_10", True, 10, True),
    ("never_chunked_3", True, 3, True),
]


#: The filters of each dataset :func:`write_hdf5_unfiltered_edges` writes, in pipeline order.
UNFILTERED_EDGE_DATASETS: dict[str, tuple[str, ...]] = {
    "deflate": ("deflate",),
    "shuffle_deflate": ("shuffle", "deflate"),
    "shuffle": ("shuffle",),
}


def write_hdf5_unfiltered_edges(path: Path, *, option: bool = True) -> Path:
    """105 x 77 float32 values in chunks of 20 x 20 through each pipeline of
    :data:`UNFILTERED_EDGE_DATASETS`, created with ``H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS``
    (unless not ``option``): HDF5 stores the partial chunks of the last row and column of
    chunks unfiltered, their filter masks 0 all the same. h5py has no call for the option; it
    goes through ctypes to the HDF5 library h5py loaded. ``zeros`` holds zeros, shuffled alone
    and without the option: what a shuffle stores of them is what it got."""
    set_chunk_opts = _h5py_hdf5_library().H5Pset_chunk_opts
    set_chunk_opts.argtypes = [ctypes.c_int64, ctypes.c_uint]
    values = np.arange(105 * 77, dtype="<f4").reshape(105, 77) / 7
    with h5py.File(path, "w", libver="latest") as f:  # the option needs layout version 4
        for name, filters in [*UNFILTERED_EDGE_DATASETS.items(), ("zeros", ("shuffle",))]:
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk((20, 20))
            for name_of_filter in filters:
                getattr(
                    dcpl, {"shuffle": "set_shuffle", "deflate": "set_deflate"}[name_of_filter]
                )()
            if option and name != "zeros":
                assert set_chunk_opts(dcpl.id, 2) >= 0  # H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS
            space = h5py.h5s.create_simple(values.shape)
            dataset = h5py.h5d.create(f.id, name.encode(), h5py.h5t.IEEE_F32LE, space, dcpl=dcpl)
            data = np.zeros_like(values) if name == "zeros" else values
            dataset.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
    return path


def _h5py_hdf5_library() -> ctypes.CDLL:
    # h5py's wheels bundle the library under h5py.libs; loading the same file again returns
    # the handle h5py uses, so the identifiers h5py hands out are valid there.
    bundled = sorted((Path(h5py.__file__).parent.parent / "h5py.libs").glob("libhdf5-*.so*"))
    return ctypes.CDLL(str(bundled[0]) if bundled else ctypes.util.find_library("hdf5"))


def write_hdf5_broken_scales(path: Path) -> Path:
    """Datasets whose ``DIMENSION_LIST`` points at a deleted dataset or at one not a scale.

    ``deleted``: axis 0 on scale ``x``, axis 1 on a scale deleted afterwards (HDF5's
    ``H5DSiterate_scales`` fails on it). ``not_a_scale``: axis 1 listed on plain dataset
    ``plain`` by rewriting the attribute, as tools that copy attributes leave it.
    """
    with h5py.File(path, "w") as f:
        x = f.create_dataset("x", data=np.arange(4.0))
        x.make_scale("x")
        y = f.create_dataset("y", data=np.arange(3.0))
        y.make_scale("y")
        deleted = f.create_dataset("deleted", data=np.arange(12.0).reshape(4, 3))
        deleted.dims[0].attach_scale(x)
        deleted.dims[1].attach_scale(y)
        plain = f.create_dataset("plain", data=np.arange(3.0))
        listed = f.create_dataset("not_a_scale", data=np.arange(12).reshape(4, 3))
        references = np.empty(2, dtype=object)
        references[0] = np.array([x.ref], dtype=h5py.ref_dtype)
        references[1] = np.array([plain.ref], dtype=h5py.ref_dtype)
        listed.attrs.create("DIMENSION_LIST", references, dtype=h5py.vlen_dtype(h5py.ref_dtype))
        del f["y"]
    return path


def write_hdf5_malformed_dimension_lists(path: Path) -> Path:
    """Datasets whose ``DIMENSION_LIST`` is not what HDF5's dimension scale API reads.

    ``integers`` and ``text`` hold numbers or text instead of references (``H5DSiterate_scales``
    reads them as heap addresses and crashes), ``short`` lists one axis of two (HDF5 reads the
    second axis's entry from memory it never wrote). ``listed`` is attached to ``x`` properly.
    """
    with h5py.File(path, "w") as f:
        x = f.create_dataset("x", data=np.arange(3.0))
        x.make_scale("x")
        listed = f.create_dataset("listed", data=np.arange(3.0) * 2)
        listed.dims[0].attach_scale(x)
        f.create_dataset("integers", data=np.arange(3.0) * 3).attrs["DIMENSION_LIST"] = [7, 8]
        f.create_dataset("text", data=np.arange(3.0) * 4).attrs["DIMENSION_LIST"] = "x"
        short = f.create_dataset("short", data=np.arange(6.0).reshape(3, 2))
        references = np.empty(1, dtype=object)
        references[0] = np.array([x.ref], dtype=h5py.ref_dtype)
        short.attrs.create("DIMENSION_LIST", references, dtype=h5py.vlen_dtype(h5py.ref_dtype))
    return path


def write_hdf5_fill_attributes(path: Path) -> Path:
    """Datasets whose ``_FillValue`` attribute is not one value of their type (as h5py lets any
    attribute be written), and ``whole``, whose float ``_FillValue`` 5.0 an integer holds.

    netCDF4 masks both values of ``two``, and nothing in ``fraction``, ``text`` or ``record``
    (a compound value).
    """
    fills = {
        "two": np.array([5, 6], "i4"),
        "fraction": np.float64(5.5),
        "text": "abc",
        "record": np.array((5, 6.0), dtype=[("a", "i4"), ("b", "f8")]),
    }
    with h5py.File(path, "w") as f:
        for name, fill in {**fills, "whole": np.float64(5.0)}.items():
            dataset = f.create_dataset(name, data=np.arange(2000, dtype="i4"), chunks=(100,))
            dataset.attrs["_FillValue"] = fill
    return path
