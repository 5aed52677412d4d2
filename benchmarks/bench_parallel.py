"""Parallel parsing: ``open_virtual_mfdataset`` files/s per executor against the number of files.

Small netCDF4 files (the netCDF4 library; three float32 variables of one time step on a 32 x 64
grid, zlib and shuffle, as ``bench_files.write_many`` writes them) are opened with each
library's ``open_virtual_mfdataset`` (parser given, dimension coordinates loaded, combined by
coordinates, the same combine options for both) with each executor:

- ``serial``;
- ``threads``: a thread pool with one thread per core;
- ``processes``: a ``forkserver`` process pool with one process per core, virtualstac's
  ``parallel=True``;
- ``cluster``: a ``dask.distributed.LocalCluster`` of one single-threaded worker process per
  core, passed as ``parallel=client`` (VirtualiZarr: its ``get_executor()``).

Every measurement runs in a fresh process. Pools and clusters are started and warmed (each
worker imports the library and opens one file) before the clock starts, as a long-lived
session would have them. Rounds alternate the libraries and the best is kept, since the machine's
load changes over a run.

What is timed, the same for every executor: the one ``open_virtual_mfdataset`` call, from the
list of URLs to the combined virtual dataset (parsing, sending results back, combining), with
the executor already started and warm. Ours joins each batch of files in the worker that
parsed it and combines the batches; VirtualiZarr sends every file's dataset back and combines
them with xarray.

Run ``python benchmarks/bench_parallel.py [--quick] [--counts 100,300,1000]
[--executors serial,cluster] [--no-peer]``.
:func:`measure` returns the figures as a list of dicts (library, executor, files, files/s) for
plots; :func:`run` returns table rows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    Row,
    Series,
    peer_available,
    print_table,
    progress,
    run_worker,
    worker_main,
)
from bench_files import write_many
from bench_parsers import _mf_parser, _open_one, _registry, _worker_pid

SCRIPT = Path(__file__).resolve()
EXECUTORS = ("serial", "threads", "processes", "cluster")
LABELS = {
    "serial": "serial",
    "threads": "thread pool",
    "processes": "process pool (forkserver)",
    "cluster": "dask.distributed LocalCluster (processes)",
}
#: The figures of the last :func:`run`, for :func:`series`.
_FIGURES: list[dict[str, Any]] = []
COMBINE: dict[str, Any] = {
    "coords": "minimal",
    "compat": "override",
    "join": "exact",
    "combine_attrs": "drop_conflicts",
    "combine": "by_coords",
}


def _cores() -> int:
    return len(os.sched_getaffinity(0))


def _warm_up(lib: str, url: str) -> None:
    _open_one(lib, "netCDF4", url)


def _start(kind: str, lib: str, url: str) -> tuple[Any, Any]:
    """The ``parallel=`` value of an executor, started and warmed, and what to close after."""
    workers = _cores()
    if kind == "serial":
        return False, None
    if kind == "threads":
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(workers)
        return pool, pool
    if kind == "processes":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("forkserver"),
            initializer=_warm_up,
            initargs=(lib, url),
        )
        started: set[int] = set()
        while len(started) < workers:
            started.update(pool.map(_worker_pid, range(2 * workers)))
        return pool, pool
    if kind == "cluster":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = Client(cluster)
        client.run(_warm_up, lib, url)
        parallel = client if lib == "ours" else client.get_executor()
        return parallel, (client, cluster)
    raise ValueError(kind)


def _close(handle: Any) -> None:
    if handle is None:
        return
    if isinstance(handle, tuple):
        for part in handle:
            part.close()
    else:
        handle.shutdown()


def worker_mf(params: dict[str, Any]) -> dict[str, Any]:
    """Time one ``open_virtual_mfdataset`` of ``params["paths"]`` with one executor."""
    lib, kind = params["lib"], params["executor"]
    urls = [Path(p).as_uri() for p in params["paths"]]
    if lib == "ours":
        from virtualstac import open_virtual_mfdataset
    else:
        from virtualizarr import open_virtual_mfdataset
    options: dict[str, Any] = {"progress": False} if lib == "ours" else {}
    _open_one(lib, "netCDF4", urls[0])
    parallel, handle = _start(kind, lib, urls[0])
    try:
        start = time.perf_counter()
        combined = open_virtual_mfdataset(
            urls,
            parser=_mf_parser(lib, "netCDF4"),
            registry=_registry(lib, "file:///"),
            parallel=parallel,
            **COMBINE,
            **options,
        )
        seconds = time.perf_counter() - start
    finally:
        _close(handle)
    if combined.sizes["time"] != len(urls):
        raise AssertionError(f"combined {dict(combined.sizes)} from {len(urls)} files")
    return {"seconds": seconds, "files": len(urls)}


WORKERS = {"mf": worker_mf}


def measure(
    counts: tuple[int, ...] = (100, 300, 1000),
    rounds: int = 2,
    quick: bool = False,
    executors: tuple[str, ...] = EXECUTORS,
    peer: bool = True,
) -> list[dict[str, Any]]:
    """Files/s of every library and executor for each number of files, as plain dicts.

    Each dict: ``library`` (``"virtualstac"`` or ``"VirtualiZarr"``), ``executor`` (one of
    :data:`EXECUTORS`), ``workers``, ``files``, ``files_per_s`` (best of ``rounds``).
    """
    libs = ["ours", "vz"] if peer and peer_available() else ["ours"]
    figures = []
    with tempfile.TemporaryDirectory(prefix="virtualstac-bench-parallel-") as tmp:
        progress(f"writing {max(counts)} small netCDF4 files ...")
        paths = write_many(Path(tmp) / "files", "netCDF4", max(counts))
        for count in counts:
            for kind in executors:
                best: dict[str, float] = {}
                for _ in range(1 if quick else rounds):
                    for lib in libs:
                        params = {
                            "lib": lib,
                            "executor": kind,
                            "paths": [str(p) for p in paths[:count]],
                        }
                        result = run_worker(SCRIPT, "mf", params)
                        if result is None:
                            continue
                        rate = count / result["seconds"]
                        best[lib] = max(best.get(lib, 0.0), rate)
                        progress(f"{count} files, {kind}, {lib}: {rate:.0f} files/s")
                for lib, rate in best.items():
                    figures.append(
                        {
                            "library": "virtualstac" if lib == "ours" else "VirtualiZarr",
                            "executor": kind,
                            "workers": 1 if kind == "serial" else _cores(),
                            "files": count,
                            "files_per_s": rate,
                        }
                    )
        shutil.rmtree(Path(tmp) / "files")
    return figures


def rows_of(figures: list[dict[str, Any]]) -> list[Row]:
    """Table rows: files/s per executor and number of files, ours beside VirtualiZarr's, and
    each executor's speed-up over our serial rate."""
    rate = {(f["library"], f["executor"], f["files"]): f["files_per_s"] for f in figures}
    rows = []
    for count in sorted({f["files"] for f in figures}):
        serial = rate.get(("virtualstac", "serial", count))
        for kind in EXECUTORS:
            ours = rate.get(("virtualstac", kind, count))
            peer = rate.get(("VirtualiZarr", kind, count))
            if ours is None and peer is None:
                continue
            rows.append(
                Row(
                    f"{count} netCDF4: open_virtual_mfdataset, {LABELS[kind]}",
                    "files/s",
                    ours,
                    peer,
                    better="higher",
                    target=">= 4x" if kind == "serial" else "",
                )
            )
            if kind != "serial" and ours is not None and serial:
                target = {"processes": ">= 1.7x", "cluster": ">= 1.5x"}.get(kind, "")
                rows.append(
                    Row(
                        f"{count} netCDF4: {LABELS[kind]} / our serial",
                        "x",
                        ours / serial,
                        None,
                        better="higher",
                        target=target,
                        peer_name="-",
                    )
                )
    return rows


def run(
    quick: bool = False,
    counts: tuple[int, ...] | None = None,
    executors: tuple[str, ...] = EXECUTORS,
    peer: bool = True,
) -> list[Row]:
    """Measure (fewer files and one round with ``quick``) and return the table rows."""
    print(f"\nbench_parallel: open_virtual_mfdataset per executor, {_cores()} cores")
    counts = counts or ((30, 100) if quick else (100, 300, 1000))
    _FIGURES[:] = measure(counts, quick=quick, executors=executors, peer=peer)
    return rows_of(_FIGURES)


def series() -> list[Series]:
    """Files/s against the number of files, one line per library and executor, from the last
    :func:`run` (``run_all.py`` plots them)."""
    lines: dict[tuple[str, str], Series] = {}
    for figure in sorted(_FIGURES, key=lambda f: f["files"]):
        key = (figure["library"], figure["executor"])
        if key not in lines:
            workers = "" if figure["executor"] == "serial" else f" ({figure['workers']})"
            lines[key] = Series(
                plot="parallel parsing: open_virtual_mfdataset of small netCDF4 files",
                label=f"{figure['library']}, {LABELS[figure['executor']]}{workers}",
                x_label="files",
                y_label="files/s",
            )
        lines[key].points.append((figure["files"], figure["files_per_s"]))
    return list(lines.values())


def main() -> None:
    """Parse the options and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 and 100 files, one round")
    parser.add_argument("--counts", help="numbers of files, comma-separated (100,300,1000)")
    parser.add_argument(
        "--executors",
        default=",".join(EXECUTORS),
        help="executors, comma-separated, in the order they run (serial,threads,processes,"
        "cluster); on a busy machine, serial,cluster measures that ratio back to back",
    )
    parser.add_argument("--no-peer", action="store_true", help="measure virtualstac only")
    args = parser.parse_args()
    counts = tuple(int(c) for c in args.counts.split(",")) if args.counts else None
    executors = tuple(args.executors.split(","))
    if unknown := set(executors) - set(EXECUTORS):
        parser.error(f"unknown executors {sorted(unknown)}; choose from {', '.join(EXECUTORS)}")
    rows = run(quick=args.quick, counts=counts, executors=executors, peer=not args.no_peer)
    print_table("Parallel parsing (open_virtual_mfdataset)", rows, not peer_available())


if __name__ == "__main__":
    if not worker_main(WORKERS):
        main()
