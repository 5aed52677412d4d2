"""Parser benchmarks: per-file parse cost and ``open_virtual_mfdataset`` throughput vs peers.

Files are written by the formats' own writers into a temporary directory:

- ``COG``: rasterio/GDAL's COG driver, 2048 x 2048 uint16, 4 bands, 512 x 512 tiles, deflate,
  nodata 0, UTM georeferencing, two overviews (1024 and 512), band-interleaved;
- ``netCDF4``: the netCDF4 library, three float32 variables (time 24, lat 361, lon 720) in
  (1, 181, 360) chunks with zlib level 4 and shuffle, time/lat/lon coordinates, CF attributes;
- ``HDF5``: h5py, two groups of two float32 datasets (24, 512, 512) in (1, 128, 128) chunks with
  gzip and shuffle, attributes, no netCDF conventions;
- ``netCDF3 classic``: the netCDF4 library (``NETCDF3_CLASSIC``), the netCDF4 file's variables
  without a record dimension;
- ``netCDF3 record``: the same with ``time`` unlimited, so every variable is a record variable.

**Per file**, each library parses each file in a fresh process: once locally to warm up, once
over HTTP from nginx (uvicorn where nginx is missing) on loopback (started as
``tests/servers.py`` starts it; its access log gives the requests and bytes of that parse),
then the best of several parses over HTTP and of the local file (``file://``). Peers:
VirtualiZarr's ``HDFParser`` and ``NetCDF3Parser``, and virtual-tiff's ``VirtualTIFF`` (Rust,
async-tiff) for the COG, each reading through its own obstore registry.

**Many files**: 300 small netCDF4, 300 netCDF3 (record dimension) and 300 small COGs, opened
with each library's ``open_virtual_mfdataset`` (parser given, dimension coordinates loaded,
combined by coordinates, or along a new ``time`` dimension for the COGs, with the same combine
options for both), serially, with a thread pool, a process pool and dask.

Run ``python benchmarks/bench_parsers.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from _common import (
    Row,
    format_bytes,
    peer_available,
    print_table,
    progress,
    run_worker,
    worker_main,
)

SCRIPT = Path(__file__).resolve()
TESTS = SCRIPT.parent.parent / "tests"
LIBS = ("ours", "vz")
MB = 1e6


# -- the files -----------------------------------------------------------------------------


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


# -- the libraries -------------------------------------------------------------------------


def _fmt_parser(lib: str, fmt: str) -> Any:
    """The parser each library uses for a format."""
    if lib == "ours":
        from virtualstac.parsers import HDFParser, NetCDF3Parser, TIFFParser

        if fmt == "COG":
            return TIFFParser()
        return NetCDF3Parser() if fmt.startswith("netCDF3") else HDFParser()
    if fmt == "COG":
        from virtual_tiff import VirtualTIFF

        return VirtualTIFF()
    from virtualizarr.parsers import HDFParser as PeerHDFParser
    from virtualizarr.parsers import NetCDF3Parser as PeerNetCDF3Parser

    return PeerNetCDF3Parser() if fmt.startswith("netCDF3") else PeerHDFParser()


def _registry(lib: str, prefix: str) -> Any:
    """Each library's registry allowing reads below ``prefix`` (``http://host:port`` or file)."""
    if lib == "ours":
        from virtualstac import ObjectStoreRegistry

        registry = ObjectStoreRegistry()
        registry.register(prefix)
        return registry
    from obspec_utils.registry import ObjectStoreRegistry as PeerRegistry
    from obstore.store import HTTPStore, LocalStore

    if prefix.startswith("file://"):
        return PeerRegistry({"file://": LocalStore()})
    return PeerRegistry({prefix: HTTPStore.from_url(prefix, client_options={"allow_http": True})})


# -- workers (each runs in a fresh process) ------------------------------------------------


def _log_lines(log: Path) -> list[str]:
    """The access log once the server has stopped appending to it (nginx logs after responding)."""
    text = log.read_text()
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        time.sleep(0.02)
        again = log.read_text()
        if again == text:
            break
        text = again
    return text.splitlines()


def _best_of(fn: Callable[[], Any], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return min(runs)


def worker_parse(params: dict[str, Any]) -> dict[str, Any]:
    """Parse one file over HTTP (requests and bytes from the server's log, then timed) and locally.

    A first, untimed parse of the local file pays for imports and lazy initialisation.
    """
    lib, fmt, repeat = params["lib"], params["fmt"], params["repeat"]
    parser = _fmt_parser(lib, fmt)
    local_url = Path(params["path"]).as_uri()
    local_registry = _registry(lib, "file:///")
    parser(local_url, local_registry)
    result: dict[str, Any] = {}
    if params.get("http_url"):
        url, log = params["http_url"], Path(params["log"])
        registry = _registry(lib, url.rsplit("/", 1)[0])
        served = "/" + url.split("/", 3)[3]
        seen = len(_log_lines(log))
        parser(url, registry)
        mine = [line.split("\t") for line in _log_lines(log)[seen:]]
        mine = [entry for entry in mine if entry[1] == served]
        result["requests"] = len(mine)
        result["bytes"] = sum(int(entry[4]) for entry in mine)
        result["http_best"] = _best_of(lambda: parser(url, registry), repeat)
    result["local_best"] = _best_of(lambda: parser(local_url, local_registry), repeat)
    return result


def _executor(kind: str, workers: int, lib: str, fmt: str, url: str) -> Any:
    """An executor, or the value each library's ``parallel=`` takes for it.

    A process pool is started and warmed before it is timed: each worker imports the library
    and opens one file, as the timing process did (the start-up costs about a second per pool,
    the same for both libraries, and would otherwise be most of what is measured).
    """
    if kind == "serial":
        return False
    if kind == "dask":
        return "dask"
    if kind == "threads":
        from concurrent.futures import ThreadPoolExecutor

        return ThreadPoolExecutor(max_workers=workers)
    if kind == "processes":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # forkserver: forking a process whose obstore runtime has threads can deadlock.
        pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("forkserver"),
            initializer=_warm_up,
            initargs=(lib, fmt, url),
        )
        started: set[int] = set()
        while len(started) < workers:
            started.update(pool.map(_worker_pid, range(2 * workers)))
        return pool
    raise ValueError(kind)


def _open_one(lib: str, fmt: str, url: str) -> Any:
    """Open one file with each library's ``open_virtual_dataset``, as ``worker_mf`` opens it."""
    if lib == "ours":
        from virtualstac import open_virtual_dataset
    else:
        from virtualizarr import open_virtual_dataset
    return open_virtual_dataset(
        url, parser=_mf_parser(lib, fmt), registry=_registry(lib, "file:///")
    )


def _warm_up(lib: str, fmt: str, url: str) -> None:
    """Process pool initializer: import the library and open one file."""
    _open_one(lib, fmt, url)


def _worker_pid(_: int) -> int:
    time.sleep(0.05)  # long enough for every worker to take a task
    return os.getpid()


def _mf_parser(lib: str, fmt: str) -> Any:
    """The parser of the many-files benchmark: for COGs, VirtualTIFF's full-resolution image only
    (one array, as our root group holds; all of its IFDs would clash in one dataset)."""
    if fmt == "COG" and lib == "vz":
        from virtual_tiff import VirtualTIFF

        return VirtualTIFF(ifd=0)
    return _fmt_parser(lib, fmt)


def worker_mf(params: dict[str, Any]) -> dict[str, Any]:
    """Time one ``open_virtual_mfdataset`` over all files of one kind with one executor.

    One file is opened first, untimed, so that imports and lazy initialisation are not counted.
    """
    lib, fmt, paths = params["lib"], params["fmt"], params["paths"]
    urls = [Path(p).as_uri() for p in paths]
    parser = _mf_parser(lib, fmt)
    registry = _registry(lib, "file:///")
    # The same combine options for both (each library's defaults differ).
    options: dict[str, Any] = {
        "coords": "minimal",
        "compat": "override",
        "join": "exact",
        "combine_attrs": "drop_conflicts",
    }
    if fmt == "COG":
        options.update(combine="nested", concat_dim="time")
    else:
        options.update(combine="by_coords")
    if lib == "ours":
        from virtualstac import open_virtual_mfdataset

        options["progress"] = False
    else:
        from virtualizarr import open_virtual_mfdataset
    _open_one(lib, fmt, urls[0])
    executor = _executor(params["executor"], params["workers"], lib, fmt, urls[0])
    start = time.perf_counter()
    combined = open_virtual_mfdataset(
        urls, parser=parser, registry=registry, parallel=executor, **options
    )
    seconds = time.perf_counter() - start
    if hasattr(executor, "shutdown"):
        executor.shutdown()
    return {
        "seconds": seconds,
        "files": len(urls),
        "sizes": {str(k): int(v) for k, v in combined.sizes.items()},
    }


WORKERS = {"parse": worker_parse, "mf": worker_mf}


# -- driver --------------------------------------------------------------------------------


def _start_http(workdir: Path) -> Any:
    """An HTTP server on loopback as the tests start it: nginx where installed, else uvicorn."""
    sys.path.insert(0, str(TESTS))
    try:
        from servers import NginxServer, UvicornServer, nginx_binary
    finally:
        sys.path.remove(str(TESTS))
    return (NginxServer if nginx_binary() is not None else UvicornServer).start(workdir)


def _peer_importable(lib: str, fmt: str) -> bool:
    import importlib.util

    if lib == "ours":
        return True
    if not peer_available():
        return False
    return fmt != "COG" or importlib.util.find_spec("virtual_tiff") is not None


def _peer_name(fmt: str) -> str:
    return "virtual-tiff" if fmt == "COG" else "VirtualiZarr"


def run_single(tmp: Path, quick: bool) -> list[Row]:
    """Per-file parse time, requests and bytes, over HTTP and locally."""
    repeat = 3 if quick else 10
    server = _start_http(tmp / "http")
    print(f"  HTTP figures: files served by {type(server).__name__}")
    rows: list[Row] = []
    try:
        for label, name, writer in SINGLE_FILES:
            directory = server.directory("single")
            path = directory / name
            progress(f"{label}: writing {name} ...")
            writer(path)
            progress(f"{label}: {format_bytes(path.stat().st_size)} on disk")
            results: dict[str, dict[str, Any] | None] = {}
            for lib in LIBS:
                if not _peer_importable(lib, label):
                    results[lib] = None
                    continue
                params: dict[str, Any] = {
                    "lib": lib,
                    "fmt": label,
                    "path": str(path),
                    "repeat": repeat,
                    "http_url": server.url_for(path),
                    "log": str(server.access_log),
                }
                result = run_worker(SCRIPT, "parse", params)
                results[lib] = result
                if result is not None:
                    who = "virtualstac" if lib == "ours" else _peer_name(label)
                    progress(
                        f"{label}: {who}: {json.dumps({k: round(v, 5) for k, v in result.items()})}"
                    )
            rows += _single_rows(label, results)
    finally:
        server.stop()
    return rows


def _single_rows(label: str, results: dict[str, dict[str, Any] | None]) -> list[Row]:
    def get(lib: str, key: str, scale: float = 1.0) -> float | None:
        result = results.get(lib)
        return None if result is None or key not in result else result[key] * scale

    peer = _peer_name(label)
    cog = label == "COG"
    return [
        Row(
            f"{label}: parse over HTTP (best)",
            "ms",
            get("ours", "http_best", 1e3),
            get("vz", "http_best", 1e3),
            target="on par" if cog else "",
            peer_name=peer,
        ),
        Row(
            f"{label}: parse a local file (best)",
            "ms",
            get("ours", "local_best", 1e3),
            get("vz", "local_best", 1e3),
            target="on par" if cog else "",
            peer_name=peer,
        ),
        Row(
            f"{label}: range requests per parse",
            "requests",
            get("ours", "requests"),
            get("vz", "requests"),
            target="<= 2" if cog else "",
            peer_name=peer,
        ),
        Row(
            f"{label}: bytes read per parse",
            "KiB",
            get("ours", "bytes", 1 / 1024),
            get("vz", "bytes", 1 / 1024),
            peer_name=peer,
        ),
    ]


#: (label, executor, workers) of the many-files benchmark.
EXECUTORS = (
    ("serial", "serial", 1),
    ("thread pool (4)", "threads", 4),
    ("process pool (2)", "processes", 2),
    ("dask.delayed", "dask", 0),
)


def run_many(tmp: Path, quick: bool) -> list[Row]:
    """``open_virtual_mfdataset`` throughput over many small files of each kind.

    Each measurement runs ``rounds`` times, the libraries taking turns, and the best is kept:
    the machine's load changes over a run, and taking turns exposes both libraries to it.
    """
    count, rounds = (30, 1) if quick else (300, 2)
    expected = {
        "netCDF4": {"time": count, "lat": 32, "lon": 64},
        "netCDF3": {"time": count, "lat": 32, "lon": 64},
        "COG": {"time": count, "band": 3, "y": 256, "x": 256},
    }
    rows: list[Row] = []
    for kind in ("netCDF4", "netCDF3", "COG"):
        progress(f"{kind}: writing {count} small files ...")
        paths = write_many(tmp / f"many-{kind}", kind, count)
        size = sum(p.stat().st_size for p in paths)
        progress(f"{kind}: {format_bytes(size)} on disk")
        for label, executor, workers in EXECUTORS:
            seconds: dict[str, list[float]] = {lib: [] for lib in LIBS}
            for _ in range(rounds):
                for lib in LIBS:
                    if not _peer_importable(lib, kind):
                        continue
                    params = {
                        "lib": lib,
                        "fmt": kind,
                        "paths": [str(p) for p in paths],
                        "executor": executor,
                        "workers": workers,
                    }
                    result = run_worker(SCRIPT, "mf", params)
                    if result is not None:
                        if result["sizes"] != expected[kind]:
                            print(f"  WARNING: {lib} combined {kind} files to {result['sizes']}")
                        seconds[lib].append(result["seconds"])
                        who = "virtualstac" if lib == "ours" else _peer_name(kind)
                        progress(
                            f"{kind} {label}: {who}: {count / result['seconds']:.0f} files/s "
                            f"({result['seconds']:.2f} s, combined {result['sizes']})"
                        )
            rate = {lib: count / min(runs) if runs else None for lib, runs in seconds.items()}
            rows.append(
                Row(
                    f"{count} {kind}: open_virtual_mfdataset, {label}",
                    "files/s",
                    rate["ours"],
                    rate["vz"],
                    better="higher",
                    target="" if kind == "COG" else ">= 3x",
                    peer_name=_peer_name(kind),
                )
            )
        shutil.rmtree(tmp / f"many-{kind}")
    return rows


def run(quick: bool = False) -> list[Row]:
    """Write the files, measure both benchmarks, return the comparison rows."""
    print("\nbench_parsers: per-file parse cost (HTTP from loopback, and local), then many files")
    with tempfile.TemporaryDirectory(prefix="virtualstac-bench-") as tmp:
        rows = run_single(Path(tmp), quick)
        rows += run_many(Path(tmp), quick)
    return rows


def main() -> None:
    """Parse ``--quick`` and print the parser comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 files instead of 300, 3 runs")
    args = parser.parse_args()
    rows = run(quick=args.quick)
    print_table("Parsers (per file, and open_virtual_mfdataset)", rows, not peer_available())


if __name__ == "__main__":
    if not worker_main(WORKERS):
        main()
