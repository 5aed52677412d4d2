"""100,000 files: publishing daily netCDF4 files to Icechunk stage by stage, beside VirtualiZarr.

Usage::

    python benchmarks/bench_scale.py                  # 1,000 and 10,000 files
    python benchmarks/bench_scale.py --files 100000   # the 100k run (about half an hour on 2 cores)
    python benchmarks/bench_scale.py --quick          # 200 and 1,000 files (a smoke test)
    python benchmarks/bench_scale.py --files 20000 --no-peer --no-growth  # ours, publish only

The archive is the typical one: one small netCDF4 file per day (``time`` of length 1, ``lat`` 32,
``lon`` 64, three zlib+shuffle float32 variables of one chunk each), concatenated along
``time``. Four real files are written by the netCDF4 library and hard-linked under as many
distinct names as needed (``day_000000.nc``, ...), so every file is a real file of its own
name and path, and the disk holds four. Each publish runs in a fresh process, through the public
API: list the directory, ``open_virtual_mfdataset(paths, combine="nested",
concat_dim="time", parallel=...)``, ``ds.virtual.to_icechunk(session.store)``,
``session.commit(...)``. VirtualiZarr runs the same pipeline (its ``open_virtual_mfdataset``
with its ``HDFParser``, ``ds.vz.to_icechunk``, the same commit) with the same executor, at
each size until one run exceeds its time budget (``--peer-budget``, 900 s by default); the
larger sizes are then skipped for it and the report says so.

Stages, each with its wall-clock seconds and the largest resident set size while it ran
(``VmHWM`` after resetting it with ``/proc/self/clear_refs`` at the stage's start):

- **listing**: the sorted paths of the directory (``Path.glob``);
- **parsing**: from the call of ``open_virtual_mfdataset`` until every file's virtual dataset is
  back in the client (marked by the first call of the combining function: xarray's
  ``_combine_nd``, or our ``join_partials``). Ours includes joining each batch of files in the
  worker that parsed it: the client receives one dataset per batch of up to 1,000 files;
- **combining**: the rest of ``open_virtual_mfdataset`` (``xr.combine_nested`` of the virtual
  datasets; ours: joining the batches);
- **writing**: ``to_icechunk`` into a writable session of a local repository;
- **committing**: ``session.commit``.

The combine growth is measured apart (``combine`` rows), where parsing does not drown it: four
files are parsed once, and copies of their virtual datasets renamed to distinct paths
(``ds.virtual.rename_paths``) are combined at 1,000, 10,000 and 100,000 datasets. The ratios
``time(10k) / time(1k)`` and ``time(100k) / time(10k)`` are about 10 for linear growth and
about 100 for quadratic growth.

:func:`run` returns the figures as rows; :func:`stage_series` and :func:`combine_series`
return them as series (number of files against seconds and peak RSS) for plots.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from _common import (
    Row,
    Series,
    format_bytes,
    peer_available,
    print_table,
    progress,
    reset_peak_rss,
    rss_bytes,
    run_worker,
    window_peak_rss_bytes,
    worker_main,
)
from bench_files import write_netcdf

SIZES = (1_000, 10_000)
QUICK_SIZES = (200, 1_000)
COMBINE_SIZES = (1_000, 10_000, 100_000)
QUICK_COMBINE_SIZES = (1_000, 10_000)
REAL_FILES = 4
STAGES = ("listing", "parsing", "combining", "writing", "committing")
RSS_LIMIT = 2 * 1024**3

__all__ = ["combine_series", "make_archive", "run", "stage_series"]


# -- the archive ---------------------------------------------------------------------------


def make_archive(directory: Path, count: int) -> Path:
    """``count`` daily netCDF4 files in ``directory`` (hard links to four real files)."""
    files = directory / f"days_{count}"
    if files.is_dir() and sum(1 for _ in files.iterdir()) == count:
        return files
    shutil.rmtree(files, ignore_errors=True)
    files.mkdir(parents=True)
    real = directory / "real"
    real.mkdir(exist_ok=True)
    originals = []
    for day in range(REAL_FILES):
        path = real / f"day_{day}.nc"
        if not path.exists():
            write_netcdf(
                path,
                fmt="NETCDF4",
                times=np.array([24.0 * day]),
                nlat=32,
                nlon=64,
                chunks=(1, 32, 64),
            )
        originals.append(path)
    for i in range(count):
        os.link(originals[i % REAL_FILES], files / f"day_{i:06d}.nc")
    return files


# -- workers (each runs in a fresh process) ------------------------------------------------


class _Stages:
    """Seconds and peak RSS of consecutive stages of one process."""

    def __init__(self) -> None:
        self.figures: dict[str, dict[str, float]] = {}
        self.current = ""
        self._start = 0.0

    def start(self, name: str) -> None:
        self.current = name
        reset_peak_rss()
        self._start = time.perf_counter()

    def stop(self) -> None:
        seconds = time.perf_counter() - self._start
        self.figures[self.current] = {
            "seconds": seconds,
            "peak_rss": window_peak_rss_bytes(),
            "rss_after": rss_bytes(),
        }


def _registry(lib: str) -> Any:
    if lib == "ours":
        from virtualstac import ObjectStoreRegistry

        registry = ObjectStoreRegistry()
        registry.register("file:///")
        return registry
    from obspec_utils.registry import ObjectStoreRegistry as PeerRegistry
    from obstore.store import LocalStore

    return PeerRegistry({"file://": LocalStore()})


def _parser(lib: str) -> Any:
    if lib == "ours":
        from virtualstac.parsers import HDFParser

        return HDFParser()
    from virtualizarr.parsers import HDFParser as PeerHDFParser

    return PeerHDFParser()


def _warm_up(lib: str, url: str) -> None:
    """Process pool initializer: import the library and open one file."""
    _open_one(lib, url)


def _open_one(lib: str, url: str) -> Any:
    if lib == "ours":
        from virtualstac import open_virtual_dataset
    else:
        from virtualizarr import open_virtual_dataset
    return open_virtual_dataset(url, parser=_parser(lib), registry=_registry(lib))


def _executor(kind: str, lib: str, url: str) -> Any:
    """What ``parallel=`` gets: ``False``, ``"dask"`` or a warmed forkserver process pool."""
    if kind == "serial":
        return False
    if kind == "dask":
        return "dask"
    from concurrent.futures import ProcessPoolExecutor

    # forkserver: forking a process whose obstore runtime has threads can deadlock.
    return ProcessPoolExecutor(
        max_workers=os.cpu_count() or 1,
        mp_context=multiprocessing.get_context("forkserver"),
        initializer=_warm_up,
        initargs=(lib, url),
    )


def _repository(lib: str, directory: Path) -> Any:
    """A fresh local repository whose virtual chunk container covers the archive's files."""
    import icechunk

    config = icechunk.RepositoryConfig.default()
    prefix = directory.as_uri() + "/"
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(directory)))
    )
    credentials = icechunk.containers_credentials(
        {prefix: icechunk.credentials.LocalFileSystemAccess}
    )
    storage = icechunk.local_filesystem_storage(str(directory.parent / f"repo_{lib}"))
    return icechunk.Repository.create(
        storage, config=config, authorize_virtual_chunk_access=credentials
    )


def worker_publish(params: dict[str, Any]) -> dict[str, Any]:
    """Publish every file of ``params["directory"]`` to a new local Icechunk repository."""
    lib, directory = params["lib"], Path(params["directory"])
    if lib == "ours":
        from virtualstac import open_virtual_mfdataset
    else:
        from virtualizarr import open_virtual_mfdataset
    shutil.rmtree(directory.parent / f"repo_{lib}", ignore_errors=True)
    first = directory / "day_000000.nc"
    _open_one(lib, first.as_uri())
    executor = _executor(params["executor"], lib, first.as_uri())
    stages = _Stages()

    stages.start("listing")
    paths = sorted(directory.glob("*.nc"))
    stages.stop()

    # VirtualiZarr parses every file, then combines them through xarray's ``_combine_nd``. Ours
    # joins each batch of files in the worker that parsed it (that is parsing), then joins the
    # batches (``join_partials``), or for files that are not alike combines them one by one
    # through ``_combine_nd``. The first of them to be called ends parsing.
    import xarray.structure.combine as xarray_combine

    def marking(function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if "combining" not in stages.figures and stages.current != "combining":
                stages.stop()
                stages.start("combining")
            return function(*args, **kwargs)

        return call

    xarray_combine._combine_nd = marking(xarray_combine._combine_nd)
    if lib == "ours":
        import virtualstac.xarray.mfdataset as ours_open

        ours_open.join_partials = marking(ours_open.join_partials)
    # Our progress bar (stderr) shows how far a long run is; VirtualiZarr has none.
    options: dict[str, Any] = {"progress": True} if lib == "ours" else {}
    stages.start("parsing")
    combined = open_virtual_mfdataset(
        paths,
        parser=_parser(lib),
        registry=_registry(lib),
        combine="nested",
        concat_dim="time",
        parallel=executor,
        coords="minimal",
        compat="override",
        join="exact",
        combine_attrs="drop_conflicts",
        **options,
    )
    stages.stop()
    if hasattr(executor, "shutdown"):
        executor.shutdown()
    sizes = {str(k): int(v) for k, v in combined.sizes.items()}
    # Both libraries' ManifestArrays expose their manifest's chunk grid.
    references = sum(
        int(np.prod(variable.data.manifest.shape_chunk_grid))
        for variable in combined.variables.values()
        if hasattr(variable.data, "manifest")
    )

    repository = _repository(lib, directory)
    session = repository.writable_session("main")
    stages.start("writing")
    if lib == "ours":
        combined.virtual.to_icechunk(session.store)
    else:
        combined.vz.to_icechunk(session.store)
    stages.stop()
    stages.start("committing")
    session.commit(f"{len(paths)} daily files")
    stages.stop()
    return {
        "files": len(paths),
        "sizes": sizes,
        "references": references,
        "stages": stages.figures,
    }


def _renamed(lib: str, template: Any, url: str) -> Any:
    """A copy of a parsed file's virtual dataset whose references name ``url``."""
    if lib == "ours":
        data = {name: template[name].data.rename_paths(url) for name in template.data_vars}
        return template.copy(data=data)
    return template.vz.rename_paths(url)


def worker_combine(params: dict[str, Any]) -> dict[str, Any]:
    """Combine ``count`` renamed copies of four parsed files' virtual datasets along time.

    Each library combines as its ``open_virtual_mfdataset(combine="nested")`` does: ours
    through ``concat_virtual`` (one concatenation per variable when the datasets are alike),
    VirtualiZarr through ``xr.combine_nested``.
    """
    import xarray as xr

    lib, directory, count = params["lib"], Path(params["directory"]), params["count"]
    parsed = [_open_one(lib, (directory / f"day_{i:06d}.nc").as_uri()) for i in range(REAL_FILES)]
    datasets = [
        _renamed(lib, parsed[i % REAL_FILES], (directory / f"copy_{i:06d}.nc").as_uri())
        for i in range(count)
    ]
    gc.collect()
    reset_peak_rss()
    start = time.perf_counter()
    if lib == "ours":
        from virtualstac.xarray.combine import concat_virtual

        combined = concat_virtual(datasets, "time")
    else:
        combined = xr.combine_nested(
            datasets,
            concat_dim="time",
            coords="minimal",
            compat="override",
            join="exact",
            combine_attrs="drop_conflicts",
        )
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "peak_rss": window_peak_rss_bytes(),
        "time": int(combined.sizes["time"]),
    }


WORKERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "publish": worker_publish,
    "combine": worker_combine,
}


# -- driver --------------------------------------------------------------------------------

#: Results of the last :func:`run`: (library, files) -> the publish worker's result or None.
_PUBLISHED: dict[tuple[str, int], dict[str, Any] | None] = {}
#: (library, datasets) -> the combine worker's result or None.
_COMBINED: dict[tuple[str, int], dict[str, Any] | None] = {}


def stage_series(lib: str = "ours") -> dict[str, list[tuple[int, float, int]]]:
    """Per stage, (files, seconds, peak RSS bytes) of the last :func:`run`, for plots."""
    series: dict[str, list[tuple[int, float, int]]] = {stage: [] for stage in STAGES}
    for (who, files), result in sorted(_PUBLISHED.items()):
        if who != lib or result is None:
            continue
        for stage in STAGES:
            figures = result["stages"][stage]
            series[stage].append((files, figures["seconds"], int(figures["peak_rss"])))
    return series


def combine_series(lib: str = "ours") -> list[tuple[int, float, int]]:
    """(datasets, seconds, peak RSS bytes) of the combine growth of the last :func:`run`."""
    return [
        (count, result["seconds"], int(result["peak_rss"]))
        for (who, count), result in sorted(_COMBINED.items())
        if who == lib and result is not None
    ]


def series() -> list[Series]:
    """The plots of the last :func:`run`: the client's peak RSS against the number of
    references published, and combining time against the number of datasets."""
    names = {"ours": "virtualstac", "vz": "VirtualiZarr"}
    lines: list[Series] = []
    for lib, name in names.items():
        published = [
            (result["references"], max(f["peak_rss"] for f in result["stages"].values()))
            for (who, _), result in sorted(_PUBLISHED.items())
            if who == lib and result is not None
        ]
        if published:
            lines.append(
                Series(
                    "publishing small netCDF4 files to Icechunk: peak RSS",
                    name,
                    "references",
                    "peak RSS (MiB)",
                    [(refs, rss / 2**20) for refs, rss in published],
                )
            )
        combined = combine_series(lib)
        if combined:
            lines.append(
                Series(
                    "combining N virtual datasets along time",
                    name,
                    "datasets",
                    "seconds",
                    [(count, seconds) for count, seconds, _ in combined],
                )
            )
    return lines


def _print_stages(lib: str, files: int, result: dict[str, Any]) -> None:
    total = sum(result["stages"][s]["seconds"] for s in STAGES)
    peak = max(result["stages"][s]["peak_rss"] for s in STAGES)
    print(f"    {lib}, {files:,} files: {total:.1f} s, peak RSS {format_bytes(peak)}")
    for stage in STAGES:
        figures = result["stages"][stage]
        print(
            f"      {stage:<11} {figures['seconds']:8.2f} s   "
            f"peak RSS {format_bytes(figures['peak_rss']):>10}"
        )


def _publish_rows(sizes: Sequence[int]) -> list[Row]:
    rows = []
    for files in sizes:
        ours, peer = _PUBLISHED.get(("ours", files)), _PUBLISHED.get(("vz", files))
        for stage in STAGES:
            rows.append(
                Row(
                    f"{files:,} files: {stage}",
                    "s",
                    ours["stages"][stage]["seconds"] if ours else None,
                    peer["stages"][stage]["seconds"] if peer else None,
                )
            )

        def peak(result: dict[str, Any] | None) -> float | None:
            if result is None:
                return None
            return max(result["stages"][s]["peak_rss"] for s in STAGES) / 2**20

        def total(result: dict[str, Any] | None) -> float | None:
            if result is None:
                return None
            return float(sum(result["stages"][s]["seconds"] for s in STAGES))

        rows.append(Row(f"{files:,} files: publish total", "s", total(ours), total(peer)))
        rows.append(
            Row(
                f"{files:,} files: client peak RSS", "MiB", peak(ours), peak(peer), target="<= 2048"
            )
        )
    return rows


def _combine_rows(sizes: Sequence[int]) -> list[Row]:
    rows = []
    for count in sizes:
        ours, peer = _COMBINED.get(("ours", count)), _COMBINED.get(("vz", count))
        rows.append(
            Row(
                f"combine {count:,} virtual datasets",
                "s",
                ours["seconds"] if ours else None,
                peer["seconds"] if peer else None,
            )
        )
    for small, large in itertools.pairwise(sizes):
        ratios = []
        for lib in ("ours", "vz"):
            a, b = _COMBINED.get((lib, small)), _COMBINED.get((lib, large))
            ratios.append(b["seconds"] / a["seconds"] if a and b else None)
        rows.append(
            Row(
                f"combine growth time({large:,}) / time({small:,})",
                "ratio",
                ratios[0],
                ratios[1],
                target=f"~{large / small:.0f} (linear)",
            )
        )
    return rows


def run(
    quick: bool = False,
    files: Sequence[int] | None = None,
    executor: str = "processes",
    peer_budget: float = 900.0,
    workdir: Path | None = None,
    growth: bool = True,
    peer: bool = True,
) -> list[Row]:
    """Publish archives of each size (ours, then VirtualiZarr's unless not ``peer``), then
    measure combine growth (unless not ``growth``)."""
    sizes = tuple(files) if files else (QUICK_SIZES if quick else SIZES)
    combine_sizes = (QUICK_COMBINE_SIZES if quick else COMBINE_SIZES) if growth else ()
    script = Path(__file__)
    own_tmp = workdir is None
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale_")) if workdir is None else workdir
    tmp.mkdir(parents=True, exist_ok=True)
    _PUBLISHED.clear()
    _COMBINED.clear()
    libs = ("ours", "vz") if peer and peer_available() else ("ours",)
    try:
        peer_stopped = False
        for count in sizes:
            progress(f"writing {count:,} daily files (hard links to {REAL_FILES} real ones)")
            directory = make_archive(tmp, count)
            for lib in libs:
                if lib == "vz" and peer_stopped:
                    print(f"    VirtualiZarr: {count:,} files skipped (a smaller run timed out)")
                    _PUBLISHED[(lib, count)] = None
                    continue
                progress(f"publish {count:,} files, {lib}, parallel={executor}")
                timeout = peer_budget if lib == "vz" else 4 * 3600
                params = {"lib": lib, "directory": str(directory), "executor": executor}
                result = run_worker(script, "publish", params, timeout=timeout)
                _PUBLISHED[(lib, count)] = result
                if result is None:
                    peer_stopped = peer_stopped or lib == "vz"
                    continue
                _print_stages(lib, count, result)
            shutil.rmtree(directory)
        directory = make_archive(tmp, REAL_FILES) if combine_sizes else tmp
        for count in combine_sizes:
            for lib in libs:
                progress(f"combine {count:,} virtual datasets, {lib}")
                params = {"lib": lib, "directory": str(directory), "count": count}
                timeout = peer_budget if lib == "vz" else 3600
                _COMBINED[(lib, count)] = run_worker(script, "combine", params, timeout=timeout)
    finally:
        if own_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return _publish_rows(sizes) + _combine_rows(combine_sizes)


def main() -> None:
    """Parse the command line, run, and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 and 1,000 files")
    parser.add_argument(
        "--files", type=int, nargs="+", help="archive sizes to publish (default 1000 10000)"
    )
    parser.add_argument(
        "--parallel",
        choices=("processes", "serial", "dask"),
        default="processes",
        help="what parallel= gets (default: a forkserver process pool, one worker per core)",
    )
    parser.add_argument(
        "--peer-budget",
        type=float,
        default=900.0,
        help="seconds VirtualiZarr gets per run; larger sizes are skipped past it",
    )
    parser.add_argument("--workdir", type=Path, help="keep the files here (default: a temp dir)")
    parser.add_argument(
        "--no-growth", action="store_true", help="skip the combine growth (1k/10k/100k datasets)"
    )
    parser.add_argument("--no-peer", action="store_true", help="publish with virtualstac only")
    args = parser.parse_args()
    rows = run(
        args.quick,
        args.files,
        args.parallel,
        args.peer_budget,
        args.workdir,
        growth=not args.no_growth,
        peer=not args.no_peer,
    )
    print_table(
        "100k files: publish to Icechunk by stage, and combine growth", rows, not peer_available()
    )
    peak = max(
        (r.ours for r in rows if r.figure.endswith("client peak RSS") and r.ours), default=0.0
    )
    if peak * 2**20 > RSS_LIMIT:
        print(f"  WARNING: the client's peak RSS ({peak:,.0f} MiB) is over 2 GiB")


if __name__ == "__main__":
    if not worker_main(WORKERS):
        sys.exit(main())
