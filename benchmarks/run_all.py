"""Run every benchmark, print one summary table (virtualstac vs VirtualiZarr and natives) and
write it with plots to ``benchmarks/results/``.

Usage::

    python benchmarks/run_all.py            # full sizes, writes benchmarks/results/
    python benchmarks/run_all.py --quick    # small sizes, one run each (a smoke test), writes
                                            # benchmarks/results/quick/ (not committed)
    python benchmarks/run_all.py --results DIR
    python benchmarks/run_all.py --only store_read,parsers   # some benchmarks (bench_NAME.py)

Each figure is measured in a fresh subprocess of this Python; see benchmarks/README.md for what
every figure means. Nothing here asserts on timings: the script only prints and writes.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import bench_kerchunk_open
import bench_manifest
import bench_parallel
import bench_parsers
import bench_requests
import bench_scale
import bench_store_read
import bench_writers
from _common import Row, Series, peer_available, print_table
from results import write_results

RESULTS = Path(__file__).resolve().parent / "results"


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def main() -> None:
    """Run the manifest, read, parser, requests, writer and Kerchunk opening benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run each")
    parser.add_argument(
        "--results",
        type=Path,
        help="directory for results.md and the plots (benchmarks/results/, quick/ with --quick)",
    )
    parser.add_argument(
        "--only",
        help="comma-separated benchmarks to run (manifest, store_read, parsers, requests, "
        "writers, kerchunk_open, parallel, scale); all by default",
    )
    args = parser.parse_args()
    results_dir = args.results or (RESULTS / "quick" if args.quick else RESULTS)

    import os

    packages = (
        "virtualstac",
        "virtualizarr",
        "virtual-tiff",
        "zarr",
        "xarray",
        "numpy",
        "h5py",
        "netCDF4",
        "icechunk",
        "kerchunk",
        "pyarrow",
        "fastparquet",
        "fsspec",
        "tifffile",
    )
    machine = f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs"
    versions = ", ".join(f"{p} {_version(p)}" for p in packages)
    print(machine)
    print("  " + versions)
    if not peer_available():
        print("  VirtualiZarr is not importable: only our figures are measured")
    start = time.perf_counter()
    rows: list[Row] = []
    sections: list[tuple[str, list[Row]]] = []
    series: list[Series] = []
    benchmarks = (
        ("Chunk manifests", bench_manifest),
        ("Read throughput (uncompressed MB per second)", bench_store_read),
        ("Parsers (per file, and open_virtual_mfdataset)", bench_parsers),
        ("Requests per open", bench_requests),
        ("Writers", bench_writers),
        ("Kerchunk opening", bench_kerchunk_open),
        ("Parallel parsing (open_virtual_mfdataset, files per second)", bench_parallel),
        ("Scale: publishing many files to Icechunk, combining many datasets", bench_scale),
    )
    if args.only:
        wanted = {f"bench_{name.strip()}" for name in args.only.split(",")}
        unknown = wanted - {module.__name__ for _, module in benchmarks}
        if unknown:
            parser.error(f"no such benchmark: {', '.join(sorted(unknown))}")
        benchmarks = tuple((t, m) for t, m in benchmarks if m.__name__ in wanted)
    for title, module in benchmarks:
        section = module.run(quick=args.quick)
        sections.append((title, section))
        rows += section
        # A module that measures figures against a varying quantity exposes them for the plots.
        if hasattr(module, "series"):
            series += module.series()
    print("\n" + "=" * 30 + " summary " + "=" * 30)
    for title, section in sections:
        print_table(title, section, peer_skipped=not peer_available())
    mode = ("quick" if args.quick else "full") + (f" (only {args.only})" if args.only else "")
    elapsed = time.perf_counter() - start
    print(f"\n{len(rows)} figures ({mode} run) in {elapsed:.0f} s")
    header = [
        f"{machine}; {time.strftime('%Y-%m-%d', time.gmtime())}; {mode} run, "
        f"{len(rows)} figures in {elapsed:.0f} s.",
        "",
        f"Versions: {versions}.",
    ]
    if not peer_available():
        header.append("VirtualiZarr was not importable: only our figures were measured.")
    for path in write_results(results_dir, sections, series, header=header):
        print(f"wrote {path}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
