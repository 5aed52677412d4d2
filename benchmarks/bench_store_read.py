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
  read with ``virtualstac.xarray.open_zarr_dataset(store, chunks=None)[var].values``: the
  ``xr.open_zarr`` virtualstac's front ends open stores with, whose basic selections skip
  zarr's per-chunk walk (``manifests/selection_reads.py``); also with plain ``xr.open_zarr``
  (``plain xr.open_zarr``: zarr walks the chunks, then our codec pipeline reads them);
- ``VirtualiZarr``: its ``HDFParser()(url, registry)`` ManifestStore, read the same way
  (``zarr_format=3``);
- both also with ``zarr.config.set({"async.concurrency": 64})``, through xarray's default
  dask-backed ``xr.open_zarr(store)`` (one task per source chunk), and with dask chunks of one
  whole time step (``chunks={"time": 1, "y": -1, "x": -1}``);
- ``Icechunk``: our references published to a local Icechunk repository (``write_icechunk``,
  committed before timing), read from a read-only session with ``chunks=None``: virtualstac's
  store over the session (``checked_store``, as ``open_stac`` reads it: virtual chunks fetched
  from their sources) opened with ``open_zarr_dataset``, through virtualstac's codec pipeline,
  and the session's own store with ``xr.open_zarr`` through zarr's ``BatchedCodecPipeline``
  (the peer: what a plain zarr reader of the repository gets);
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
    Series,
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


def publish_icechunk(path: Path, repository: Path) -> None:
    """Publish our references to ``path`` into a new local Icechunk repository, committed."""
    import icechunk

    from virtualstac.writers import authorize_containers, ensure_containers, required_containers
    from virtualstac.writers.icechunk import write_icechunk

    group = _ours_store(str(path)).group
    containers = required_containers(group)
    config = ensure_containers(icechunk.RepositoryConfig.default(), containers)
    repo = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(repository)),
        config=config,
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    session = repo.writable_session("main")
    write_icechunk(group, session.store)
    session.commit("bench_store_read")


def _icechunk_store(repository: str, direct: bool) -> Any:
    """A read-only session's store of the published repository, its containers authorized;
    ``direct``: virtualstac's store over it, which reads virtual chunks from their sources as
    ``open_stac`` does (else Icechunk's store, as any zarr reader has it)."""
    import icechunk

    from virtualstac import ObjectStoreRegistry
    from virtualstac.stac.icechunk_reads import checked_store

    storage = icechunk.local_filesystem_storage(repository)
    config = icechunk.Repository.fetch_config(storage)
    assert config is not None
    credentials = {
        prefix: icechunk.credentials.LocalFileSystemAccess
        for prefix in config.virtual_chunk_containers
    }
    repo = icechunk.Repository.open(
        storage, authorize_virtual_chunk_access=icechunk.containers_credentials(credentials)
    )
    session = repo.readonly_session("main")
    if not direct:
        return session.store
    url = Path(repository).as_uri()
    registry = ObjectStoreRegistry()
    for prefix in (*config.virtual_chunk_containers, url):
        registry.register(prefix)
    return checked_store(repo, session, url, registry, list(config.virtual_chunk_containers))


@contextlib.contextmanager
def _zarr_settings(params: dict[str, Any]) -> Iterator[None]:
    """zarr's ``async.concurrency`` and codec pipeline as the reader asks, for the reads."""
    import zarr

    settings: dict[str, Any] = {}
    if params.get("concurrency") is not None:
        settings["async.concurrency"] = params["concurrency"]
    if params.get("zarr_pipeline"):
        settings["codec_pipeline.path"] = "zarr.core.codec_pipeline.BatchedCodecPipeline"
    with zarr.config.set(settings):
        yield


def worker_read(params: dict[str, Any]) -> dict[str, Any]:
    """Read the whole variable ``repeat`` times with one reader; time each read."""
    reader, path, repeat = params["reader"], params["path"], params["repeat"]
    start = time.perf_counter()
    opener: Any
    if reader in ("ours", "vz", "icechunk"):
        import xarray as xr

        if reader == "icechunk":
            import virtualstac  # noqa: F401  (its codec pipeline becomes zarr's)

            store = _icechunk_store(params["repository"], not params.get("zarr_pipeline"))
        else:
            store = _ours_store(path) if reader == "ours" else _vz_store(path)
        kwargs: dict[str, Any] = {"consolidated": False}
        if reader == "vz":
            kwargs["zarr_format"] = 3  # VirtualiZarr's store cannot be auto-detected (#783)
        if not params.get("dask"):
            kwargs["chunks"] = None
        elif params.get("dask_chunks") is not None:
            kwargs["chunks"] = params["dask_chunks"]

        if reader == "vz" or params.get("plain"):
            open_store: Any = xr.open_zarr
        else:
            from virtualstac.xarray import open_zarr_dataset as open_store

        def opener() -> Any:
            return open_store(store, **kwargs)[VAR]

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
    with _zarr_settings(params):
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

# Dask chunks of one whole time step: many source chunks per task.
FRAME = {"time": 1, "y": -1, "x": -1}

# (label, reader, options); peers use the same options as ours.
READERS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("h5py dset[...]", "h5py", {}),
    ("netCDF4 var[:]", "netcdf4", {}),
    ("store, open_zarr(chunks=None)", "ours", {}),
    ("store, open_zarr(chunks=None)", "vz", {}),
    ("store, plain xr.open_zarr(chunks=None)", "ours-plain", {"plain": True}),
    ("store, async.concurrency=64", "ours", {"concurrency": 64}),
    ("store, async.concurrency=64", "vz", {"concurrency": 64}),
    ("store, open_zarr() with dask", "ours", {"dask": True}),
    ("store, open_zarr() with dask", "vz", {"dask": True}),
    ("store, dask, one time step per task", "ours", {"dask": True, "dask_chunks": FRAME}),
    ("store, dask, one time step per task", "vz", {"dask": True, "dask_chunks": FRAME}),
    ("published Icechunk, open_zarr(chunks=None)", "icechunk", {}),
    ("published Icechunk, open_zarr(chunks=None)", "icechunk-zarr", {"zarr_pipeline": True}),
)
WHO = {
    "ours": "virtualstac",
    "vz": "VirtualiZarr",
    "icechunk": "virtualstac's pipeline",
    "icechunk-zarr": "zarr's pipeline",
    "ours-plain": "virtualstac",
}


def _measure_file(
    kind: str, path: Path, repository: Path, repeat: int, dask_repeat: int, with_peer: bool
) -> dict[tuple[str, str], dict[str, Any] | None]:
    results: dict[tuple[str, str], dict[str, Any] | None] = {}
    for label, reader, options in READERS:
        if reader == "vz" and not with_peer:
            continue
        who = WHO.get(reader, reader)
        progress(f"{kind}: {who} {label} ...")
        n = dask_repeat if options.get("dask") else repeat
        params = {
            "reader": reader.removesuffix("-zarr").removesuffix("-plain"),
            "path": str(path),
            "repeat": n,
        }
        result = run_worker(SCRIPT, "read", {**params, "repository": str(repository), **options})
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
    published = "published Icechunk, open_zarr(chunks=None)"
    rows.append(
        Row(
            f"{kind}: {published}",
            "MB/s",
            mbps(published, "icechunk"),
            mbps(published, "icechunk-zarr"),
            better="higher",
            peer_name="zarr's BatchedCodecPipeline",
        )
    )

    def against_h5py(figure: str, value: float | None, target: str = "") -> Row:
        native = "h5py dset[...]"
        return Row(
            f"{kind}: {figure}",
            "MB/s",
            value,
            mbps(native, "h5py"),
            better="higher",
            peer_name=native,
            target=target,
        )

    rows.append(against_h5py(f"{published} vs native", mbps(published, "icechunk"), TARGETS[kind]))
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
                target=TARGETS[kind] if reader == "h5py" else "",
            )
        )
    rows.append(
        against_h5py(
            "our store through xr.open_zarr itself (zarr walks the chunks) vs native",
            mbps("store, plain xr.open_zarr(chunks=None)", "ours-plain"),
        )
    )
    _SERIES.extend(
        Series(PLOT, name, "codec", "MB/s (uncompressed)", [(kind, value)])
        for name, value in (
            ("virtualstac store", ours),
            ("VirtualiZarr store", mbps(base, "vz")),
            ("Icechunk, virtualstac's pipeline", mbps(published, "icechunk")),
            ("Icechunk, zarr's pipeline", mbps(published, "icechunk-zarr")),
            ("h5py", mbps("h5py dset[...]", "h5py")),
            ("netCDF4", mbps("netCDF4 var[:]", "netcdf4")),
        )
        if value is not None
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


PLOT = "Read throughput per codec"
# Issue 11: zlib+shuffle at least 1.5x h5py's (and VirtualiZarr's), uncompressed at least h5py's.
TARGETS = {"zlib+shuffle": ">= 1.5x", "raw": ">= 1x"}
_SERIES: list[Series] = []


def series() -> list[Series]:
    """MB/s per codec and reader from the last :func:`run`."""
    return list(_SERIES)


def run(quick: bool = False) -> list[Row]:
    """Write the two files, run every reader on each, return the comparison rows."""
    _SERIES.clear()
    with_peer = peer_available()
    frames = 4 if quick else 50
    # Best of 7: a read of the whole variable takes 0.1-0.5 s, and the machine's speed moves
    # by tens of percent within seconds; best of 3 told a reader's luck as often as its speed.
    repeat, dask_repeat = (3, 1) if quick else (7, 3)
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
            repository = Path(tmp) / f"{kind.replace('+', '_')}.icechunk"
            publish_icechunk(path, repository)
            warm_page_cache(path)
            results = _measure_file(kind, path, repository, repeat, dask_repeat, with_peer)
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
