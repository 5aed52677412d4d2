"""The main job, on local sample data: ``python -m virtualstac.demo`` (``make demo``).

It writes a small archive of daily netCDF4 files with the netCDF4 library, virtualizes each
file by reading only its chunk index, combines the virtual datasets along time, and reads the
combined dataset through a ManifestStore, checking every value against netCDF4 itself.
No network is used.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xarray as xr

import virtualstac.xarray  # noqa: F401 - registers the .virtual accessor
from virtualstac.demo.samples import write_sample_archive, write_sample_scenes
from virtualstac.manifests import ManifestArray
from virtualstac.parsers.hdf import HDFParser
from virtualstac.storage.registry import ObjectStoreRegistry

__all__ = ["main", "write_sample_archive", "write_sample_scenes"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo and print a short summary; return a process exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, default=Path("demo-output"))
    parser.add_argument("--days", type=int, default=4)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    files = write_sample_archive(args.output / "archive", args.days)
    print(f"wrote {len(files)} netCDF4 files to {args.output / 'archive'}")

    registry = ObjectStoreRegistry.for_url(str(files[0].resolve()))
    hdf = HDFParser()
    parse_started = time.perf_counter()
    datasets = [hdf(str(path.resolve()), registry).to_virtual_dataset() for path in files]
    parse_seconds = time.perf_counter() - parse_started
    combined = xr.concat(datasets, dim="time", coords="minimal", compat="override")
    references = sum(
        len(var.data.manifest)
        for var in combined.variables.values()
        if isinstance(var.data, ManifestArray)
    )
    print(
        f"virtualized them in {parse_seconds:.2f} s: {references} chunk references, "
        f"{combined.virtual.nbytes:,} bytes of references and coordinates in memory"
    )

    virtual = xr.open_zarr(combined.virtual.to_store(registry))
    with xr.open_mfdataset(files, engine="netcdf4", combine="by_coords") as direct:
        identical = bool(virtual["t2m"].load().equals(direct["t2m"].load()))
        mean_virtual = float(virtual["t2m"].mean())
        mean_direct = float(direct["t2m"].mean())
    print(
        f"mean t2m through the virtual store: {mean_virtual:.4f} K; read directly with netCDF4: "
        f"{mean_direct:.4f} K; all values identical: {identical}"
    )
    print(f"done in {time.perf_counter() - started:.2f} s")
    return 0 if identical and np.isclose(mean_virtual, mean_direct) else 1
