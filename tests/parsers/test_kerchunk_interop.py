"""References written by kerchunk's own translators, opened with ``open_virtual_dataset`` and
loaded, against fsspec's reference file system read by xarray's Zarr engine.

Each test writes its sources with netCDF4 or tifffile, lets kerchunk (or tifffile) write the
references as users do, and asks virtualstac for every variable's values and attributes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import imagecodecs.numcodecs
import netCDF4
import numpy as np
import pytest
import tifffile
import xarray as xr
import zarr
from kerchunk_refs import hdf5_refs, kerchunk
from peer_reads import assert_same_dataset, loaded, through_fsspec

from servers import S3Server
from virtualstac import open_virtual_dataset
from virtualstac.errors import ChunkReadError, UnregisteredURLError
from virtualstac.parsers.zarr_v2 import V2MetadataError
from virtualstac.storage.registry import ObjectStoreRegistry

pytestmark = [
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


def saved(references: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(references))
    return path


def write_daily(path: Path, day: int) -> Path:
    """One day of a netCDF4 archive: CF time, packed and float data, strings, a sub-group."""
    rng = np.random.default_rng(day)
    with netCDF4.Dataset(path, "w") as ds:
        ds.title = "daily"
        ds.day = day
        ds.createDimension("time", None)
        ds.createDimension("lat", 6)
        ds.createDimension("lon", 8)
        time = ds.createVariable("time", "f8", ("time",))
        time.units = "hours since 2000-01-01"
        time.calendar = "standard"
        time[:] = 24.0 * day + np.arange(0, 24, 6)
        ds.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-50, 50, 6)
        ds.createVariable("lon", "f4", ("lon",))[:] = np.arange(8) * 45.0
        t2m = ds.createVariable(
            "t2m", "i2", ("time", "lat", "lon"), zlib=True, chunksizes=(1, 3, 8), fill_value=-999
        )
        t2m.scale_factor = 0.01
        t2m.add_offset = 280.0
        t2m.units = "K"
        t2m[:] = rng.normal(0, 5, (4, 6, 8))
        t2m[0, 0, 0] = np.ma.masked
        precip = ds.createVariable("precip", "f4", ("time", "lat", "lon"), fill_value=np.nan)
        precip[:] = rng.random((4, 6, 8))
        ds.createVariable("station", str, ("lat",))[:] = np.array(
            [f"st{i}" * (i + 1) for i in range(6)], dtype=object
        )
        ds.createVariable("crs", "i4", ())[...] = 4326
        ensemble = ds.createGroup("ensemble")
        ensemble.createDimension("member", 3)
        spread = ensemble.createVariable("spread", "f8", ("member", "lat"), zlib=True)
        spread.long_name = "ensemble spread"
        spread[:] = rng.random((3, 6))
    return path


@pytest.fixture(scope="module")
def daily(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    directory = tmp_path_factory.mktemp("daily")
    return [write_daily(directory / f"day{day}.nc", day) for day in range(3)]


def registry_of(directory: Path) -> ObjectStoreRegistry:
    registry = ObjectStoreRegistry()
    registry.register(directory.as_uri() + "/")
    return registry


# -- kerchunk.hdf ------------------------------------------------------------------------


@pytest.mark.parametrize("inline_threshold", [0, 200])
@pytest.mark.parametrize("vlen_encode", ["embed", "null"])
def test_single_hdf5_to_zarr_loads_as_fsspec_reads(
    daily: list[Path], tmp_path: Path, inline_threshold: int, vlen_encode: str
) -> None:
    refs = hdf5_refs(daily[0], inline_threshold=inline_threshold, vlen_encode=vlen_encode)
    path = saved(refs, tmp_path / "day0.json")
    registry = registry_of(daily[0].parent)
    registry.register(tmp_path.as_uri() + "/")
    # "embed" writes the strings into the references as JSON; "null" leaves them unreadable
    # (kerchunk drops the variable).
    assert ("station/.zarray" in refs["refs"]) == (vlen_encode == "embed")
    assert_same_dataset(loaded(path, registry), through_fsspec(refs))
    assert_same_dataset(
        loaded(path, registry, group="ensemble"), through_fsspec(refs, group="ensemble")
    )


@pytest.mark.parametrize("order", ["<", ">"])
def test_hdf5_compound_datasets_load_as_h5py_reads_them(tmp_path: Path, order: str) -> None:
    # kerchunk keeps a compound as a Zarr v2 structured dtype (vlen_encode="leave"); fields of
    # one byte order are one Zarr v3 structured array. Fields of both byte orders are not: the
    # error names the dataset, and the others open without it.
    records = np.dtype([("station", f"{order}i4"), ("level", f"{order}f8"), ("flag", "S2")])
    mixed = np.dtype([("station", "<i4"), ("level", ">f8")])
    source = tmp_path / "observations.h5"
    with h5py.File(source, "w") as f:
        values = [(1, 850.0, b"ok"), (2, 500.5, b""), (3, -1.5, b"x"), (4, 0.0, b"zz")]
        f.create_dataset("obs", data=np.array(values, dtype=records), chunks=(2,))
        f.create_dataset("mixed", data=np.array([(1, 2.0), (3, 4.0)], dtype=mixed))
        f.create_dataset("level", data=np.arange(4.0))
    refs = hdf5_refs(source, inline_threshold=0, vlen_encode="leave")
    assert isinstance(json.loads(refs["refs"]["obs/.zarray"])["dtype"], list)
    path = saved(refs, tmp_path / "observations.json")
    registry = registry_of(tmp_path)
    with pytest.raises(V2MetadataError, match=r"array 'mixed': structured dtype .* mixes"):
        open_virtual_dataset(str(path), registry=registry)
    virtual = open_virtual_dataset(str(path), registry=registry, drop_variables=["mixed"])
    ours = xr.open_zarr(virtual.virtual.to_store(registry), chunks=None)["obs"].values
    with h5py.File(source) as f:
        expected = f["obs"][...]
    assert ours.dtype.names == expected.dtype.names
    np.testing.assert_array_equal(ours, expected.astype(ours.dtype))


# -- kerchunk.netCDF3: record variables ----------------------------------------------------


@pytest.mark.parametrize("file_format", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET"])
@pytest.mark.parametrize("inline_threshold", [0, 100])
def test_netcdf3_record_variables_load_as_fsspec_reads(
    tmp_path: Path, file_format: str, inline_threshold: int
) -> None:
    # Several record variables of different sizes interleave in every record: each variable's
    # chunk of one record lies one record's size after the last.
    source = tmp_path / "records.nc"
    with netCDF4.Dataset(source, "w", format=file_format) as ds:
        ds.history = "records"
        ds.createDimension("time", None)
        ds.createDimension("y", 3)
        ds.createDimension("x", 5)
        time = ds.createVariable("time", "f8", ("time",))
        time.units = "days since 1990-01-01"
        time[:] = np.arange(7.0)
        counts = ds.createVariable("counts", "i2", ("time", "x"), fill_value=-1)
        counts.scale_factor = 0.5
        counts[:] = np.arange(35).reshape(7, 5)
        counts[1, 1] = np.ma.masked
        ds.createVariable("field", "f4", ("time", "y", "x"))[:] = np.arange(105.0).reshape(7, 3, 5)
        ds.createVariable("flag", "i1", ("time",))[:] = np.arange(7) - 3
        ds.createVariable("x", "f4", ("x",))[:] = np.arange(5.0) / 2
        ds.createVariable("level", "f8", ())[...] = 850.0
    refs = kerchunk("netCDF3").NetCDF3ToZarr(str(source), inline_threshold=inline_threshold)
    refs = refs.translate()
    path = saved(refs, tmp_path / "records.json")
    ours = loaded(path, registry_of(tmp_path))
    assert_same_dataset(ours, through_fsspec(refs))
    with xr.open_dataset(source, engine="netcdf4") as original:
        xr.testing.assert_identical(ours, original.load())


def test_kerchunk_references_past_the_end_of_a_netcdf3_file_raise_naming_the_chunk(
    tmp_path: Path,
) -> None:
    # With a single record variable netCDF-3 does not pad records to 4 bytes; kerchunk 0.2
    # counts records as if it did, and references 11 records of a file holding 7. fsspec
    # fails with a bare reshape error; virtualstac names the chunk and the file.
    source = tmp_path / "single.nc"
    with netCDF4.Dataset(source, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 5)
        ds.createVariable("b", "i1", ("time", "x"))[:] = np.arange(35).reshape(7, 5)
    refs = kerchunk("netCDF3").NetCDF3ToZarr(str(source), inline_threshold=0).translate()
    assert json.loads(refs["refs"]["b/.zarray"])["shape"] == [11, 5]
    path = saved(refs, tmp_path / "single.json")
    with pytest.raises(ChunkReadError, match=r"chunk 'b/c/7/0' .*single\.nc.* 0 of 5 bytes"):
        loaded(path, registry_of(tmp_path))
    # virtualstac's own parser reads the file as netCDF4 does.
    with xr.open_dataset(source, engine="netcdf4") as original:
        xr.testing.assert_identical(loaded(source, registry_of(tmp_path)), original.load())


# -- tifffile's own references ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "options"),
    [
        ((3, 64, 48), {"tile": (32, 16), "compression": "zlib", "planarconfig": "separate"}),
        ((64, 48, 3), {"tile": (16, 16), "photometric": "rgb"}),
        ((60, 40), {"rowsperstrip": 20, "compression": "lzw", "predictor": True}),
    ],
)
def test_tifffile_write_fsspec_root_arrays(
    tmp_path: Path, shape: tuple[int, ...], options: dict[str, Any]
) -> None:
    image = np.random.default_rng(3).integers(1, 60000, shape).astype("u2")
    tiff = tmp_path / "image.tif"
    tifffile.imwrite(tiff, image, **options)
    path = tmp_path / "image.json"
    with tifffile.TiffFile(tiff) as tif, tif.aszarr() as store:
        store.write_fsspec(str(path), url=tmp_path.as_uri())
    refs = json.loads(path.read_text())
    # A root array: xarray cannot open it as a dataset, zarr can, with imagecodecs' numcodecs
    # codecs registered (how any Zarr v2 reader of tifffile's references decodes them).
    imagecodecs.numcodecs.register_codecs()
    expected = zarr.open_array("reference://", mode="r", storage_options={"fo": refs})[...]
    np.testing.assert_array_equal(expected, image, strict=True)
    ours = loaded(path, registry_of(tmp_path))
    # tifffile writes fill_value 0, which xarray masks in v2 arrays: no pixel here is 0.
    np.testing.assert_array_equal(ours["image"].values, image.astype("f4"), strict=True)


# -- kerchunk.combine ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "combine",
    [
        pytest.param(
            {"concat_dims": ["time"], "coo_map": {"time": "cf:time"}, "identical_dims": ["lat"]},
            id="time-cf-coo_map",
        ),
        pytest.param(
            {"concat_dims": ["day"], "coo_map": {"day": "attr:day"}},
            id="new-dim-from-attribute",
        ),
        pytest.param({"concat_dims": ["time"]}, id="time"),
    ],
)
@pytest.mark.parametrize("inline_threshold", [0, 300])
def test_multi_zarr_to_zarr_loads_as_fsspec_reads(
    daily: list[Path], tmp_path: Path, combine: dict[str, Any], inline_threshold: int
) -> None:
    singles = [hdf5_refs(path, inline_threshold=inline_threshold) for path in daily]
    identical = {"lat", "lon"} | ({"time"} if "day" in combine["concat_dims"] else set())
    combine = {**combine, "identical_dims": sorted(identical)}
    translator = kerchunk("combine").MultiZarrToZarr(
        singles, inline_threshold=inline_threshold, remote_protocol="file", **combine
    )
    refs = translator.translate()
    if inline_threshold:  # the coordinates kerchunk combined live inside the references
        assert isinstance(refs["refs"]["lat/0"], str)
    path = saved(refs, tmp_path / "combined.json")
    registry = registry_of(daily[0].parent)
    registry.register(tmp_path.as_uri() + "/")
    expected = through_fsspec(refs)
    assert_same_dataset(loaded(path, registry), expected)
    # The same references as kerchunk's parquet, several record files per variable.
    parquet = tmp_path / "combined.parq"
    kerchunk("df").refs_to_dataframe(refs, str(parquet), record_size=4)
    assert len(list((parquet / "t2m").glob("refs.*.parq"))) > 2
    assert_same_dataset(loaded(parquet, registry), expected)


# -- URLs the references point to -------------------------------------------------------------


def test_s3_references_are_read_only_where_the_registry_allows(
    s3_server: S3Server, daily: list[Path], tmp_path: Path
) -> None:
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, "archive/day0.nc", daily[0])
    local = hdf5_refs(daily[0], inline_threshold=0)
    # As kerchunk writes them for the file opened through s3fs (fsspec then reads them with
    # its remote_options; virtualstac with what the registry holds for the bucket).
    refs = json.loads(json.dumps(local))
    for value in refs["refs"].values():
        if isinstance(value, list):
            value[0] = url
    path = saved(refs, tmp_path / "remote.json")
    with pytest.raises(UnregisteredURLError, match=rf"{url}.*registry\.register"):
        open_virtual_dataset(str(path))  # coordinates are loaded: their chunks are refused
    registry = registry_of(tmp_path)
    registry.register(f"s3://{bucket}/archive/", **s3_server.store_options)
    # The same bytes as fsspec reads them from the local copy (s3fs is not a test dependency).
    assert_same_dataset(loaded(path, registry), through_fsspec(local))
