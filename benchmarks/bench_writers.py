"""Writer benchmarks: 1M references to Icechunk, Kerchunk JSON and Kerchunk parquet.

One virtual dataset, a float32 variable on a 1000 x 1000 chunk grid whose row ``i`` lies in file
``i``, over 1,000 distinct ~60-character S3 URLs (the references of ``bench_manifest.py``), is
built for virtualstac (its ``ManifestArray``) and for VirtualiZarr (its ``ManifestArray``) before
timing starts. Each write runs in a fresh subprocess and goes to a fresh local target:

- Icechunk: a local repository whose virtual chunk container for the URLs is declared when the
  repository is created (untimed); the timed region is the write and the commit;
- Kerchunk JSON: one ``.json`` file;
- Kerchunk parquet: fsspec's parquet layout, 100,000 references per file (both defaults).

Every output is read back outside the timed region (Icechunk's chunk iterator, ``json.load``,
fsspec's ``LazyReferenceMapper``) and sampled references are compared with the input; a mismatch
prints a ``WARNING``.

Run ``python benchmarks/bench_writers.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from _common import (
    Row,
    peer_available,
    print_table,
    progress,
    reset_peak_rss,
    rss_bytes,
    run_worker,
    trim_heap,
    window_peak_rss_bytes,
    worker_main,
)
from bench_manifest import N_FILES, file_urls, reference_arrays

SCRIPT = Path(__file__).resolve()
VAR = "t2m"
DIMS = ("time", "cell")
CHUNK = 12_500  # float32 values per chunk: 50 kB before zlib, 30-50 kB after
CODECS: list[dict[str, Any]] = [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}},
    {"name": "numcodecs.zlib", "configuration": {"level": 4}},
]
CONTAINER = "s3://example-bucket/era5-reanalysis/2024/"
MODIFIED = datetime(2024, 7, 1, 12, 0, 0, tzinfo=UTC)
TARGETS = ("icechunk", "json", "parquet")
LIBS = ("ours", "vz")
SAMPLES = 2000
MIB = 1024**2


# -- the dataset ---------------------------------------------------------------------------


def virtual_dataset(lib: str, rows: int, cols: int) -> Any:
    """A one-variable virtual dataset over ``rows x cols`` references, for ``lib``.

    Both manifests come from ``from_arrays`` on the same arrays, without path validation (the
    URLs are well formed, and VirtualiZarr's per-element validation is slow). Ours also records
    each file's version, as our parsers do; VirtualiZarr has no such record.
    """
    import xarray as xr

    paths, offsets, lengths = reference_arrays(rows, cols)
    shape = (rows, cols * CHUNK)
    if lib == "ours":
        from virtualstac import ChunkManifest, ManifestArray
        from virtualstac.manifests.metadata import create_v3_array_metadata
        from virtualstac.manifests.sources import SourceStamp

        metadata = create_v3_array_metadata(
            shape=shape,
            data_type=np.dtype("float32"),
            chunk_shape=(1, CHUNK),
            codecs=CODECS,
            dimension_names=DIMS,
        )
        stamps = {
            url: SourceStamp(
                last_modified=MODIFIED + timedelta(minutes=i), etag=f'"{i:032x}"', size=4 << 20
            )
            for i, url in enumerate(file_urls())
        }
        manifest = ChunkManifest.from_arrays(
            paths=paths, offsets=offsets, lengths=lengths, validate_paths=False
        ).with_source_stamps(stamps)
        array: Any = ManifestArray(metadata, manifest)
    else:
        from virtualizarr.manifests import ChunkManifest as PeerManifest
        from virtualizarr.manifests import ManifestArray as PeerArray
        from virtualizarr.manifests.utils import create_v3_array_metadata as peer_metadata

        metadata = peer_metadata(
            shape=shape,
            data_type=np.dtype("float32"),
            chunk_shape=(1, CHUNK),
            codecs=CODECS,
            dimension_names=DIMS,
        )
        array = PeerArray(
            metadata=metadata,
            chunkmanifest=PeerManifest.from_arrays(
                paths=paths, offsets=offsets, lengths=lengths, validate_paths=False
            ),
        )
    return xr.Dataset({VAR: xr.Variable(DIMS, array)})


def expected_refs(rows: int, cols: int) -> tuple[list[str], np.ndarray[Any, Any], Any]:
    """The URL table, the flat offsets and the flat lengths the outputs must hold."""
    _, offsets, lengths = reference_arrays(rows, cols)
    return file_urls(), offsets.ravel(), lengths.ravel()


def sample_positions(n: int) -> np.ndarray[Any, Any]:
    """Flat grid positions to check: both ends and a seeded random sample."""
    rng = np.random.default_rng(1)
    return np.unique(np.concatenate([[0, n - 1], rng.integers(0, n, size=SAMPLES)]))


# -- writing -------------------------------------------------------------------------------


def _icechunk_repo(directory: Path, fresh: bool) -> Any:
    """A local repository that declares (and authorizes) the container of the S3 URLs."""
    import icechunk

    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(CONTAINER, icechunk.s3_store(region="us-east-1"))
    )
    storage = icechunk.local_filesystem_storage(str(directory))
    credentials = icechunk.containers_credentials({CONTAINER: icechunk.s3_anonymous_credentials()})
    if fresh:
        return icechunk.Repository.create(
            storage, config=config, authorize_virtual_chunk_access=credentials
        )
    return icechunk.Repository.open(storage, authorize_virtual_chunk_access=credentials)


def prepare(target: str, out: Path) -> Callable[[str, Any], None]:
    """Set up ``out`` for ``target`` (untimed) and return the timed write ``(lib, ds) -> None``."""
    if target == "icechunk":
        session = _icechunk_repo(out, fresh=True).writable_session("main")

        def write_icechunk(lib: str, ds: Any) -> None:
            if lib == "ours":
                ds.virtual.to_icechunk(session.store, commit="1M references")
            else:
                ds.vz.to_icechunk(session.store)
                session.commit("1M references")

        return write_icechunk
    out.mkdir(parents=True)
    path = out / ("refs.json" if target == "json" else "refs.parq")

    def write_kerchunk(lib: str, ds: Any) -> None:
        accessor = ds.virtual if lib == "ours" else ds.vz
        accessor.to_kerchunk(str(path), format=target)

    return write_kerchunk


def output_bytes(out: Path) -> int:
    """Bytes of every file under ``out``."""
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


# -- reading back --------------------------------------------------------------------------


def _read_icechunk(out: Path, positions: np.ndarray[Any, Any], cols: int) -> list[Any]:
    from zarr.core.sync import sync

    store = _icechunk_repo(out, fresh=False).readonly_session("main").store
    wanted = {int(p): i for i, p in enumerate(positions)}
    found: list[Any] = [None] * len(positions)

    async def collect() -> None:
        async for coords, _, paths, offsets, lengths, _ in store.array_chunk_iterator("/" + VAR):
            flat = coords[:, 0].astype(np.int64) * cols + coords[:, 1]
            for k in np.flatnonzero(np.isin(flat, positions)):
                found[wanted[int(flat[k])]] = [paths[k], int(offsets[k]), int(lengths[k])]

    sync(collect())
    return found


def _read_json(out: Path, positions: np.ndarray[Any, Any], cols: int) -> list[Any]:
    refs = json.loads((out / "refs.json").read_text())["refs"]
    return [refs.get(f"{VAR}/{p // cols}.{p % cols}") for p in positions.tolist()]


def _read_parquet(out: Path, positions: np.ndarray[Any, Any], cols: int) -> list[Any]:
    from fsspec.implementations.reference import LazyReferenceMapper

    mapper = LazyReferenceMapper(str(out / "refs.parq"))
    found: list[Any] = []
    for p in positions.tolist():
        try:
            found.append(mapper[f"{VAR}/{p // cols}.{p % cols}"])
        except KeyError:
            found.append(None)
    return found


READERS = {"icechunk": _read_icechunk, "json": _read_json, "parquet": _read_parquet}


def count_mismatches(target: str, out: Path, rows: int, cols: int) -> tuple[int, int]:
    """How many sampled references read back differently from the input, of how many."""
    urls, offsets, lengths = expected_refs(rows, cols)
    positions = sample_positions(rows * cols)
    found = READERS[target](out, positions, cols)
    bad = 0
    for p, ref in zip(positions.tolist(), found, strict=True):
        want = [urls[(p // cols) % N_FILES], int(offsets[p]), int(lengths[p])]
        if ref is None or [ref[0], int(ref[1]), int(ref[2])] != want:
            bad += 1
    return bad, len(positions)


# -- the worker (runs in a fresh process) --------------------------------------------------


def time_commits() -> list[float]:
    """Record the duration of every Icechunk ``Session.commit`` from now on, in this process.

    Both libraries commit through this method (ours inside ``to_icechunk(commit=...)``), so the
    commit, Icechunk's own work, can be told apart from each writer's.
    """
    from icechunk.session import Session

    durations: list[float] = []
    commit = Session.commit

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return commit(self, *args, **kwargs)
        finally:
            durations.append(time.perf_counter() - start)

    Session.commit = timed  # type: ignore[method-assign]
    return durations


def worker_write(params: dict[str, Any]) -> dict[str, Any]:
    """Write the dataset ``repeat`` times to fresh targets; time each write, check the first."""
    lib, target, rows, cols = params["lib"], params["target"], params["rows"], params["cols"]
    ds = virtual_dataset(lib, rows, cols)
    commits = time_commits() if target == "icechunk" else []
    runs: list[float] = []
    result: dict[str, Any] = {"n": rows * cols}
    with tempfile.TemporaryDirectory(prefix="bench-writers-") as tmp:
        for run in range(params["repeat"]):
            out = Path(tmp) / f"run{run}"
            write = prepare(target, out)
            trim_heap()
            base = rss_bytes()
            windowed = reset_peak_rss()
            start = time.perf_counter()
            write(lib, ds)
            runs.append(time.perf_counter() - start)
            if run == 0:
                if windowed:
                    result["write_rss"] = window_peak_rss_bytes() - base
                result["bytes"] = output_bytes(out)
                result["mismatches"], result["checked"] = count_mismatches(target, out, rows, cols)
            shutil.rmtree(out)
    if commits:
        result["commit_best"] = min(commits)
        result["before_commit_best"] = min(r - c for r, c in zip(runs, commits, strict=True))
    return {**result, "first": runs[0], "best": min(runs), "runs": [round(r, 3) for r in runs]}


WORKERS = {"write": worker_write}


# -- driver --------------------------------------------------------------------------------


def _measure(target: str, params: dict[str, Any], libs: tuple[str, ...]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for lib in libs:
        who = "virtualstac" if lib == "ours" else "VirtualiZarr"
        progress(f"write {target}: {who} ...")
        result = run_worker(SCRIPT, "write", {**params, "lib": lib, "target": target})
        results[lib] = result
        if result is None:
            continue
        progress(
            f"write {target}: {who}: runs={result['runs']} s, "
            f"{result['bytes'] / MIB:.1f} MiB written, checked {result['checked']} refs"
        )
        if result["mismatches"]:
            print(
                f"  WARNING: {who} {target}: {result['mismatches']} of {result['checked']} "
                "sampled references read back differently from the input"
            )
    return results


def _get(results: dict[str, Any], lib: str, key: str, scale: float = 1.0) -> float | None:
    result = results.get(lib)
    if result is None or key not in result:
        return None
    return float(result[key]) * scale


# The Icechunk figure is the closest one and the noisiest (the commit varies by +-30% on a busy
# machine), so it gets more runs.
REPEATS = {"icechunk": 5, "json": 3, "parquet": 3}
TITLES = {
    "icechunk": ("Icechunk write + commit", ">= 1x"),
    "json": ("Kerchunk JSON write", ""),
    "parquet": ("Kerchunk parquet write", ">= 2x"),
}


def run(quick: bool = False) -> list[Row]:
    """Run every writer benchmark and return the rows of the comparison table."""
    libs = LIBS if peer_available() else ("ours",)
    cols = 100 if quick else 1000  # 100k or 1M references over 1000 files
    n = N_FILES * cols
    label = f"{n // 1000}k refs" if n < 1_000_000 else f"{n // 1_000_000}M refs"
    print(f"\nbench_writers: {label} over {N_FILES} S3 URLs; each write in a fresh process")
    rows: list[Row] = []
    for target in TARGETS:
        repeat = 1 if quick else REPEATS[target]
        params = {"rows": N_FILES, "cols": cols, "repeat": repeat}
        results = _measure(target, params, libs)
        title, target_ratio = TITLES[target]
        if repeat > 1:
            rows.append(
                Row(
                    f"{title} ({label}), best of {repeat}",
                    "s",
                    _get(results, "ours", "best"),
                    _get(results, "vz", "best"),
                    target=target_ratio,
                )
            )
        rows.append(
            Row(
                f"{title} ({label}), first call",
                "s",
                _get(results, "ours", "first"),
                _get(results, "vz", "first"),
                target=target_ratio,
            )
        )
        if target == "icechunk":
            best = "best" if repeat > 1 else "one run"
            rows.append(
                Row(
                    f"  of which before the commit ({best})",
                    "s",
                    _get(results, "ours", "before_commit_best"),
                    _get(results, "vz", "before_commit_best"),
                )
            )
            rows.append(
                Row(
                    f"  of which Icechunk's commit ({best})",
                    "s",
                    _get(results, "ours", "commit_best"),
                    _get(results, "vz", "commit_best"),
                )
            )
        rows.append(
            Row(
                f"{title}: output size",
                "MiB",
                _get(results, "ours", "bytes", 1 / MIB),
                _get(results, "vz", "bytes", 1 / MIB),
            )
        )
        rows.append(
            Row(
                f"{title}: peak RSS above the dataset",
                "MiB",
                _get(results, "ours", "write_rss", 1 / MIB),
                _get(results, "vz", "write_rss", 1 / MIB),
            )
        )
    return rows


def main() -> None:
    """Parse ``--quick`` and print the writer comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100k references, one run each")
    args = parser.parse_args()
    rows = run(quick=args.quick)
    print_table("Writers", rows, peer_skipped=not peer_available())


if __name__ == "__main__":
    if not worker_main(WORKERS):
        main()
