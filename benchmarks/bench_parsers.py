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

from _common import (
    Row,
    format_bytes,
    peer_available,
    print_table,
    progress,
    run_worker,
    worker_main,
)
from bench_files import SINGLE_FILES, write_many

SCRIPT = Path(__file__).resolve()
TESTS = SCRIPT.parent.parent / "tests"
LIBS = ("ours", "vz")
MB = 1e6


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
