"""Run every benchmark and print one summary table: virtualstac vs VirtualiZarr (and natives).

Usage::

    python benchmarks/run_all.py            # full sizes, about 8 minutes on 2 cores
    python benchmarks/run_all.py --quick    # small sizes, one run each (a smoke test)

Each figure is measured in a fresh subprocess of this Python; see benchmarks/README.md for what
every figure means. Nothing here asserts on timings: the script only prints.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version

import bench_kerchunk_open
import bench_manifest
import bench_parsers
import bench_requests
import bench_store_read
import bench_writers
from _common import Row, peer_available, print_table


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def main() -> None:
    """Run the manifest, read, parser, requests, writer and Kerchunk opening benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run each")
    args = parser.parse_args()

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
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    print("  " + ", ".join(f"{p} {_version(p)}" for p in packages))
    if not peer_available():
        print("  VirtualiZarr is not importable: only our figures are measured")
    start = time.perf_counter()
    rows: list[Row] = []
    sections: list[tuple[str, list[Row]]] = []
    for title, module in (
        ("Chunk manifests", bench_manifest),
        ("Read throughput (uncompressed MB per second)", bench_store_read),
        ("Parsers (per file, and open_virtual_mfdataset)", bench_parsers),
        ("Requests per open", bench_requests),
        ("Writers", bench_writers),
        ("Kerchunk opening", bench_kerchunk_open),
    ):
        section = module.run(quick=args.quick)
        sections.append((title, section))
        rows += section
    print("\n" + "=" * 30 + " summary " + "=" * 30)
    for title, section in sections:
        print_table(title, section, peer_skipped=not peer_available())
    mode = "quick" if args.quick else "full"
    print(f"\n{len(rows)} figures ({mode} run) in {time.perf_counter() - start:.0f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
