"""open_virtual_dataset and open_virtual_mfdataset: options, combining, executors, progress."""

from __future__ import annotations

import functools
import multiprocessing
import pickle
import random
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import h5py
import netCDF4
import numpy as np
import pytest
import rasterio
import scipy.io
import xarray as xr
import zarr
from obstore.store import LocalStore

from faulty_servers import FaultyServer
from servers import S3Server
from virtualstac import (
    ManifestArray,
    NetworkOptions,
    open_virtual_dataset,
    open_virtual_datatree,
    open_virtual_mfdataset,
)
from virtualstac.demo import write_sample_archive
from virtualstac.errors import (
    IncompatibleArraysError,
    InvalidManifestError,
    NetworkError,
    SourceNotFoundError,
    UnregisteredURLError,
    UnsupportedIndexingError,
)
from virtualstac.parallel import (
    DaskDelayedExecutor,
    ForkingExecutorError,
    LithopsEagerFunctionExecutor,
    SerialExecutor,
)
from virtualstac.parsers import HDFParser
from virtualstac.storage.registry import ObjectStoreRegistry


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three daily netCDF4 files (zlib + shuffle, CF packing, time coordinates)."""
    return write_sample_archive(tmp_path_factory.mktemp("open") / "archive", days=3)


@pytest.fixture(scope="module")
def direct(archive: list[Path]) -> xr.Dataset:
    """The archive as netCDF4 and xarray read it."""
    with xr.open_mfdataset(archive, engine="netcdf4", combine="by_coords") as ds:
        return ds.load()


def read_back(virtual: xr.Dataset, registry: ObjectStoreRegistry) -> xr.Dataset:
    """Values of a virtual dataset, read through its references and CF-decoded."""
    return xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False).load()


def is_virtual(variable: xr.DataArray) -> bool:
    return isinstance(variable.data, ManifestArray)


# -- open_virtual_dataset: one file of each format -------------------------------------------


def netcdf4_file(directory: Path) -> tuple[Path, xr.Dataset]:
    path = write_sample_archive(directory, days=1)[0]
    with xr.open_dataset(path, engine="netcdf4") as ds:
        return path, ds.load()


def netcdf3_file(directory: Path) -> tuple[Path, xr.Dataset]:
    path = directory / "classic.nc"
    with scipy.io.netcdf_file(path, "w", version=2) as f:
        f.createDimension("time", None)
        f.createDimension("x", 4)
        time = f.createVariable("time", "f8", ("time",))
        time[:] = [0.0, 1.0, 2.0]
        time.units = "days since 2000-01-01"
        f.createVariable("x", "i4", ("x",))[:] = np.arange(4)
        f.createVariable("v", "f4", ("time", "x"))[:] = np.arange(12, dtype="f4").reshape(3, 4)
    with xr.open_dataset(path, engine="netcdf4") as ds:
        return path, ds.load()


def hdf5_file(directory: Path) -> tuple[Path, xr.Dataset]:
    path = directory / "plain.h5"
    with h5py.File(path, "w") as f:
        x = f.create_dataset("x", data=np.arange(6.0))
        x.make_scale("x")
        v = f.create_dataset("v", data=np.arange(30, dtype=">i4").reshape(5, 6), chunks=(2, 3))
        v.dims[1].attach_scale(x)
    with h5py.File(path) as f:
        expected = xr.Dataset(
            {"v": (("phony_dim_0", "x"), f["v"][()].astype("=i4"))},
            coords={"x": ("x", f["x"][()])},
        )
    return path, expected


def tiff_file(directory: Path) -> tuple[Path, xr.Dataset]:
    path = directory / "cog.tif"
    values = np.arange(3 * 64 * 96, dtype="uint16").reshape(3, 64, 96)
    transform = rasterio.transform.from_origin(500000.0, 4000000.0, 10.0, 10.0)
    with rasterio.open(
        path,
        "w",
        driver="COG",
        width=96,
        height=64,
        count=3,
        dtype="uint16",
        crs="EPSG:32633",
        transform=transform,
        compress="DEFLATE",
        blocksize=32,
    ) as dst:
        dst.write(values)
    with rasterio.open(path) as src:
        data = src.read()
    return path, xr.Dataset({"band_data": (("band", "y", "x"), data)})


def zarr_store(directory: Path) -> tuple[Path, xr.Dataset]:
    path = directory / "source.zarr"
    ds = xr.Dataset(
        {"v": (("y", "x"), np.arange(48, dtype="f8").reshape(6, 8))},
        coords={"y": np.arange(6), "x": np.arange(8)},
    )
    ds.to_zarr(path, zarr_format=3, consolidated=False, encoding={"v": {"chunks": (3, 4)}})
    return path, ds


FORMATS: dict[str, Callable[[Path], tuple[Path, xr.Dataset]]] = {
    "netcdf4": netcdf4_file,
    "netcdf3": netcdf3_file,
    "hdf5": hdf5_file,
    "tiff": tiff_file,
    "zarr": zarr_store,
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_the_format_is_detected_and_values_read_as_the_reference_reader(
    tmp_path: Path, name: str
) -> None:
    path, expected = FORMATS[name](tmp_path)
    vds = open_virtual_dataset(str(path))
    ours = read_back(vds, ObjectStoreRegistry.for_url(str(path)))
    for variable, values in expected.data_vars.items():
        assert is_virtual(vds[variable]), variable
        np.testing.assert_array_equal(ours[variable].values, values.values, strict=True)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_registry_of_a_store_rooted_at_the_directory_reads_every_format(
    tmp_path: Path, name: str
) -> None:
    path, expected = FORMATS[name](tmp_path)
    registry = ObjectStoreRegistry({tmp_path.as_uri(): LocalStore(prefix=tmp_path)})

    vds = open_virtual_dataset(str(path), registry=registry)
    ours = read_back(vds, registry)

    for variable, values in expected.data_vars.items():
        np.testing.assert_array_equal(ours[variable].values, values.values, strict=True)


def test_the_default_registry_reads_the_files_directory_only(
    tmp_path: Path, archive: list[Path]
) -> None:
    path = str(archive[0])
    assert "t2m" in open_virtual_dataset(path)
    elsewhere = ObjectStoreRegistry.for_url(str(tmp_path / "other" / "x.nc"))
    with pytest.raises(UnregisteredURLError, match=r"temperature_2024-01-01\.nc"):
        open_virtual_dataset(path, registry=elsewhere)


def test_a_given_parser_is_used_with_its_options(archive: list[Path]) -> None:
    vds = open_virtual_dataset(str(archive[0]), parser=HDFParser(drop_variables=["lon"]))
    assert "lon" not in vds.variables and "t2m" in vds


def test_dimension_coordinates_are_loaded_by_default(archive: list[Path]) -> None:
    vds = open_virtual_dataset(str(archive[0]))
    assert set(vds.indexes) == {"time", "lat", "lon"}
    assert not any(is_virtual(vds[name]) for name in ("time", "lat", "lon"))
    assert is_virtual(vds["t2m"])


def test_no_loadable_variables_keeps_everything_virtual(archive: list[Path]) -> None:
    vds = open_virtual_dataset(str(archive[0]), loadable_variables=[])
    assert all(is_virtual(variable) for variable in vds.variables.values())
    assert not vds.indexes


def test_loaded_variables_are_cf_decoded_like_netcdf4(archive: list[Path]) -> None:
    vds = open_virtual_dataset(str(archive[0]), loadable_variables=["t2m", "time"])
    assert not is_virtual(vds["t2m"]) and is_virtual(vds["lat"])
    with xr.open_dataset(archive[0], engine="netcdf4") as reference:
        xr.testing.assert_identical(vds["t2m"].variable, reference["t2m"].variable.load())
        xr.testing.assert_identical(vds["time"], reference["time"].load())


def test_a_loaded_fixed_length_string_coordinate_reads_as_text_once_stored(
    tmp_path: Path,
) -> None:
    # HDF5 strings of more than a byte are text (as netCDF4 reads them), loaded or stored again.
    path = tmp_path / "stations.h5"
    with h5py.File(path, "w") as f:
        station = f.create_dataset("station", data=np.array([b"abc", b"de", b"f"], "S3"))
        station.make_scale("station")
        values = f.create_dataset("v", data=np.arange(3.0))
        values.dims[0].attach_scale(station)
    vds = open_virtual_dataset(str(path))
    stored = xr.open_zarr(vds.virtual.to_store(ObjectStoreRegistry.for_url(str(path))))
    with xr.open_dataset(path, engine="netcdf4") as reference:
        expected = reference["station"].values.tolist()
    assert expected == ["abc", "de", "f"]
    assert vds["station"].values.tolist() == stored["station"].values.tolist() == expected


def test_decode_times_false_keeps_numbers(archive: list[Path]) -> None:
    decoded = open_virtual_dataset(str(archive[0]))
    raw = open_virtual_dataset(str(archive[0]), decode_times=False)
    assert decoded["time"].dtype.kind == "M"
    assert raw["time"].dtype == np.float64
    assert raw["time"].attrs["units"] == "hours since 2024-01-01 00:00:00"
    np.testing.assert_array_equal(raw["time"].values, np.arange(24.0))


def test_dropped_variables_are_neither_parsed_nor_loaded(archive: list[Path]) -> None:
    vds = open_virtual_dataset(
        str(archive[0]), drop_variables=["lon", "t2m"], loadable_variables=["lon", "lat"]
    )
    assert set(vds.variables) == {"time", "lat"}


def test_group_selects_a_sub_group(tmp_path: Path) -> None:
    path = tmp_path / "groups.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 3)
        nc.createVariable("top", "i4", ("x",))[:] = [1, 2, 3]
        inner = nc.createGroup("inner")
        inner.createVariable("deep", "f8", ("x",), zlib=True)[:] = [0.5, 1.5, 2.5]
    vds = open_virtual_dataset(str(path), group="/inner")
    assert set(vds.data_vars) == {"deep"}
    values = read_back(vds, ObjectStoreRegistry.for_url(str(path)))["deep"].values
    np.testing.assert_array_equal(values, [0.5, 1.5, 2.5])


def test_a_group_the_file_lacks_is_named_with_the_groups_it_has(tmp_path: Path) -> None:
    path = tmp_path / "groups.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createGroup("inner")
    with pytest.raises(
        SourceNotFoundError, match=r"has no group 'outer'; its groups: '/', '/inner'"
    ):
        open_virtual_dataset(str(path), group="outer")


def test_loadable_variables_a_file_lacks_are_named_with_the_file(archive: list[Path]) -> None:
    with pytest.raises(KeyError, match=r"temperature_2024-01-01\.nc: loadable_variables \['t3m'\]"):
        open_virtual_dataset(archive[0], loadable_variables=["t3m"])


# -- open_virtual_mfdataset: combining ---------------------------------------------------------


def test_by_coords_orders_files_by_their_coordinates(
    archive: list[Path], direct: xr.Dataset
) -> None:
    shuffled = [str(p) for p in archive]
    random.Random(3).shuffle(shuffled)
    combined = open_virtual_mfdataset(shuffled, progress=False)
    assert combined.sizes == {"time": 72, "lat": 90, "lon": 180}
    assert is_virtual(combined["t2m"])
    xr.testing.assert_identical(
        read_back(combined, ObjectStoreRegistry.for_url(str(archive[0]))), direct
    )


def test_nested_concatenates_in_the_order_given(archive: list[Path], direct: xr.Dataset) -> None:
    combined = open_virtual_mfdataset(
        [str(p) for p in reversed(archive)],
        combine="nested",
        concat_dim="time",
        loadable_variables=[],
        progress=False,
    )
    values = read_back(combined, ObjectStoreRegistry.for_url(str(archive[0])))
    reversed_days = direct.isel(time=np.r_[48:72, 24:48, 0:24])
    xr.testing.assert_identical(values, reversed_days)


def write_tile(path: Path, hours: np.ndarray, rows: np.ndarray) -> Path:
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", hours.size)
        nc.createDimension("y", rows.size)
        nc.createDimension("x", 5)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "hours since 2024-01-01"
        time[:] = hours
        nc.createVariable("y", "i4", ("y",))[:] = rows
        field = nc.createVariable("field", "f4", ("time", "y", "x"), zlib=True)
        field[:] = hours[:, None, None] * 100 + rows[None, :, None] + np.arange(5) / 10
    return path


def test_nested_lists_combine_in_two_dimensions(tmp_path: Path) -> None:
    tiles = [
        [
            str(write_tile(tmp_path / f"t{t}_y{y}.nc", np.arange(2) + 2 * t, np.arange(3) + 3 * y))
            for y in range(2)
        ]
        for t in range(3)
    ]
    combined = open_virtual_mfdataset(
        tiles, combine="nested", concat_dim=["time", "y"], progress=False
    )
    assert combined.sizes == {"time": 6, "y": 6, "x": 5}
    with xr.open_mfdataset(
        tiles, engine="netcdf4", combine="nested", concat_dim=["time", "y"]
    ) as expected:
        xr.testing.assert_identical(
            read_back(combined, ObjectStoreRegistry.for_url(tiles[0][0])), expected.load()
        )


@pytest.mark.parametrize(
    ("one", "other", "options", "refusal", "said"),
    [
        # The TIFF has no v, and its x has 96 values where the netCDF file's has 4.
        (netcdf3_file, tiff_file, {}, UnsupportedIndexingError, "which references cannot hold"),
        # Two files without dimension coordinates: nothing orders them.
        (hdf5_file, hdf5_file, {}, IncompatibleArraysError, "cannot be combined by coord"),
        # The HDF5 file has no time and none of the netCDF file's variables to fill in.
        (
            netcdf4_file,
            hdf5_file,
            {"combine": "nested", "concat_dim": "time"},
            UnsupportedIndexingError,
            "which references cannot hold",
        ),
    ],
)
def test_files_that_do_not_combine_are_named_with_the_reason(
    tmp_path: Path,
    one: Callable[[Path], tuple[Path, xr.Dataset]],
    other: Callable[[Path], tuple[Path, xr.Dataset]],
    options: dict[str, Any],
    refusal: type[Exception],
    said: str,
) -> None:
    first, _ = one(tmp_path)
    second, _ = other(tmp_path)
    with pytest.raises(refusal) as refused:
        open_virtual_mfdataset([first, second], **options)
    message = str(refused.value)
    assert said in message
    assert first.name in message and second.name in message


def test_preprocess_runs_on_each_file_before_combining(archive: list[Path]) -> None:
    seen: list[int] = []

    def keep_t2m(ds: xr.Dataset) -> xr.Dataset:
        seen.append(ds.sizes["time"])
        return ds[["t2m"]]

    combined = open_virtual_mfdataset(
        [str(p) for p in archive], preprocess=keep_t2m, progress=False
    )
    assert seen == [24, 24, 24]
    assert set(combined.variables) == {"t2m", "time", "lat", "lon"}


def test_a_glob_pattern_opens_the_matching_files_in_order(
    archive: list[Path], direct: xr.Dataset
) -> None:
    pattern = str(archive[0].parent / "temperature_2024-01-0[12].nc")
    combined = open_virtual_mfdataset(pattern, combine="nested", concat_dim="time", progress=False)
    values = read_back(combined, ObjectStoreRegistry.for_url(str(archive[0])))
    xr.testing.assert_identical(values, direct.isel(time=slice(0, 48)))


def test_a_glob_in_a_bucket_lists_the_objects_once(
    s3_server: S3Server, archive: list[Path], direct: xr.Dataset
) -> None:
    bucket = s3_server.create_bucket()
    for path in archive:
        s3_server.upload(bucket, f"era/daily/{path.name}", path)
    s3_server.upload(bucket, "era/daily/README.txt", b"not a netCDF file")
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    combined = open_virtual_mfdataset(
        f"s3://{bucket}/era/daily/*.nc", registry=registry, progress=False
    )
    paths = combined["t2m"].data.manifest.path_table
    assert paths == tuple(f"s3://{bucket}/era/daily/{p.name}" for p in archive)
    xr.testing.assert_identical(read_back(combined, registry), direct)


def test_a_glob_in_a_bucket_that_drops_every_connection_fails_naming_it() -> None:
    quick = NetworkOptions(connect_timeout=1, timeout=1, max_retries=1, backoff=0.02)
    with FaultyServer({}, "drop") as dropping:
        registry = ObjectStoreRegistry(network=quick)
        registry.register(
            "s3://bucket",
            endpoint=dropping.url,
            region="us-east-1",
            skip_signature=True,
            client_options={"allow_http": True},
        )
        with pytest.raises(NetworkError, match=r"listing of 's3://bucket/era'.*2 attempts"):
            open_virtual_mfdataset("s3://bucket/era/*.nc", registry=registry, progress=False)


def test_a_file_outside_the_given_registry_is_refused(tmp_path: Path, archive: list[Path]) -> None:
    registry = ObjectStoreRegistry.for_url(str(tmp_path / "elsewhere" / "x.nc"))
    with pytest.raises(UnregisteredURLError):
        open_virtual_mfdataset([str(p) for p in archive], registry=registry, progress=False)


def test_files_in_several_directories_share_one_default_registry(
    tmp_path: Path, archive: list[Path]
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    moved = other / archive[2].name
    moved.write_bytes(archive[2].read_bytes())
    combined = open_virtual_mfdataset([str(archive[0]), str(moved)], progress=False)
    assert combined["t2m"].data.manifest.path_table == (archive[0].as_uri(), moved.as_uri())


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"combine": "by_rows"}, ValueError, "combine must be 'nested' or 'by_coords'"),
        ({"concat_dim": "time"}, ValueError, "concat_dim has no effect"),
        ({"paths": [["a.nc"], ["b.nc"]]}, ValueError, "nested lists of paths need combine"),
        ({"paths": "/nowhere/*.nc"}, SourceNotFoundError, "no files match '/nowhere/"),
        ({"paths": []}, SourceNotFoundError, "no files given"),
        ({"parallel": "threads"}, TypeError, "parallel must be False, True, 'dask'"),
    ],
)
def test_bad_arguments_are_refused_before_any_file_is_read(
    archive: list[Path], options: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments: dict[str, Any] = {"paths": [str(p) for p in archive], **options}
    with pytest.raises(error, match=message):
        open_virtual_mfdataset(arguments.pop("paths"), progress=False, **arguments)


# -- open_virtual_mfdataset: executors ---------------------------------------------------------


@pytest.fixture(scope="module")
def distributed_client() -> Iterator[Any]:
    """A real dask.distributed cluster, in this process (workers are threads)."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def process_pool() -> Executor:
    return ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver"))


EXECUTORS: dict[str, Callable[[], Any]] = {
    "False": lambda: False,
    "True": lambda: True,
    "dask": lambda: "dask",
    "serial": SerialExecutor,
    "dask-delayed": DaskDelayedExecutor,
    "threads": functools.partial(ThreadPoolExecutor, max_workers=2),
    "processes": process_pool,
    "lithops": functools.partial(
        LithopsEagerFunctionExecutor,
        config={
            "lithops": {"backend": "localhost", "storage": "localhost", "log_level": None},
            "localhost": {"runtime": sys.executable},
        },
    ),
}


@pytest.mark.parametrize("name", [*sorted(EXECUTORS), "distributed"])
def test_every_executor_gives_the_serial_result(
    archive: list[Path], name: str, request: pytest.FixtureRequest
) -> None:
    paths = [str(p) for p in archive]
    expected = open_virtual_mfdataset(paths, progress=False)
    if name == "distributed":
        parallel = request.getfixturevalue("distributed_client")
    else:
        parallel = EXECUTORS[name]()
    combined = open_virtual_mfdataset(paths, parallel=parallel, progress=False)
    if isinstance(parallel, Executor):
        parallel.shutdown()
    assert combined.virtual.to_kerchunk() == expected.virtual.to_kerchunk()
    xr.testing.assert_identical(combined.drop_vars("t2m"), expected.drop_vars("t2m"))


def test_a_process_pool_that_forks_is_refused_with_advice(archive: list[Path]) -> None:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        with pytest.raises(ForkingExecutorError, match=r"get_context\('forkserver'\)"):
            open_virtual_mfdataset([str(p) for p in archive], parallel=pool, progress=False)


def test_workers_ship_references_not_data(archive: list[Path]) -> None:
    vds = open_virtual_dataset(str(archive[0]))
    shipped = len(pickle.dumps(vds))
    # The file holds 24 x 90 x 180 packed temperatures (778 kB decoded to float64: 3 MB);
    # a worker sends back 16 references and the loaded time/lat/lon coordinates.
    coordinates = sum(vds[name].nbytes for name in ("time", "lat", "lon"))
    assert shipped < coordinates + 4096
    assert shipped < archive[0].stat().st_size / 50


def test_progress_is_reported_on_stderr(
    archive: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    open_virtual_mfdataset([str(p) for p in archive], progress=True)
    assert "virtualizing: 3/3" in capsys.readouterr().err
    open_virtual_mfdataset([str(p) for p in archive])  # off by default in the API
    assert capsys.readouterr().err == ""


def test_a_group_that_is_no_dataset_is_named_with_the_file(tmp_path: Path) -> None:
    # zarr-python writes no _ARRAY_DIMENSIONS, so xarray cannot name the array's dimensions.
    path = tmp_path / "unnamed.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=2)
    group.create_group("inner").create_array("v", data=np.arange(4))
    message = rf"{path.as_uri()}: group '/inner': variable 'v': array metadata needs a name"
    with pytest.raises(InvalidManifestError, match=message):
        open_virtual_datatree(str(path))
