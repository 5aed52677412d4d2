"""Read throughput through the ManifestStore vs native readers and VirtualiZarr, on one file.

Two HDF5 (netCDF4-compatible) files are written with h5py into a temporary directory:

- ``compressed``: float32 (50, 1000, 1000) in 5,000 chunks of (1, 100, 100) = 40 kB each,
  shuffle + zlib level 4 (like a typical netCDF4 archive), ~110 MB on disk;
- ``raw``: float32 (50, 1024, 1024) in 3,200 uncompressed chunks of 64 KiB, where I/O and
  per-chunk overhead dominate.

Each reader runs in a fresh subprocess, after the parent has read the file once so the page
cache is warm. Throughput is the uncompressed array size divided by the wall time of reading the
whole variable into one numpy array (best of several reads; the first read is also reported).
Every reader's result is checked against h5py's (CRC32 of the bytes).

Readers:

- ``virtualstac``: a ManifestArray built by hand from h5py's chunk index (``chunk_iter``) with
  codecs ``bytes`` + ``numcodecs.shuffle`` + ``numcodecs.zlib``, served by our ManifestStore and
  read with ``xr.open_zarr(store, chunks=None)[var].values``;
- ``VirtualiZarr``: its ``HDFParser()(url, registry)`` ManifestStore, read the same way
  (``zarr_format=3``);
- both also with ``zarr.config.set({"async.concurrency": 64})``, and through xarray's default
  dask-backed ``xr.open_zarr(store)``;
- ``h5py``: ``dset[...]``; ``netCDF4``: ``var[:]`` with auto mask/scale off.

Run ``python benchmarks/bench_store_read.py [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from _common import (
    Row,
    peer_available,
    print_table,
    progress,
    run_worker,
    worker_main,
)

SCRIPT = Path(__file__).resolve()
VAR = "t2m"
DIMS = ("time", "y", "x")
MB = 1e6


# -- the files -----------------------------------------------------------------------------


def write_file(
    path: Path, shape: tuple[int, int, int], chunks: tuple[int, int, int], *, compressed: bool
) -> None:
    """Write a netCDF4-compatible HDF5 file: one float32 variable plus dimension scales.

    The values are a smooth field plus noise rounded to 0.01, so zlib compresses them about as
    well as real model output (roughly 2:1 with shuffle).
    """
    import h5py

    rng = np.random.default_rng(0)
    ny, nx = shape[1], shape[2]
    field = (
        np.sin(np.linspace(0, 6, ny))[:, None] * np.cos(np.linspace(0, 6, nx))[None, :] * 20 + 280
    ).astype(np.float32)
    options: dict[str, Any] = (
        {"compression": "gzip", "compression_opts": 4, "shuffle": True} if compressed else {}
    )
    with h5py.File(path, "w") as f:
        dset = f.create_dataset(VAR, shape=shape, dtype="<f4", chunks=chunks, **options)
        for i in range(shape[0]):
            noise = rng.normal(0, 0.5, size=field.shape).astype(np.float32).round(2)
            dset[i] = field + noise
        for axis, (name, size) in enumerate(zip(DIMS, shape, strict=True)):
            scale = f.create_dataset(name, data=np.arange(size, dtype="f8"))
            scale.make_scale(name)
            dset.dims[axis].attach_scale(scale)


def warm_page_cache(path: Path) -> None:
    """Read the whole file once so that every reader finds it in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


# -- readers (each runs in a fresh process) ------------------------------------------------


def _ours_store(path: str) -> Any:
    """Our ManifestStore over the variable, built from h5py's own chunk index."""
    import h5py

    from virtualstac import (
        ChunkManifest,
        ManifestArray,
        ManifestGroup,
        ManifestStore,
        ObjectStoreRegistry,
    )
    from virtualstac.manifests.metadata import create_v3_array_metadata

    url = Path(path).as_uri()
    with h5py.File(path, "r") as f:
        dset = f[VAR]
        chunks = dset.chunks
        grid = tuple(-(-s // c) for s, c in zip(dset.shape, chunks, strict=True))
        codes = np.zeros(grid, dtype=np.int64)  # 0: missing, 1: the file
        offsets = np.zeros(grid, dtype=np.uint64)
        lengths = np.zeros(grid, dtype=np.uint64)

        def add(info: Any) -> None:
            index = tuple(o // c for o, c in zip(info.chunk_offset, chunks, strict=True))
            codes[index] = 1
            offsets[index] = info.byte_offset
            lengths[index] = info.size

        dset.id.chunk_iter(add)
        codecs: list[dict[str, Any]] = [{"name": "bytes", "configuration": {"endian": "little"}}]
        if dset.shuffle:
            codecs.append({"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}})
        if dset.compression == "gzip":
            level = dset.compression_opts
            codecs.append({"name": "numcodecs.zlib", "configuration": {"level": level}})
        metadata = create_v3_array_metadata(
            shape=dset.shape,
            data_type=dset.dtype,
            chunk_shape=chunks,
            fill_value=dset.fillvalue,
            codecs=codecs,
            dimension_names=DIMS,
        )
    manifest = ChunkManifest.from_path_table(
        path_table=["", url], path_codes=codes, offsets=offsets, lengths=lengths
    )
    group = ManifestGroup(arrays={VAR: ManifestArray(metadata, manifest)})
    return ManifestStore(group, registry=ObjectStoreRegistry.for_url(url))


def _vz_store(path: str) -> Any:
    """VirtualiZarr's ManifestStore from its HDFParser."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr.parsers import HDFParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    return HDFParser()(Path(path).as_uri(), registry)


@contextlib.contextmanager
def _zarr_concurrency(concurrency: int | None) -> Iterator[None]:
    if concurrency is None:
        yield
        return
    import zarr

    with zarr.config.set({"async.concurrency": concurrency}):
        yield


def worker_read(params: dict[str, Any]) -> dict[str, Any]:
    """Read the whole variable ``repeat`` times with one reader; time each read."""
    reader, path, repeat = params["reader"], params["path"], params["repeat"]
    start = time.perf_counter()
    opener: Any
    if reader in ("ours", "vz"):
        import xarray as xr

        store = _ours_store(path) if reader == "ours" else _vz_store(path)
        kwargs: dict[str, Any] = {"consolidated": False}
        if reader == "vz":
            kwargs["zarr_format"] = 3  # VirtualiZarr's store cannot be auto-detected (#783)
        if not params.get("dask"):
            kwargs["chunks"] = None

        def opener() -> Any:
            return xr.open_zarr(store, **kwargs)[VAR]

        def read(handle: Any) -> np.ndarray[Any, Any]:
            return np.asarray(handle.values)

    elif reader == "h5py":
        import h5py

        def opener() -> Any:
            return h5py.File(path, "r")

        def read(handle: Any) -> np.ndarray[Any, Any]:
            return np.asarray(handle[VAR][...])

    elif reader == "netcdf4":
        import netCDF4

        def opener() -> Any:
            return netCDF4.Dataset(path)

        def read(handle: Any) -> np.ndarray[Any, Any]:
            var = handle[VAR]
            var.set_auto_maskandscale(False)
            return np.asarray(var[:])

    else:
        raise ValueError(f"unknown reader {reader!r}")
    setup = time.perf_counter() - start
    runs: list[float] = []
    crc = 0
    nbytes = 0
    with _zarr_concurrency(params.get("concurrency")):
        for i in range(repeat):
            handle = opener()  # a fresh handle each time: xarray caches loaded values
            start = time.perf_counter()
            values = read(handle)
            runs.append(time.perf_counter() - start)
            if i == 0:
                crc = zlib.crc32(np.ascontiguousarray(values).view(np.uint8).ravel())
                nbytes = values.nbytes
            if hasattr(handle, "close"):
                handle.close()
            del values, handle
    return {
        "setup": setup,
        "first": runs[0],
        "best": min(runs),
        "runs": [round(r, 4) for r in runs],
        "crc": crc,
        "nbytes": nbytes,
    }


WORKERS = {"read": worker_read}


# -- driver --------------------------------------------------------------------------------

# (label, reader, options); peers use the same options as ours.
READERS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("h5py dset[...]", "h5py", {}),
    ("netCDF4 var[:]", "netcdf4", {}),
    ("store, open_zarr(chunks=None)", "ours", {}),
    ("store, open_zarr(chunks=None)", "vz", {}),
    ("store, async.concurrency=64", "ours", {"concurrency": 64}),
    ("store, async.concurrency=64", "vz", {"concurrency": 64}),
    ("store, open_zarr() with dask", "ours", {"dask": True}),
    ("store, open_zarr() with dask", "vz", {"dask": True}),
)


def _measure_file(
    kind: str, path: Path, repeat: int, dask_repeat: int, with_peer: bool
) -> dict[tuple[str, str], dict[str, Any] | None]:
    results: dict[tuple[str, str], dict[str, Any] | None] = {}
    for label, reader, options in READERS:
        if reader == "vz" and not with_peer:
            continue
        who = {"ours": "virtualstac", "vz": "VirtualiZarr"}.get(reader, reader)
        progress(f"{kind}: {who} {label} ...")
        n = dask_repeat if options.get("dask") else repeat
        result = run_worker(
            SCRIPT, "read", {"reader": reader, "path": str(path), "repeat": n, **options}
        )
        results[(label, reader)] = result
        if result is not None:
            mbps = result["nbytes"] / MB / result["best"]
            progress(
                f"{kind}: {who} {label}: {mbps:.0f} MB/s (best of {n}; runs {result['runs']} s; "
                f"peak RSS {result['peak_rss'] / MB:.0f} MB)"
            )
    reference = results.get(("h5py dset[...]", "h5py"))
    for (label, reader), result in results.items():
        if result is not None and reference is not None and result["crc"] != reference["crc"]:
            print(f"  WARNING: {reader} {label} read different values than h5py on {kind}")
    return results


def _rows(
    kind: str, results: dict[tuple[str, str], dict[str, Any] | None], size_note: str
) -> list[Row]:
    def mbps(label: str, reader: str, key: str = "best") -> float | None:
        result = results.get((label, reader))
        return None if result is None else result["nbytes"] / MB / result[key]

    rows: list[Row] = []
    for label, reader, _ in READERS:
        if reader != "ours":
            continue
        rows.append(
            Row(
                f"{kind} {size_note}: {label}",
                "MB/s",
                mbps(label, "ours"),
                mbps(label, "vz"),
                better="higher",
            )
        )
    base = "store, open_zarr(chunks=None)"
    ours = mbps(base, "ours")
    for native, reader in (("h5py dset[...]", "h5py"), ("netCDF4 var[:]", "netcdf4")):
        rows.append(
            Row(
                f"{kind}: our store (chunks=None) vs native",
                "MB/s",
                ours,
                mbps(native, reader),
                better="higher",
                peer_name=native,
            )
        )
    peak = results.get((base, "ours")), results.get((base, "vz"))
    rows.append(
        Row(
            f"{kind}: peak RSS of the read process (chunks=None)",
            "MB",
            None if peak[0] is None else peak[0]["peak_rss"] / MB,
            None if peak[1] is None else peak[1]["peak_rss"] / MB,
        )
    )
    return rows


def run(quick: bool = False) -> list[Row]:
    """Write the two files, run every reader on each, return the comparison rows."""
    with_peer = peer_available()
    frames = 4 if quick else 50
    repeat, dask_repeat = (3, 1) if quick else (3, 3)
    files = (
        ("zlib+shuffle", (frames, 1000, 1000), (1, 100, 100), True),
        ("raw", (frames, 1024, 1024), (1, 128, 128), False),
    )
    print(
        "\nbench_store_read: whole-variable reads, page cache warm; each reader in a fresh process"
    )
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="virtualstac-bench-") as tmp:
        for kind, shape, chunks, compressed in files:
            path = Path(tmp) / f"{kind.replace('+', '_')}.nc"
            progress(f"{kind}: writing {shape} float32 in {chunks} chunks ...")
            write_file(path, shape, chunks, compressed=compressed)
            n_chunks = int(np.prod([-(-s // c) for s, c in zip(shape, chunks, strict=True)]))
            size = int(np.prod(shape)) * 4
            progress(
                f"{kind}: {size / MB:.0f} MB of data, {n_chunks} chunks of "
                f"{int(np.prod(chunks)) * 4 / 1024:.0f} KiB, "
                f"{os.path.getsize(path) / MB:.0f} MB on disk"
            )
            warm_page_cache(path)
            results = _measure_file(kind, path, repeat, dask_repeat, with_peer)
            rows += _rows(kind, results, f"({size / MB:.0f} MB, {n_chunks} chunks)")
            path.unlink()
    return rows


def main() -> None:
    """Parse ``--quick`` and print the read-throughput comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller files (16 MB), fewer reads")
    args = parser.parse_args()
    rows = run(quick=args.quick)
    print_table("Read throughput (uncompressed MB per second)", rows, not peer_available())


if __name__ == "__main__":
    if not worker_main(WORKERS):
        main()
