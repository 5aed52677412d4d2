"""Chunk manifest benchmarks: memory per reference, dict round trips, from_arrays, pickle.

Each figure is measured for virtualstac's ``ChunkManifest`` and for VirtualiZarr's, every one in
its own fresh subprocess of this Python. The references are realistic: a chunk grid with one
row per file, 1,000 distinct ~60-character S3 URLs, contiguous chunks of 30-50 kB per file.

Run ``python benchmarks/bench_manifest.py [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import (
    Row,
    peer_available,
    print_table,
    progress,
    rss_bytes,
    run_worker,
    time_calls,
    trim_heap,
    worker_main,
)

SCRIPT = Path(__file__).resolve()
N_FILES = 1000
LIBS = ("ours", "vz")


# -- inputs --------------------------------------------------------------------------------


def file_urls(n: int = N_FILES) -> list[str]:
    """Distinct, realistic object URLs, about 60 characters each."""
    return [
        f"s3://example-bucket/era5-reanalysis/2024/{i // 84 % 12 + 1:02d}/{i % 28 + 1:02d}/"
        f"file_{i:06d}.nc"
        for i in range(n)
    ]


def reference_arrays(
    rows: int, cols: int
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Paths (StringDType, as VirtualiZarr requires), offsets and lengths of a (rows, cols) grid.

    Row ``i`` holds the chunks of file ``i % 1000``, laid out one after another from byte 4096.
    """
    rng = np.random.default_rng(0)
    lengths = rng.integers(30_000, 50_000, size=(rows, cols), dtype=np.uint64)
    offsets = np.cumsum(lengths, axis=1, dtype=np.uint64) - lengths + np.uint64(4096)
    table = np.asarray(file_urls(), dtype=np.dtypes.StringDType())
    paths = table[np.arange(rows) % N_FILES][:, None].repeat(cols, axis=1)
    return paths, offsets, lengths


def reference_dict(rows: int, cols: int) -> dict[str, dict[str, Any]]:
    """The same references as a ``{"i.j": {"path", "offset", "length"}}`` dict."""
    urls = file_urls()
    _, offsets, lengths = reference_arrays(rows, cols)
    offs, lens = offsets.tolist(), lengths.tolist()
    return {
        f"{i}.{j}": {"path": urls[i % N_FILES], "offset": offs[i][j], "length": lens[i][j]}
        for i in range(rows)
        for j in range(cols)
    }


def manifest_class(lib: str) -> Any:
    """``ChunkManifest`` of virtualstac (``"ours"``) or of VirtualiZarr (``"vz"``)."""
    if lib == "ours":
        from virtualstac import ChunkManifest

        return ChunkManifest
    from virtualizarr.manifests import ChunkManifest as PeerChunkManifest

    return PeerChunkManifest


# -- workers (each runs in a fresh process) ------------------------------------------------


def worker_memory(params: dict[str, Any]) -> dict[str, Any]:
    """RSS growth per reference of a manifest built with ``from_arrays`` once its inputs are freed.

    ``validate_paths=False`` for both libraries: validation does not change what is kept, and
    VirtualiZarr's per-element validation would take minutes at this size.
    """
    cls = manifest_class(params["lib"])
    rows, cols = params["rows"], params["cols"]
    n = rows * cols
    trim_heap()
    base = rss_bytes()
    paths, offsets, lengths = reference_arrays(rows, cols)
    inputs = rss_bytes() - base
    start = time.perf_counter()
    if params.get("method") == "from_path_table":  # ours only: what a parser calls
        codes = np.arange(rows) % N_FILES
        manifest = cls.from_path_table(
            path_table=file_urls(),
            path_codes=codes[:, None].repeat(cols, axis=1),
            offsets=offsets,
            lengths=lengths,
            validate_paths=False,
        )
        del codes
    else:
        manifest = cls.from_arrays(
            paths=paths, offsets=offsets, lengths=lengths, validate_paths=False
        )
    seconds = time.perf_counter() - start
    peak = rss_bytes() - base
    del paths, offsets, lengths
    trim_heap()
    kept = rss_bytes() - base
    return {
        "n": n,
        "seconds": seconds,
        "inputs_bytes": inputs,
        "rss_per_ref": kept / n,
        "nbytes_per_ref": manifest.nbytes / n,
        "rss_after_build_per_ref": peak / n,
    }


def worker_dict_init(params: dict[str, Any]) -> dict[str, Any]:
    """Time ``ChunkManifest(entries)``; the input dict is built first, untimed."""
    cls = manifest_class(params["lib"])
    entries = reference_dict(params["rows"], params["cols"])
    gc.collect()
    timing = time_calls(lambda: cls(entries), params["repeat"])
    return {"n": len(entries), **timing.as_dict()}


def worker_dict_export(params: dict[str, Any]) -> dict[str, Any]:
    """Time ``manifest.dict()``; the manifest is built from the same dict first, untimed."""
    cls = manifest_class(params["lib"])
    entries = reference_dict(params["rows"], params["cols"])
    manifest = cls(entries)
    checked: list[bool] = []

    def check(result: Any) -> None:
        if not checked:
            checked.append(result == entries)

    gc.collect()
    timing = time_calls(manifest.dict, params["repeat"], after=check)
    return {"n": len(entries), "roundtrip_equal": checked[0], **timing.as_dict()}


def worker_from_arrays(params: dict[str, Any]) -> dict[str, Any]:
    """Time ``from_arrays(validate_paths=True)``, then pickle the manifest."""
    cls = manifest_class(params["lib"])
    paths, offsets, lengths = reference_arrays(params["rows"], params["cols"])
    n = paths.size
    gc.collect()
    timing = time_calls(
        lambda: cls.from_arrays(paths=paths, offsets=offsets, lengths=lengths, validate_paths=True),
        params["repeat"],
    )
    manifest = cls.from_arrays(paths=paths, offsets=offsets, lengths=lengths, validate_paths=True)
    start = time.perf_counter()
    blob = pickle.dumps(manifest, protocol=pickle.HIGHEST_PROTOCOL)
    dumps = time.perf_counter() - start
    start = time.perf_counter()
    restored = pickle.loads(blob)
    loads = time.perf_counter() - start
    same = bool(restored == manifest)
    return {
        "n": n,
        **timing.as_dict(),
        "pickle_per_ref": len(blob) / n,
        "pickle_dumps": dumps,
        "pickle_loads": loads,
        "pickle_roundtrip_equal": same,
    }


WORKERS = {
    "memory": worker_memory,
    "dict_init": worker_dict_init,
    "dict_export": worker_dict_export,
    "from_arrays": worker_from_arrays,
}


# -- driver --------------------------------------------------------------------------------


def _measure(
    name: str, label: str, params: dict[str, Any], libs: tuple[str, ...]
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for lib in libs:
        who = "virtualstac" if lib == "ours" else "VirtualiZarr"
        progress(f"{label}: {who} ...")
        result = run_worker(SCRIPT, name, {**params, "lib": lib})
        results[lib] = result
        if result is not None:
            summary = ", ".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                for k, v in result.items()
                if k != "peak_rss"
            )
            progress(f"{label}: {who}: {summary}")
    return results


def _get(results: dict[str, Any], lib: str, key: str, scale: float = 1.0) -> float | None:
    result = results.get(lib)
    return None if result is None else float(result[key]) * scale


def run(quick: bool = False) -> list[Row]:
    """Run every manifest benchmark and return the rows of the comparison table."""
    libs = LIBS if peer_available() else ("ours",)
    memory_cols = 1000 if quick else 10_000  # 1M or 10M references over 1000 files
    ops_cols = 100 if quick else 1000  # 100k or 1M references
    repeat = 1 if quick else 3
    n_mem, n_ops = N_FILES * memory_cols, N_FILES * ops_cols
    mem_label = f"{n_mem // 1_000_000}M refs"
    ops_label = f"{n_ops // 1000}k refs" if n_ops < 1_000_000 else f"{n_ops // 1_000_000}M refs"

    print(f"\nbench_manifest: {N_FILES} distinct ~60-char URLs; each figure in a fresh process")
    memory = _measure(
        "memory", f"memory, from_arrays {mem_label}", {"rows": N_FILES, "cols": memory_cols}, libs
    )
    table_memory = _measure(
        "memory",
        f"memory, from_path_table {mem_label}",
        {"rows": N_FILES, "cols": memory_cols, "method": "from_path_table"},
        ("ours",),
    )
    params = {"rows": N_FILES, "cols": ops_cols, "repeat": repeat}
    init = _measure("dict_init", f"ChunkManifest(dict) {ops_label}", params, libs)
    export = _measure("dict_export", f".dict() {ops_label}", params, libs)
    arrays = _measure("from_arrays", f"from_arrays(validate_paths=True) {ops_label}", params, libs)
    for name, results in (("dict()", export), ("pickle", arrays)):
        key = "roundtrip_equal" if name == "dict()" else "pickle_roundtrip_equal"
        for lib, result in results.items():
            if result is not None and not result[key]:
                print(f"  WARNING: {lib} {name} round trip did not reproduce the input")

    rows = [
        Row(
            f"memory/ref, RSS ({mem_label})",
            "B/ref",
            _get(memory, "ours", "rss_per_ref"),
            _get(memory, "vz", "rss_per_ref"),
            target="<= 24 (VZ ~100)",
        ),
        Row(
            f"memory/ref, .nbytes ({mem_label})",
            "B/ref",
            _get(memory, "ours", "nbytes_per_ref"),
            _get(memory, "vz", "nbytes_per_ref"),
            target="should match RSS",
        ),
        Row(
            f"memory/ref, RSS, ours via from_path_table ({mem_label})",
            "B/ref",
            _get(table_memory, "ours", "rss_per_ref"),
            None,
            target="<= 24",
            peer_name="-",
        ),
        Row(
            f"from_arrays, no validation ({mem_label})",
            "s",
            _get(memory, "ours", "seconds"),
            _get(memory, "vz", "seconds"),
        ),
    ]
    for label, results in (
        (f"ChunkManifest(dict) {ops_label}", init),
        (f".dict() {ops_label}", export),
        (f"from_arrays(validate_paths=True) {ops_label}", arrays),
    ):
        target = ">= 10x" if "dict" in label else ""
        rows.append(
            Row(
                f"{label}, first call",
                "s",
                _get(results, "ours", "first"),
                _get(results, "vz", "first"),
                target=target,
            )
        )
        if repeat > 1:
            rows.append(
                Row(
                    f"{label}, best of {repeat}",
                    "s",
                    _get(results, "ours", "best"),
                    _get(results, "vz", "best"),
                    target=target,
                )
            )
    rows.append(
        Row(
            f"pickle size ({ops_label})",
            "B/ref",
            _get(arrays, "ours", "pickle_per_ref"),
            _get(arrays, "vz", "pickle_per_ref"),
        )
    )
    rows.append(
        Row(
            f"pickle dumps + loads ({ops_label})",
            "s",
            None
            if arrays.get("ours") is None
            else arrays["ours"]["pickle_dumps"] + arrays["ours"]["pickle_loads"],
            None
            if arrays.get("vz") is None
            else arrays["vz"]["pickle_dumps"] + arrays["vz"]["pickle_loads"],
        )
    )
    return rows


def main() -> None:
    """Parse ``--quick`` and print the manifest comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one run each")
    args = parser.parse_args()
    rows = run(quick=args.quick)
    print_table("Chunk manifests", rows, peer_skipped=not peer_available())


if __name__ == "__main__":
    if not worker_main(WORKERS):
        main()
